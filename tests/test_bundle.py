"""Bundles and the results database: a bundle is checked on reading (altered, added,
removed or cut short: refused in one line, nothing collected lost); collecting twice gives
the same database; report, score and compare read it as they read the folders; a
reference of several runs pools each cell's rounds."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import subprocess
import sys
import zipfile
from hashlib import sha256
from pathlib import Path

import pytest

from xfbench.bundle import database
from xfbench.bundle.cli import collect_main
from xfbench.bundle.cli import main as bundle_main
from xfbench.bundle.pack import BundleError, pack
from xfbench.bundle.read import read
from xfbench.report import score
from xfbench.report.load import LoadError, load_many

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "xfbench" / "report" / "references" / "2026-11-24-amd-epyc-zen5-2c"


def _runs(tmp_path: Path, factors=(1.0, 1.04, 0.97)) -> list[Path]:
    """Three runner folders of one machine: the checked-in reference's cells, each run's
    rounds scaled by its factor, with a LoadGen log and a group log beside the records."""
    doc = json.loads((REFERENCE / "merged.json").read_text())
    folders = []
    for i, factor in enumerate(factors):
        run = json.loads(json.dumps(doc))
        for entry in run["benchmarks"]:
            stats = entry["stats"]
            stats["data"] = [x * factor for x in stats["data"]]
            stats["median"] *= factor
            if "seconds_per_batch" in entry["extra_info"]:
                entry["extra_info"]["seconds_per_batch"] = stats["median"]
        folder = tmp_path / f"2026-11-2{i}-host"
        (folder / "loadgen" / "serve-x").mkdir(parents=True)
        (folder / "logs").mkdir()
        (folder / "merged.json").write_text(json.dumps(run))
        shutil.copy(REFERENCE / "selection.json", folder / "selection.json")
        (folder / "loadgen" / "serve-x" / "mlperf_log_summary.txt").write_text("VALID\n")
        (folder / "logs" / "torch-cpu-t1.log").write_text("3 passed\n")
        (folder / "report.md").write_text("a report: made again from the records\n")
        folders.append(folder)
    return folders


def _dump(db: Path) -> dict:
    """Every table's rows, in order of their keys (but when each bundle was collected)."""
    with sqlite3.connect(db) as c:
        return {
            table: c.execute(f"SELECT {columns} FROM {table} ORDER BY 1, 2").fetchall()
            for table, columns in (
                ("meta", "*"),
                ("runs", "*"),
                ("bundles", "sha256, run_id, file_name, bytes, packed_at"),
                ("files", "*"),
                ("cells", "*"),
            )
        }


def test_a_bundle_holds_the_run_its_environment_and_model_hashes(tmp_path):
    [folder] = _runs(tmp_path, (1.0,))
    path, digest = pack(folder)
    assert path == folder.parent / f"{folder.name}.xfbench.zip"
    bundle = read(path)
    assert bundle.sha256 == digest
    assert set(bundle.run_files) == {
        "merged.json",
        "selection.json",
        "loadgen/serve-x/mlperf_log_summary.txt",
        "logs/torch-cpu-t1.log",
    }  # the report written into the folder is not the run
    assert b"numpy==" in bundle.members["environment/pip-freeze.txt"]
    record = json.loads(bundle.members["environment/machine.json"])
    assert "AMD EPYC" in record["cpu_model"]
    models = json.loads(bundle.members["models.json"])
    assert len(models["spec_digests"]) == 9 and "networks.py" in models["model_code"]
    # the same folder packed again is the same run
    again, _ = pack(folder, tmp_path / "again.xfbench.zip")
    assert read(again).run_id == bundle.run_id


def _rewritten(src: Path, dst: Path, change) -> Path:
    with zipfile.ZipFile(src) as old, zipfile.ZipFile(dst, "w") as new:
        new.comment = old.comment
        for info in old.infolist():
            data = change(info.filename, old.read(info.filename))
            if data is not None:
                new.writestr(info, data)
    return dst


