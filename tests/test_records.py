"""Typed records: every writer stamps kind and schema_version, the report dispatches on
kind, reads files written before records were typed, and stops with one line at a kind
or version it does not know; docs/records.md is what the schema renders."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from xfbench import records
from xfbench.report import cli
from xfbench.report.load import load

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"


def test_docs_records_md_is_what_the_schema_renders():
    assert (ROOT / "docs" / "records.md").read_text() == records.render_markdown(), (
        "docs/records.md is stale: python -m xfbench.records > docs/records.md"
    )


def test_every_kind_has_fields_and_a_header():
    for kind in records.KINDS:
        assert records.FIELDS[kind]
        assert records.header(kind) == {"kind": kind, "schema_version": records.SCHEMA_VERSION}
    with pytest.raises(ValueError):
        records.header("nope")


@pytest.mark.parametrize(
    "record, kind",
    [
        ({"network": "fcn5", "framework": "torch", "task": "infer"}, "infer"),
        ({"network": "fcn5", "framework": "torch"}, "train"),
        ({"suite": "gemm", "tflops": 1.0}, "gemm"),
        ({"equivalence": {}}, "equivalence"),
        ({"cell": {}, "status": "timeout"}, "failure"),
        ({"kind": "allreduce_sweep"}, "allreduce"),
        ({"kind": "scaling"}, "scaling"),
        ({"hello": 1}, None),
    ],
)
def test_records_written_before_kinds_are_read_by_their_fields(record, kind):
    assert records.kind_of(record) == kind


def _doc(extra: dict) -> dict:
    return {
        "machine_info": {"node": "h"},
        "benchmarks": [{"name": "x", "stats": {"median": 0.5}, "extra_info": extra}],
    }


@pytest.mark.parametrize(
    "extra, words",
    [
        (
            {
                "kind": "train",
                "schema_version": records.SCHEMA_VERSION + 1,
                "network": "fcn5",
                "framework": "torch",
            },
            "newer xfbench",
        ),
        ({"kind": "quantum", "schema_version": 1}, "unknown record kind 'quantum'"),
    ],
)
def test_the_report_stops_with_one_line_at_a_kind_or_version_it_does_not_know(
    tmp_path, capsys, extra, words
):
    folder = tmp_path / "run"
    (folder / "cells").mkdir(parents=True)
    good = json.loads((DATA / "torch_smoke_t1.json").read_text())
    (folder / "cells" / "a.json").write_text(json.dumps(good))
    (folder / "cells" / "b.json").write_text(json.dumps(_doc(extra)))
    assert cli.main([str(folder), "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err and "b.json" in err, err
    assert "Traceback" not in err


def test_a_file_without_kinds_still_loads():
    run = load(DATA / "torch_smoke_t1.json")
    assert run.results and all(r.ok for r in run.results)


def test_the_writers_stamp_kind_and_version(tmp_path):
    """A train and an infer cell (null framework) and the runner's failure record."""
    out = tmp_path / "out.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "xfbench/suites/test_train.py",
            "xfbench/suites/test_infer.py",
            "--framework",
            "null",
            "--model",
            "fcn_r",
            "--preset",
            "smoke",
            "--threads",
            "1",
            f"--benchmark-json={out}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-2000:]
    kinds = sorted(b["extra_info"]["kind"] for b in json.loads(out.read_text())["benchmarks"])
    assert kinds == ["infer", "train"]
    assert all(
        b["extra_info"]["schema_version"] == records.SCHEMA_VERSION
        for b in json.loads(out.read_text())["benchmarks"]
    )
    from xfbench.runner.store import RunFolder

    failure = RunFolder(tmp_path / "r").write_failure(
        "train-x", {"network": "fcn5"}, "failed", "why"
    )
    assert records.kind_of(failure) == "failure" and failure["schema_version"] == 1
