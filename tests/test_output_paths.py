"""Every output option of every command that names a place that cannot be written (here
a path under a file, which not even root can create) gets one line and a non-zero exit,
never a traceback and never a result that silently went nowhere."""

from __future__ import annotations

from pathlib import Path

import pytest

from xfbench.harness import cli

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "xfbench" / "report" / "references" / "2026-11-24-amd-epyc-zen5-2c"
NOWHERE = "/dev/null/cannot"  # its parent is a file


def _copy(tmp_path: Path) -> Path:
    """A copy of the checked-in run, as a runner folder of one's own."""
    import shutil

    folder = tmp_path / "run"
    shutil.copytree(RUN, folder)
    return folder


def _bundle(tmp_path: Path) -> Path:
    """A bundle of a copy of the checked-in run (xfbench bundle)."""
    from xfbench.bundle.pack import pack

    return pack(_copy(tmp_path))[0]


COMMANDS = {
    "compare --json": lambda tmp: ["compare", str(RUN), str(RUN), "--json", NOWHERE],
    "compare --bmf": lambda tmp: ["compare", str(RUN), str(RUN), "--bmf", NOWHERE],
    "report --out": lambda tmp: ["report", str(RUN), "--out", NOWHERE, "--format", "md"],
    "profile --plot": lambda tmp: ["profile", "fcn5", "--plot", NOWHERE + ".png"],
    "bundle --out": lambda tmp: ["bundle", str(_copy(tmp)), "--out", NOWHERE + ".zip"],
    "collect --db": lambda tmp: ["collect", str(_bundle(tmp)), "--db", NOWHERE + ".sqlite"],
    "acceptance --out": lambda tmp: ["acceptance", "--device", "cpu", "--out", NOWHERE],
    "acceptance --pack": lambda tmp: ["acceptance", "--device", "cpu", "--pack", NOWHERE],
    "acceptance --archive": lambda tmp: [
        "acceptance",
        "--device",
        "cpu",
        "--out",
        str(tmp / "out"),
        "--archive",
        NOWHERE,
    ],  # fmt: skip
}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_an_output_that_cannot_be_written_is_one_line_and_a_failure(command, tmp_path, capsys):
    argv = COMMANDS[command](tmp_path)
    code = cli.main(argv)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code not in (0, None), err
    assert "Traceback" not in err and len(lines) == 1, err
    assert "/dev/null/cannot" in lines[0] and lines[0].startswith("xfbench"), lines[0]