@pytest.mark.parametrize(
    "how, message",
    [
        ("altered", "run/merged.json does not match its hash"),
        ("removed", "run/selection.json is listed but missing"),
        ("manifest", "manifest.json does not match the bundle's hash"),
        ("cut", "not a whole bundle"),
    ],
)
def test_a_tampered_bundle_is_refused_in_one_line_and_nothing_collected_is_lost(
    tmp_path, capsys, how, message
):
    good, other = _runs(tmp_path, (1.0, 1.1))
    good_bundle, _ = pack(good)
    db = tmp_path / "x.sqlite"
    assert collect_main([str(good_bundle), "--db", str(db)]) == 0
    before = _dump(db)
    src, _ = pack(other)
    bad = tmp_path / "bad.xfbench.zip"
    if how == "altered":
        _rewritten(
            src,
            bad,
            lambda n, d: (
                d.replace(b'"median": ', b'"median": 1', 1) if n == "run/merged.json" else d
            ),
        )
    elif how == "removed":
        _rewritten(src, bad, lambda n, d: None if n == "run/selection.json" else d)
    elif how == "manifest":
        _rewritten(
            src,
            bad,
            lambda n, d: d.replace(b'"format": 1', b'"format": 1 ') if n == "manifest.json" else d,
        )
    else:
        bad.write_bytes(src.read_bytes()[:-200])
    capsys.readouterr()
    assert collect_main([str(bad), "--db", str(db)]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err and str(bad) in err
    assert _dump(db) == before


def test_three_runs_collected_twice_give_the_same_database(tmp_path):
    bundles = [str(pack(f)[0]) for f in _runs(tmp_path)]
    db = tmp_path / "runs.sqlite"
    assert collect_main([*bundles, "--db", str(db)]) == 0
    once = _dump(db)
    assert collect_main([*bundles, "--db", str(db)]) == 0
    assert _dump(db) == once
    with sqlite3.connect(db) as c:
        assert c.execute("SELECT count(*) FROM runs").fetchone() == (3,)
        assert c.execute("SELECT count(*) FROM cells").fetchone() == (3 * 54,)
        assert c.execute("SELECT count(*) FROM bundles").fetchone() == (3,)
        rounds = c.execute("SELECT rounds FROM cells LIMIT 1").fetchone()[0]
    assert len(json.loads(rounds)) == 3


def _normalised(text: str, paths: dict[str, str]) -> str:
    for old, new in paths.items():
        text = text.replace(old, new)
    return re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", "TIME", text)


@pytest.mark.slow  # among command 2's slowest on a 2-core Zen 3 (CI runs it)
def test_report_score_and_compare_read_the_database_as_the_folders(tmp_path, capsys):
    from xfbench.report import render
    from xfbench.report.compare import main as compare_main

    folders = _runs(tmp_path)
    db = tmp_path / "runs.sqlite"
    assert collect_main([*(str(pack(f)[0]) for f in folders), "--db", str(db)]) == 0
    render([str(f) for f in folders], tmp_path / "from-folders", ["md"])
    render([str(db)], tmp_path / "from-db", ["md"])
    paths = {f"{db}:{f.name}": str(f) for f in folders}
    assert _normalised((tmp_path / "from-db" / "report.md").read_text(), paths) == _normalised(
        (tmp_path / "from-folders" / "report.md").read_text(), {}
    )
    capsys.readouterr()
    assert score.main([str(f) for f in folders]) == 0
    from_folders = capsys.readouterr().out
    assert score.main([str(db)]) == 0
    assert capsys.readouterr().out == from_folders
    assert "over 3 runs" in from_folders
    # a pattern picks runs; compare reads them as it reads folders
    assert [r.name for r in load_many(f"{db}:2026-11-2[01]-*")] == [f.name for f in folders[:2]]
    # one run a side and no history: "cannot tell" (exit 3), allowed by choice
    assert compare_main([f"{db}:{folders[0].name}", str(folders[0]), "--cannot-tell-ok"]) == 0
    with pytest.raises(LoadError, match="no run matches"):
        load_many(f"{db}:nothing-*")


def test_a_folder_of_runs_is_a_reference_whose_cells_pool_their_rounds(tmp_path, capsys):
    reference = tmp_path / "reference"
    reference.mkdir()
    for folder in _runs(tmp_path):
        folder.rename(reference / folder.name)
    pooled = score.load_reference(reference)
    assert pooled.name == "reference" and len(pooled.of("train", "infer")) == 3 * 54
    best = score._best(pooled, score.cell_key)
    assert all(len(cs) == 1 and len(cs[0].rounds[0]) == 9 for cs in best.values())
    capsys.readouterr()
    assert score.main([str(REFERENCE), "--reference", str(reference)]) == 0
    out = capsys.readouterr().out
    # pooled: 9 rounds a cell behind the reference, the run's own 3 still warn
    assert "against reference" in out and "only 3 rounds" in out


def test_a_later_bundle_of_a_folder_replaces_an_earlier_in_either_order(tmp_path):
    """A folder bundled after its first suite, then again after a second suite added
    cells: whichever order they are collected in, the database holds the fuller run."""
    folder = tmp_path / "2026-11-26-host"
    cells = folder / "cells"
    cells.mkdir(parents=True)
    doc = json.loads((REFERENCE / "merged.json").read_text())
    entries = doc["benchmarks"]
    for entry in entries[:3]:
        part = {**doc, "benchmarks": [entry]}
        (cells / f"{entry['name'].replace('/', '_')}.json").write_text(json.dumps(part))
    early, _ = pack(folder, tmp_path / "early.xfbench.zip")
    entry = entries[3]
    (cells / f"{entry['name']}.json").write_text(json.dumps({**doc, "benchmarks": [entry]}))
    late, _ = pack(folder, tmp_path / "late.xfbench.zip")
    dumps = []
    for order in ((early, late), (late, early)):
        db = tmp_path / f"{order[0].stem}.sqlite"
        assert collect_main([*map(str, order), "--db", str(db)]) == 0
        with sqlite3.connect(db) as c:
            assert c.execute("SELECT count(*) FROM runs").fetchone() == (1,)
            assert c.execute("SELECT count(*) FROM cells").fetchone() == (4,)
            assert c.execute("SELECT count(*) FROM bundles").fetchone() == (2,)
        dumps.append(_dump(db))
    assert dumps[0] == dumps[1]
    # the runner re-merging a finished folder (a new date in merged.json) is the same run
    assert read(late).run_id == read(pack(folder, tmp_path / "again.xfbench.zip")[0]).run_id


def test_reading_a_database_never_writes_to_it(tmp_path):
    bundles = [str(pack(f)[0]) for f in _runs(tmp_path, (1.0,))]
    db = tmp_path / "runs.sqlite"
    assert collect_main([*bundles, "--db", str(db)]) == 0
    db.chmod(0o444)
    before = db.read_bytes()
    try:
        [run] = load_many(str(db))
    finally:
        db.chmod(0o644)
    assert run.of("train") and db.read_bytes() == before
    # a pattern may hold a colon: the database is the name before the first one that is a file
    assert database.split(f"{db}:2026-11-20T10:00*") == (db, "2026-11-20T10:00*")


def test_a_database_of_something_else_is_neither_read_nor_written(tmp_path, capsys):
    other = tmp_path / "history.sqlite"
    with sqlite3.connect(other) as c:
        c.execute("CREATE TABLE meta (key TEXT, value TEXT)")
    bundle, _ = pack(_runs(tmp_path, (1.0,))[0])
    assert collect_main([str(bundle), "--db", str(other)]) == 1
    assert "something else" in capsys.readouterr().err
    with pytest.raises(LoadError, match="newer xfbench|not an xfbench"):
        load_many(str(other))


def test_a_bundle_whose_manifest_is_not_ours_is_refused_in_one_line(tmp_path, capsys):
    bundle, _ = pack(_runs(tmp_path, (1.0,))[0])
    with zipfile.ZipFile(bundle) as z:
        names = z.namelist()
    bad = tmp_path / "bad.xfbench.zip"
    body = b"[1, 2]"
    with zipfile.ZipFile(bad, "w") as z:
        z.comment = f"xfbench-bundle 1 sha256={sha256(body).hexdigest()}".encode()
        z.writestr("manifest.json", body)
    assert names[0] == "manifest.json"
    assert collect_main([str(bad), "--db", str(tmp_path / "x.sqlite")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "manifest.json lacks its run" in err


def test_bundle_and_collect_say_what_is_wrong_in_one_line(tmp_path, capsys):
    assert bundle_main([str(tmp_path)]) == 1
    assert "not a runner folder" in capsys.readouterr().err
    (tmp_path / "started" / "cells").mkdir(parents=True)  # a run whose first cell is running
    assert bundle_main([str(tmp_path / "started")]) == 1
    assert "no finished cell" in capsys.readouterr().err
    not_db = tmp_path / "notes.sqlite"
    not_db.write_text("not a database")
    bundle = tmp_path / "x.xfbench.zip"  # a bundle that exists: the database is refused first
    bundle.write_text("")
    assert collect_main([str(bundle), "--db", str(not_db)]) == 1
    assert "not an SQLite database" in capsys.readouterr().err
    with pytest.raises(BundleError, match="no such database"):
        database.connect(tmp_path / "absent.sqlite")


@pytest.mark.slow  # among command 2's slowest on a 2-core Zen 3 (CI runs it)
def test_xfbench_run_bundle_packs_the_folder_when_the_sweep_ends(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "xfbench.harness.cli",
            "run",
            "--framework",
            "null",
            "--model",
            "fcn5",
            "--task",
            "infer",
            "--preset",
            "smoke",
            "--threads",
            "1",
            "--device",
            "cpu",
            "--skip-roofs",
            "--quiet",
            "--bundle",
            "--results",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    bundle = read(tmp_path / "run.xfbench.zip")
    assert "merged.json" in bundle.run_files
    assert "run.xfbench.zip  sha256 " in proc.stdout


NEW_REFERENCE = REFERENCE.parent / "2026-11-26-amd-epyc-zen4-2c"


def test_the_reference_of_several_runs_scores_every_kind_of_workload_without_a_warning(capsys):
    """A run at the reference preset (here the reference's own first run) is scored on
    training, inference, the transformers, Offline serving and generation, with rounds
    enough on both sides for no rounds warning."""
    runs = sorted(p for p in NEW_REFERENCE.iterdir() if p.is_dir())
    assert len(runs) >= 3
    capsys.readouterr()
    assert score.main([str(runs[0]), "--winners"]) == 0
    out = capsys.readouterr().out
    assert f"against {NEW_REFERENCE.name}" in out
    assert "rounds (below" not in out and "count as certain" not in out
    for workload in ("infer", "bert_base train", "gpt2 infer", "serve-offline", "generate"):
        assert workload in out, workload
    # a table7 run still goes to the reference measured at its thread counts, whichever
    # of the two (27 training workloads shared with each) is offered first
    table7 = score.load_run(REFERENCE)
    for order in ([NEW_REFERENCE, REFERENCE], [REFERENCE, NEW_REFERENCE]):
        assert score.best_reference(table7, order).reference == REFERENCE.name
