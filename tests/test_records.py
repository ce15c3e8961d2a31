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
from xfbench.gemm.fields import OK  # GEMM fields written only when the product was right
from xfbench.report import cli
from xfbench.report.load import load

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"


def test_docs_records_md_is_what_the_schema_renders():
    from xfbench.bundle.database import schema_markdown

    assert (ROOT / "docs" / "records.md").read_text() == (
        records.render_markdown() + schema_markdown()
    ), "docs/records.md is stale: python -m xfbench.bundle.database > docs/records.md"


def test_every_kind_has_fields_and_a_header():
    assert records.known_kinds() == (
        "train",
        "infer",
        "equivalence",
        "gemm",
        "scaling",
        "allreduce",
        "serving",
        "generation",
        "token_serving",
        "failure",
    )  # each suite's, declared with it (the network suite's first), failure's last
    for kind in records.known_kinds():
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
    assert run.of("train", "infer") and all(r.ok for r in run.of("train", "infer"))


@pytest.mark.slow  # among command 2's slowest on a 2-core Zen 3 (CI runs it)
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


# -- every kind, written at smoke size, holds only the fields records.FIELDS declares ------
SUITES = {
    "network": [
        "xfbench/suites/test_train.py",
        "xfbench/suites/test_infer.py",
        "--framework",
        "torch",
        "--model",
        "fcn5",
        "--threads",
        "1",
        "--device",
        "cpu",
    ],
    "gemm": [
        "xfbench/suites/test_gemm.py",
        "--gemm-impl",
        "numpy",
        "--gemm-sizes",
        "64",
        "--precision",
        "fp32",
        "--device",
        "cpu",
        "--threads",
        "1",
    ],
    "scaling": [
        "xfbench/suites/test_scaling.py",
        "--framework",
        "torch",
        "--model",
        "fcn_r",
        "--workers",
        "1",
        "--device",
        "cpu",
        "--threads",
        "1",
    ],
    "allreduce": [
        "xfbench/suites/test_allreduce.py",
        "--framework",
        "torch",
        "--device",
        "cpu",
        "--world-sizes",
        "1",
        "--allreduce-sizes",
        "1KB",
    ],
    # every framework's generator (each writes its own facts); torch's compile is slow
    "generation": [
        "xfbench/suites/test_generation.py",
        "--mode",
        "eager,jit,function,xla,cpu",
        "--batch-size",
        "1",
    ],
    # PyTorch's and JAX's generators (the two with GPU modes; tests/test_token_serving.py
    # runs ONNX Runtime's) under LoadGen's three scenarios: TensorFlow's too (eager, 45 ms a
    # token) made it 232 s on a 2-core Zen 3, the slowest test of all; its records are the
    # same kind's
    "token_serving": [
        "xfbench/suites/test_token_serving.py",
        "--framework",
        "torch,jax",
        "--mode",
        "eager,jit",
        "--threads",
        "1",
    ],
    "equivalence": [
        "xfbench/suites/test_equivalence.py",
        "--framework",
        "torch",
        "--model",
        "fcn5",
        "--mode",
        "eager",
        "--device",
        "cpu",
    ],
}


def _written(suite: str, tmp_path) -> list[dict]:
    out = tmp_path / "out.json"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", *SUITES[suite]]
        + ["--preset", "smoke", f"--benchmark-json={out}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return [b["extra_info"] for b in json.loads(out.read_text())["benchmarks"]]


def _holds_to(fields: tuple, record: dict, where: str) -> None:
    """Every key declared; every field written always (and, in an ok GEMM record, every
    one written when the product was right) present; declared inner keys likewise."""
    extra = set(record) - records.keys(fields) - {"kind", "schema_version"}
    assert not extra, f"{where}: fields not in records.FIELDS: {sorted(extra)}"
    wanted = {
        f.name for f in fields if not f.when or (f.when == OK and record.get("status") == "ok")
    }
    missing = wanted - set(record)
    assert not missing, f"{where}: declared always, not written: {sorted(missing)}"
    for f in fields:
        if f.of and f.name in record:
            inner = record[f.name] if isinstance(record[f.name], list) else [record[f.name]]
            for i, item in enumerate(inner):
                _holds_to(f.of, item, f"{where}.{f.name}[{i}]")


def _check(records_written: list[dict], kinds: set[str]) -> None:
    assert {r["kind"] for r in records_written} == kinds
    for r in records_written:
        assert r["schema_version"] == records.SCHEMA_VERSION
        _holds_to(records.FIELDS[r["kind"]], r, r["kind"])


@pytest.mark.slow  # torch eager and compile, train and infer: about a minute on 2 cores
def test_train_and_infer_records_hold_to_their_fields(tmp_path):
    written = _written("network", tmp_path)
    assert {r["mode"] for r in written} >= {"eager", "compile"}  # compile_facts are checked
    _check(written, {"train", "infer"})


@pytest.mark.parametrize(
    "suite", ["gemm", "scaling", "allreduce", "equivalence", "generation", "token_serving"]
)
@pytest.mark.slow
def test_each_suites_records_hold_to_their_fields(suite, tmp_path):
    _check(_written(suite, tmp_path), {suite})


def test_a_failure_record_holds_to_its_fields(tmp_path):
    from xfbench.runner.store import RunFolder

    failure = RunFolder(tmp_path / "r").write_failure(
        key="train-x", cell={"network": "fcn5"}, status="timeout", reason="why", output_tail="tail"
    )
    _check([failure], {"failure"})


def test_the_docs_name_each_declared_field_once_per_kind():
    for kind, fields in records.FIELDS.items():
        names = [f.name for f in fields]
        assert len(names) == len(set(names)), kind
