"""The child-process launcher: what it reads of the kernel to tell why a child died."""

from __future__ import annotations

import pytest

from xfbench.harness.launch import oom_kills


def _tree(tmp_path, cgroup_lines: str, files: dict[str, str]):
    (tmp_path / "proc").mkdir()
    proc = tmp_path / "proc" / "cgroup"
    proc.write_text(cgroup_lines)
    root = tmp_path / "sys"
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return proc, root


@pytest.mark.parametrize(
    "cgroup, files",
    [
        # cgroup v2 alone
        ("0::/job\n", {"job/memory.events": "low 0\nhigh 0\nmax 3\noom 2\noom_kill 2\n"}),
        # v1 controllers with v2 mounted beside them (this project's machines)
        (
            "4:memory:/job\n0::/job\n",
            {"memory/job/memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n"},
        ),
        ("0::/job\n", {"unified/job/memory.events": "oom 2\noom_kill 2\n"}),
        # a container that sees its own cgroup as the root of the v1 hierarchy
        ("4:memory:/docker/abc\n", {"memory/memory.oom_control": "oom_kill 2\n"}),
    ],
    ids=["v2", "v1", "hybrid-unified", "v1-container-root"],
)
def test_out_of_memory_kills_are_counted_on_cgroup_v1_and_v2(tmp_path, cgroup, files):
    proc, root = _tree(tmp_path, cgroup, files)
    assert oom_kills(proc, root) == 2


def test_no_readable_counter_is_none_not_zero(tmp_path):
    proc, root = _tree(tmp_path, "3:cpu:/job\n", {})
    assert oom_kills(proc, root) is None
