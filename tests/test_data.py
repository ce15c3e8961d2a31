"""--data real: readers of the published formats on small files written here in those
formats (and corrupt and truncated ones), each framework's own input pipeline, the
same samples in the same order everywhere, input-bound cells, and `xfbench data check`."""

from __future__ import annotations

import gzip
import json
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from xfbench.data import check, readers
from xfbench.data.readers import DataError
from xfbench.data.sources import order, source_for
from xfbench.models import get_spec

ROOT = Path(__file__).resolve().parents[1]


# -- files in the published formats ----------------------------------------------------
def idx(shape, data: np.ndarray) -> bytes:
    return (
        struct.pack(">HBB", 0, 8, len(shape))
        + struct.pack(f">{len(shape)}I", *shape)
        + (data.astype(np.uint8).tobytes())
    )


def write_mnist(folder: Path, n=64, gz=True):
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (n, 28, 28))
    labels = np.arange(n) % 10
    for name, blob in (
        ("train-images-idx3-ubyte", idx((n, 28, 28), images)),
        ("train-labels-idx1-ubyte", idx((n,), labels)),
    ):
        if gz:
            (folder / f"{name}.gz").write_bytes(gzip.compress(blob))
        else:
            (folder / name).write_bytes(blob)


def write_cifar(folder: Path, n=64):
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(1)
    records = rng.integers(0, 256, (n, 3073)).astype(np.uint8)
    records[:, 0] = np.arange(n) % 10
    (folder / "data_batch_1.bin").write_bytes(records.tobytes())


def write_ptb(folder: Path):
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(2)
    words = [f"w{i}" for i in range(40)] + ["<unk>"]
    lines = [" ".join(rng.choice(words, 12)) for _ in range(120)]
    (folder / "ptb.train.txt").write_text("\n".join(lines) + "\n")
    (folder / "ptb.valid.txt").write_text("\n".join(lines[:10]) + "\n")
    (folder / "ptb.test.txt").write_text("\n".join(lines[:10]) + "\n")


def write_jpegs(folder: Path, n=24, size=(48, 40), classes=3):
    from PIL import Image

    rng = np.random.default_rng(3)
    for i in range(n):
        d = folder / "train" / f"class{i % classes}"
        d.mkdir(parents=True, exist_ok=True)
        pixels = rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)
        Image.fromarray(pixels).save(d / f"img{i}.jpg", quality=90)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    write_mnist(root / "mnist")
    write_cifar(root / "cifar10")
    write_ptb(root / "ptb")
    write_jpegs(root / "imagenet")
    return root


# -- readers -----------------------------------------------------------------------------
def test_readers_read_what_was_written(data_dir, tmp_path):
    x, y = readers.read_mnist(data_dir / "mnist")
    assert x.shape == (64, 784) and x.dtype == np.float32 and 0 <= x.min() and x.max() < 1
    assert list(y[:12]) == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1]
    write_mnist(tmp_path / "raw", gz=False)  # uncompressed IDX reads the same
    assert np.array_equal(readers.read_mnist(tmp_path / "raw")[0], x)
    x, y = readers.read_cifar10(data_dir / "cifar10")
    assert x.shape == (64, 3, 32, 32) and x.dtype == np.uint8 and y.max() == 9
    ids = readers.read_ptb(data_dir / "ptb", 20)
    assert ids.max() < 20 and ids.dtype == np.int64
    vocab = readers.ptb_vocabulary(readers._words(data_dir / "ptb" / "ptb.train.txt"), 20)
    assert len(vocab) == 20 and "<eos>" in vocab and "<unk>" in vocab
    paths, labels = readers.list_jpeg_folder(data_dir / "imagenet" / "train", 1000)
    assert len(paths) == 24 and sorted(set(labels)) == [0, 1, 2]


@pytest.mark.parametrize(
    "damage, words",
    [
        ("mnist-magic", "not an IDX file of unsigned bytes with 3 dimensions"),
        ("mnist-truncated", "truncated or padded"),
        ("mnist-bad-gzip", "cannot read"),
        ("cifar-truncated", "not a whole number of 3073-byte CIFAR-10 records"),
        ("cifar-label", "outside 0-9"),
        ("ptb-binary", "cannot read as UTF-8 text"),
        ("jpeg-truncated", "truncated JPEG"),
        ("jpeg-foreign", "not a JPEG"),
    ],
)
def test_a_wrong_truncated_or_foreign_file_is_one_line_naming_it(tmp_path, damage, words):
    write_mnist(tmp_path / "mnist")
    write_cifar(tmp_path / "cifar10")
    write_ptb(tmp_path / "ptb")
    write_jpegs(tmp_path / "imagenet", n=3)
    if damage.startswith("mnist"):
        path = tmp_path / "mnist" / "train-images-idx3-ubyte.gz"
        blob = gzip.decompress(path.read_bytes())
        if damage == "mnist-magic":
            blob = b"\x00\x00\x08\x02" + blob[4:]
        elif damage == "mnist-truncated":
            blob = blob[:-100]
        path.write_bytes(gzip.compress(blob) if damage != "mnist-bad-gzip" else b"\x1f\x8bxx")
        network = "fcn_r"
    elif damage.startswith("cifar"):
        path = tmp_path / "cifar10" / "data_batch_1.bin"
        blob = bytearray(path.read_bytes())
        if damage == "cifar-truncated":
            blob = blob[:-10]
        else:
            blob[3073] = 200
        path.write_bytes(bytes(blob))
        network = "resnet56"
    elif damage == "ptb-binary":
        path = tmp_path / "ptb" / "ptb.train.txt"
        path.write_bytes(b"\xff\xfe\x00bad")
        network = "lstm32"
    else:
        path = next((tmp_path / "imagenet").rglob("*.jpg"))
        blob = path.read_bytes()
        path.write_bytes(blob[: len(blob) // 2] if damage == "jpeg-truncated" else b"GIF89a..")
        network = "resnet50"
    with pytest.raises(DataError) as e:
        source_for(get_spec(network, "smoke"), tmp_path)
    message = str(e.value)
    assert words in message and str(path) in message and "\n" not in message


def test_fcn5_and_fcn8_have_no_real_data_set(data_dir):
    with pytest.raises(DataError, match="no real data set"):
        source_for(get_spec("fcn5", "smoke"), data_dir)


# -- each framework's own pipeline -------------------------------------------------------
FAMILIES = ("fcn_r", "resnet56", "lstm32", "resnet50")  # MNIST, CIFAR-10, PTB, JPEGs


def _workload(framework: str, network: str, task="train"):
    from xfbench.adapters import Cell, get_adapter
    from xfbench.harness.measure import initial

    spec = get_spec(network, "smoke")
    mode = {"torch": "eager", "tensorflow": "function", "jax": "jit", "onnxruntime": "cpu"}
    cell = Cell(
        network=network,
        framework=framework,
        mode=mode[framework],
        precision="fp32",
        device="cpu",
        threads=1,
        batch_size=8,
        task=task,
        data="real",
        scale="smoke",
    )
    adapter = get_adapter(framework)
    if adapter.import_error():
        pytest.skip(adapter.import_error())
    return spec, adapter.build(spec, cell, initial(spec))


@pytest.mark.parametrize("network", FAMILIES)
@pytest.mark.parametrize("framework", ["torch", "tensorflow", "jax"])
@pytest.mark.slow
def test_a_training_step_per_family_runs_on_real_files_in_every_framework(
    data_dir, framework, network
):
    spec, work = _workload(framework, network)
    src = source_for(spec, data_dir)
    batches = work.input_batches(src, 0, 1)
    losses = []
    for _ in range(3):
        x, y = next(batches)
        work.feed(x, y)
        work.step()
        losses.append(work.loss())
    work.close()
    assert all(np.isfinite(losses)), losses
    # the labels of the first batch are those of the shared order: the same samples
    first = order(len(src), 0, 0)[:8]
    expected = [src.label(int(i)) for i in first]
    x, y = next(work.input_batches(src, 0, 0))
    assert np.array_equal(np.asarray(y), np.stack(expected))


@pytest.mark.parametrize("framework", ["torch", "tensorflow", "jax"])
def test_a_jpeg_that_fails_to_decode_in_a_worker_is_one_line(tmp_path, framework):
    """Markers whole, content not: found only when a loader worker decodes it (a process
    of PyTorch's DataLoader sends its traceback back inside the message; tf.data raises
    its own error type)."""
    from xfbench.harness.measure import InputTimer

    write_jpegs(tmp_path / "imagenet", n=8, classes=2)
    bad = next((tmp_path / "imagenet").rglob("*.jpg"))
    bad.write_bytes(b"\xff\xd8\xff" + b"\x00" * 200 + b"\xff\xd9")
    spec, work = _workload(framework, "resnet50")
    src = source_for(spec, tmp_path)  # the markers pass
    timer = InputTimer(work, work.input_batches(src, 0, 1), str(tmp_path / "imagenet"))
    try:
        with pytest.raises(DataError) as e:
            timer.next_batch()
    finally:
        timer.close()
        work.close()
    message = str(e.value)
    assert "\n" not in message and "Traceback" not in message, message
    # Pillow's decoders name the file; tf.data's op does not, so the folder is named
    assert str(bad if framework != "tensorflow" else tmp_path / "imagenet") in message


def test_closing_the_pipeline_stops_the_loader_worker_processes(data_dir):
    from xfbench.harness.measure import InputTimer
    from xfbench.harness.threads import children_cpu_s

    before = set(children_cpu_s())
    spec, work = _workload("torch", "resnet56")
    timer = InputTimer(work, work.input_batches(source_for(spec, data_dir), 0, 2))
    timer.next_batch()
    workers = set(children_cpu_s()) - before
    timer.close()
    work.close()
    assert len(workers) == 2 and not workers & set(children_cpu_s())


def test_the_default_loader_workers_follow_the_cells_threads(data_dir):
    """The workers share the cell's CPUs (its affinity): one per thread, at most 4."""
    from xfbench.harness.selection import parse

    sel = parse(framework="torch", threads="1", data="real", data_dir=str(data_dir))
    assert sel.data_workers == 1
    sel = parse(
        framework="torch", threads="1", data="real", data_dir=str(data_dir), data_workers="3"
    )
    assert sel.data_workers == 3


def test_onnxruntime_infers_from_the_same_arrays(data_dir):
    pytest.importorskip("onnxruntime")
    spec, work = _workload("onnxruntime", "resnet56", task="infer")
    src = source_for(spec, data_dir)
    x, y = next(work.input_batches(src, 0, 0))
    work.feed(x, y)
    work.step()
    assert work.output().shape == (8, 10) and np.isfinite(work.output()).all()
    assert np.array_equal(y, src.y[order(len(src), 0, 0)[:8]])


# -- whole cells: records, an input-bound loader, bad data among good --------------------
def _suite(tmp_path, data_dir, *args, suite="test_train.py"):
    out = tmp_path / "out.json"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", f"xfbench/suites/{suite}", "-q"]
        + ["--preset", "smoke", "--threads", "1", "--device", "cpu", "--data", "real"]
        + [f"--data-dir={data_dir}"]
        + [*args, f"--benchmark-json={out}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    data = json.loads(out.read_text()) if out.exists() else None
    return proc, data


@pytest.mark.parametrize(
    "framework, mode, networks",
    [
        ("torch", "eager", {"fcn_r": "mnist", "lstm32": "ptb"}),
        ("tensorflow", "function", {"resnet56": "cifar10", "resnet50": "imagenet"}),
        ("jax", "jit", {"resnet50": "imagenet", "lstm32": "ptb"}),
    ],
    ids=["torch", "tensorflow", "jax"],
)
@pytest.mark.slow
def test_real_data_cells_record_waiting_and_both_throughputs(
    tmp_path, data_dir, framework, mode, networks
):
    """Whole cells through the suite, each framework with its own pipeline."""
    proc, data = _suite(
        tmp_path,
        data_dir,
        *("--framework", framework, "--model", ",".join(networks), "--mode", mode),
        *("--data-workers", "1"),
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    infos = [b["extra_info"] for b in data["benchmarks"]]
    assert {i["network"]: i["data_set"] for i in infos} == networks
    for i in infos:
        assert i["data"] == "real" and i["data_wait_s"] >= 0 and i["loader_workers"] == 1
        assert i["samples_per_s_end_to_end"] > 0 and i["samples_per_s_resident"] > 0
        assert i["step_compute_s"] > 0 and 0 <= i["data_wait_share"] < 1
        assert isinstance(i["input_bound"], bool) and i["input_bound_share"] == 0.1


def test_an_onnxruntime_inference_cell_records_no_loader_workers(tmp_path, data_dir):
    pytest.importorskip("onnxruntime")
    proc, data = _suite(
        tmp_path,
        data_dir,
        *("--framework", "onnxruntime", "--model", "resnet56", "--data-workers", "2"),
        suite="test_infer.py",
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    [info] = [b["extra_info"] for b in data["benchmarks"]]
    assert info["data_set"] == "cifar10" and info["loader_workers"] == 0
    assert info["samples_per_s_end_to_end"] > 0 and info["samples_per_s_resident"] > 0


@pytest.mark.slow
def test_a_slow_loader_is_reported_input_bound(tmp_path):
    """Large JPEGs decoded and cropped by one DataLoader worker process, feeding a tiny
    network on the same CPU. The worker's CPU time is the cell's own: threads_used counts
    it (about 0.09 when it did not: the training process mostly waits)."""
    write_jpegs(tmp_path / "big" / "imagenet", n=16, size=(1600, 1200), classes=2)
    proc, data = _suite(
        tmp_path,
        tmp_path / "big",
        *("--framework", "torch", "--model", "resnet50", "--mode", "eager"),
        *("--data-workers", "1"),
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    [info] = [b["extra_info"] for b in data["benchmarks"]]
    assert info["input_bound"] is True and info["data_wait_share"] > 0.1, info
    assert info["samples_per_s_resident"] > info["samples_per_s_end_to_end"]
    assert info["loader_workers"] == 1 and info["threads_used"] > 0.3, info


@pytest.mark.slow  # among command 2's slowest on a 2-core Zen 3 (CI runs it)
def test_a_bad_data_file_is_one_line_and_no_other_cell_is_lost(tmp_path):
    folder = tmp_path / "mixed"
    write_mnist(folder / "mnist")
    write_cifar(folder / "cifar10")
    (folder / "cifar10" / "data_batch_1.bin").write_bytes(b"\x00" * 100)
    proc, data = _suite(
        tmp_path, folder, "--framework", "torch", "--model", "fcn_r,resnet56", "--mode", "eager"
    )
    assert proc.returncode == 1 and "Traceback" not in proc.stdout
    assert [b["extra_info"]["network"] for b in data["benchmarks"]] == ["fcn_r"]
    [failure] = data["xfbench"]["failures"]
    assert "data_batch_1.bin: 100 bytes, not a whole number" in failure["reason"]


@pytest.mark.slow
def test_xfbench_run_records_a_bad_data_file_as_a_failure_and_keeps_the_others(tmp_path):
    """The runner's own failure recording: the good cell in cells/, the bad one in failed/
    with its one line, and a non-zero exit."""
    folder = tmp_path / "mixed"
    write_mnist(folder / "mnist")
    write_cifar(folder / "cifar10")
    (folder / "cifar10" / "data_batch_1.bin").write_bytes(b"\x00" * 100)
    results = tmp_path / "results"
    proc = subprocess.run(
        [sys.executable, "-m", "xfbench.harness.cli", "run", "--preset", "smoke"]
        + ["--framework", "torch", "--mode", "eager", "--model", "fcn_r,resnet56"]
        + ["--task", "train", "--threads", "1", "--device", "cpu", "--data", "real"]
        + ["--data-dir", str(folder)]
        + ["--data-workers", "0", "--results", str(results)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode != 0 and "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    [cell] = results.rglob("cells/*.json")
    assert "fcn_r" in cell.name
    [failed] = results.rglob("failed/*.json")
    failure = json.loads(failed.read_text())
    assert "resnet56" in failed.name and failure["status"] == "failed", failure
    assert "data_batch_1.bin: 100 bytes, not a whole number" in failure["reason"]
    assert "\n" not in failure["reason"]


@pytest.mark.parametrize(
    "args, words",
    [
        (["--data", "real"], "--data real needs --data-dir PATH"),
        (["--data", "real", "--data-dir", "/nonexistent"], "--data-dir /nonexistent: not a folder"),
        (["--data-dir", "/tmp"], "--data-dir is read only with --data real"),
        (["--data", "real", "--data-dir", "/tmp", "--data-workers", "-1"], "--data-workers"),
    ],
)
def test_bad_data_options_are_one_line(args, words):
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "xfbench/suites/test_train.py", "-q"]
        + ["--framework", "torch", "--preset", "smoke", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    errors = [line for line in (proc.stdout + proc.stderr).splitlines() if "ERROR:" in line]
    assert proc.returncode == 4 and len(errors) == 1 and words in errors[0], proc.stderr


def test_the_report_shows_a_real_data_cell_beside_the_synthetic_one(tmp_path):
    """Its own row, with the wait and its share, the resident throughput and the verdict
    (samples/s is end to end); report.csv carries the fields."""
    from test_report import entry, read_csv, runner_folder

    from xfbench.report import render

    synthetic = entry("resnet56", [0.10, 0.11, 0.10])
    real = entry("resnet56", [0.20, 0.21, 0.20])
    real["name"] += "-real"
    real["extra_info"].update(
        data="real",
        data_set="cifar10",
        data_wait_s=0.08,
        data_wait_share=0.4,
        samples_per_s_resident=150.0,
        input_bound=True,
        loader_workers=1,
    )
    folder = runner_folder(tmp_path, "run", [synthetic, real])
    render([folder], folder, ["csv", "md"])
    details = (folder / "report.md").read_text().split("### ResNet-56")[2]

    def cells(line):
        return [c.strip() for c in line.strip().strip("|").split("|")]

    header = next(line for line in details.splitlines() if line.startswith("| framework"))
    assert cells(header)[-3:] == ["data wait (share of step)", "samples/s resident", "input-bound"]
    rows = [line for line in details.splitlines() if line.startswith("| PyTorch eager")]
    real_row = next(r for r in rows if "data real" in r)
    synthetic_row = next(r for r in rows if "data real" not in r)
    assert cells(real_row)[-3:] == ["0.08 s (40%)", "150", "yes"] and "80" in cells(real_row)
    assert cells(synthetic_row)[-3:] == ["-", "-", "-"]
    [row] = [r for r in read_csv(folder / "report.csv") if r["data_set"] == "cifar10"]
    assert row["input_bound"] == "True" and row["samples_per_s_resident"] == "150.0"


# -- xfbench data check ------------------------------------------------------------------
def test_data_check_names_valid_missing_and_invalid(tmp_path, data_dir, capsys):
    assert check.main(["check", "--data-dir", str(data_dir)]) == 0
    out = capsys.readouterr().out
    assert out.count(" valid ") == 4 and "64 samples (for fcn_r)" in out
    partial = tmp_path / "partial"
    write_mnist(partial / "mnist")
    (partial / "cifar10").mkdir()
    (partial / "cifar10" / "data_batch_1.bin").write_bytes(b"\x01" * 10)
    assert check.main(["check", "--data-dir", str(partial)]) == 1
    lines = capsys.readouterr().out.splitlines()
    status = {line.split()[0]: line.split()[1] for line in lines}
    assert status == {
        "mnist": "valid",
        "cifar10": "invalid",
        "ptb": "missing",
        "imagenet": "missing",
    }
    assert any("cs.toronto.edu" not in line and "ptb" in line for line in lines)
    assert check.main(["check", "--data-dir", str(tmp_path / "none")]) == 2
