"""The TensorFlow data-parallel worker (scaling/tensorflow_mirrored.py): two CPU replicas
train, agree, write the worker JSON, and compute what one device computes on the whole
batch; the same over two processes with MultiWorkerMirroredStrategy on loopback.

Every run is a subprocess: the CPU is split into logical devices before TensorFlow's
runtime starts, which cannot be undone in this process.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from xfbench.harness.processes import free_port

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("tensorflow") is None, reason="tensorflow is not installed"
)

# The contract's worker JSON keys (every run writes them all).
KEYS = {
    "status",
    "framework",
    "network",
    "scale",
    "device",
    "device_name",
    "precision",
    "workers",
    "scaling",
    "global_batch",
    "per_worker_batch",
    "threads_per_worker",
    "backend",
    "step_seconds",
    "compile_s",
    "warmup_steps",
    "comm_share",
    "comm_share_how",
    "replicas_agree",
    "replicas_max_diff",
    "loss",
    "threads_used",
    "versions",
}
WARMUP, STEPS = 1, 2


def env(**extra) -> dict:
    out = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "2"}
    out.pop("TF_CONFIG", None)  # a cluster only where a test sets one
    out.update(extra)
    return out


def worker(network: str, out: Path, *args: str, extra_env=None, timeout=180):
    cmd = [
        sys.executable,
        "-m",
        "xfbench.scaling.tensorflow_mirrored",
        "--network",
        network,
        "--framework",
        "tensorflow",
        "--scale",
        "smoke",
        "--workers",
        "2",
        "--batch",
        "8",
        "--threads-per-worker",
        "1",
        "--warmup",
        str(WARMUP),
        "--steps",
        str(STEPS),
        "--out",
        str(out),
        *args,
    ]
    return subprocess.Popen(
        cmd,
        cwd=ROOT,
        env=env(**(extra_env or {})),
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


def finish(proc, timeout=180) -> str:
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        output, _ = proc.communicate()
        pytest.fail(f"worker timed out:\n{output[-3000:]}")
    assert proc.returncode == 0, output[-3000:]
    return output


def test_importing_the_worker_starts_no_framework():
    code = (
        "import sys, xfbench.scaling.tensorflow_mirrored; "
        "print([m for m in ('tensorflow', 'keras', 'torch', 'jax') if m in sys.modules])"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "[]", proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def two_replicas(tmp_path_factory):
    """network -> the worker JSON of a 2-replica strong-scaling run of global batch 8."""
    cache = {}

    def get(network):
        if network not in cache:
            out = tmp_path_factory.mktemp("tf") / f"{network}.json"
            finish(worker(network, out, "--save-weights", str(out.with_suffix(".npz"))))
            cache[network] = json.loads(out.read_text())
            cache[network]["saved"] = dict(np.load(out.with_suffix(".npz")))
        return cache[network]

    return get


@pytest.mark.parametrize("network", ["resnet56", "fcn_r"])
@pytest.mark.slow
def test_two_cpu_replicas_train_and_write_the_worker_json(two_replicas, network):
    r = two_replicas(network)
    assert KEYS <= set(r), f"missing: {KEYS - set(r)}"
    assert r["status"] == "ok"
    assert (r["framework"], r["network"], r["scale"], r["device"]) == (
        "tensorflow",
        network,
        "smoke",
        "cpu",
    )
    assert (r["workers"], r["scaling"], r["global_batch"], r["per_worker_batch"]) == (
        2,
        "strong",
        8,
        4,
    )
    assert r["threads_per_worker"] == 1 and r["threads_config"]["intra_op"] == 2
    assert "MirroredStrategy (ReductionToOneDevice)" in r["backend"]
    assert r["replicas_agree"] is True and r["replicas_max_diff"] == 0.0
    assert len(r["step_seconds"]) == STEPS and all(s > 0 for s in r["step_seconds"])
    assert r["warmup_steps"] == WARMUP and r["compile_s"] > 0
    assert r["comm_share"] is not None and 0 <= r["comm_share"] < 1
    assert "without the gradient all-reduce" in r["comm_share_how"]
    assert math.isfinite(r["loss"]) and r["loss"] > 0
    assert r["threads_used"] is not None and r["threads_used"] > 0
    assert r["versions"]["tensorflow"]
    assert len(r["cpus"]) == 2 and r["mode"] == "function"
    # --save-weights: the canonical weights after the timed steps, moved from the start.
    from xfbench.models import get_spec, initial_weights

    w0 = initial_weights(get_spec(network, "smoke"), 0)
    assert set(r["saved"]) == set(w0)
    assert any(not np.array_equal(r["saved"][k], w0[k]) for k in w0)


# One step of 2 replicas on halves of the batch, and one step of the adapter on one
# device on the whole batch, from the same weights. After one step from zero the
# momentum buffer is the gradient the update used (v = 0.9 * 0 + g); both buffers and
# both sets of weights are saved.
SAME_STEP = """
import sys
import numpy as np
from xfbench.scaling import tensorflow_mirrored as m
from xfbench.models import get_spec, initial_weights
from xfbench.adapters import Cell, get_adapter

spec = get_spec("fcn_r", "smoke")
tf, names, _ = m.start_runtime("cpu", 2, 1)
strategy, _ = m.make_strategy(tf, names, "cpu", False)
trainer = m.Trainer(tf, strategy, spec, "cpu", "fp32", 8)
trainer.step()
np.savez(sys.argv[1], **trainer.workload.net.weights())
np.savez(sys.argv[2], *[v.numpy() for v in trainer.workload.slots])

cell = Cell(network="fcn_r", framework="tensorflow", mode="function", precision="fp32", device="cpu", threads=1, batch_size=8, scale="smoke")
single = get_adapter("tensorflow").build(spec, cell, initial_weights(spec))
single.prepare()
single.step()
np.savez(sys.argv[3], **single.weights())
np.savez(sys.argv[4], *[v.numpy() for v in single.slots])
"""


@pytest.mark.slow
def test_two_replica_step_on_halves_is_the_one_device_step_on_the_batch(tmp_path):
    """fcn_r has no batch norm, so the mean of the halves' mean gradients is the whole
    batch's mean gradient: the gradient each replica applies (its momentum buffer after
    one step) and the weights it reaches are the one-device step's. A sum instead of a
    mean, or no all-reduce at all, gives other gradients."""
    from xfbench.models import get_spec, initial_weights

    paths = [tmp_path / f"{n}.npz" for n in ("w2", "g2", "w1", "g1")]
    proc = subprocess.run(
        [sys.executable, "-c", SAME_STEP, *map(str, paths)],
        cwd=ROOT,
        env=env(),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    w2, g2, w1, g1 = (np.load(p) for p in paths)
    w0 = initial_weights(get_spec("fcn_r", "smoke"))
    assert set(w2.files) == set(w1.files) == set(w0)
    assert len(g2.files) == len(g1.files) == len(w0)
    for key in g1.files:
        a, b = g2[key], g1[key]
        scale = float(np.max(np.abs(b)))
        assert scale > 0, f"gradient {key} is zero"
        err = float(np.max(np.abs(a - b))) / scale
        assert err < 1e-5, f"gradient {key}: differs by {err:.2e} of its largest value"
    for name in w0:
        assert not np.array_equal(w1[name], w0[name]), f"{name} did not move"
        np.testing.assert_allclose(w2[name], w1[name], rtol=1e-5, atol=1e-7, err_msg=name)


LOCAL_STEP = """
import json
from xfbench.scaling import tensorflow_mirrored as m
from xfbench.models import get_spec

tf, names, _ = m.start_runtime("cpu", 2, 1)
strategy, _ = m.make_strategy(tf, names, "cpu", False)
trainer = m.Trainer(tf, strategy, get_spec("fcn_r", "smoke"), "cpu", "fp32", 8)
trainer.trace_local_step()
after = {}
for name, local in (("normal", False), ("normal again", False), ("local", True),
                    ("normal after local", False)):
    trainer.step(local)
    after[name] = trainer.local_disagreement()[0]
after["traces"] = [trainer.fn.experimental_get_tracing_count(),
                   trainer.local_fn.experimental_get_tracing_count()]
print(json.dumps(after))
"""


@pytest.mark.slow  # among command 2's slowest on a 2-core Zen 3 (CI runs it)
def test_the_step_without_all_reduce_updates_each_replica_alone(tmp_path):
    """comm_share's comparison step: traced once, before it runs; each replica updates with
    its own gradient (their halves differ, so their weights part), while the normal step,
    traced with the all-reduce, keeps identical replicas identical."""
    proc = subprocess.run(
        [sys.executable, "-c", LOCAL_STEP],
        cwd=ROOT,
        env=env(),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    after = json.loads(proc.stdout.splitlines()[-1])
    assert after["normal"] == after["normal again"] == 0.0
    assert after["local"] > 0 and after["normal after local"] > 0
    assert after["traces"] == [1, 1]


@pytest.mark.slow
def test_multi_worker_mirrored_over_loopback_matches_one_process(tmp_path, two_replicas):
    """Two processes, one CPU replica each, joined through TF_CONFIG on 127.0.0.1:
    the chief writes the JSON, and the training is the one-process run's."""
    workers = [f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"]
    out = tmp_path / "mw.json"
    procs = []
    for i in range(2):
        config = {"cluster": {"worker": workers}, "task": {"type": "worker", "index": i}}
        procs.append(worker("fcn_r", out, extra_env={"TF_CONFIG": json.dumps(config)}))
    for p in procs:
        finish(p)
    r = json.loads(out.read_text())
    assert KEYS <= set(r)
    assert r["status"] == "ok" and r["replicas_agree"] is True
    assert r["multi_worker"] == {"tasks": 2, "rank": 0}
    assert r["backend"].startswith("MultiWorkerMirroredStrategy")
    assert len(r["cpus"]) == 1 and r["workers"] == 2  # one replica each
    assert len(r["step_seconds"]) == STEPS
    assert r["comm_share"] is not None and 0 <= r["comm_share"] < 1
    assert r["loss"] == pytest.approx(two_replicas("fcn_r")["loss"], rel=1e-5)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--workers", "3"], "global batch 8 over 3 workers: it must divide by 3"),
        (["--precision", "fp16"], "fp16 (dynamic loss scaling) is not run data-parallel"),
        (["--framework", "jax"], "this worker runs tensorflow, not jax"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, message):
    out = tmp_path / "x.json"
    proc = worker("fcn_r", out, *args)
    output, _ = proc.communicate(timeout=120)
    lines = [line for line in output.splitlines() if "error:" in line]
    assert proc.returncode == 2, output[-2000:]
    assert "Traceback" not in output
    assert len(lines) == 1 and message in lines[0], output[-2000:]
    assert not out.exists()


def test_too_few_cpus_is_a_failed_record(tmp_path):
    """As the JAX worker: the machine, not the command line, is short, so the launcher
    gets a failed worker JSON with the reason (exit 0: the JSON was written)."""
    out = tmp_path / "x.json"
    proc = worker("fcn_r", out, "--threads-per-worker", "999")
    output, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0 and "Traceback" not in output, output[-2000:]
    r = json.loads(out.read_text())
    assert r["status"] == "failed" and "2 workers of 999 threads need 1998 CPUs" in r["reason"]
    assert r["framework"] == "tensorflow" and r["replicas_agree"] is False


def gpus() -> int:
    from xfbench.machine import gpu_count

    return gpu_count()


@pytest.mark.skipif(gpus() > 0, reason="a GPU is present (the GPU run is tested instead)")
@pytest.mark.slow  # among command 2's slowest on a 2-core Zen 3 (CI runs it)
def test_cuda_without_a_gpu_is_a_failed_record(tmp_path):
    """As the torch and JAX workers: a failed worker JSON with the reason, non-zero exit."""
    out = tmp_path / "x.json"
    proc = worker("fcn_r", out, "--device", "cuda", "--workers", "1")
    output, _ = proc.communicate(timeout=120)
    assert proc.returncode != 0, output[-2000:]
    r = json.loads(out.read_text())
    assert r["status"] == "failed" and r["device"] == "cuda"
    assert r["reason"] == "RuntimeError: 1 GPU replicas asked for, but TensorFlow sees 0 GPU(s)"


@pytest.mark.gpu
def test_one_replica_per_gpu(tmp_path):
    import tensorflow as tf

    if not tf.config.list_physical_devices("GPU"):
        pytest.skip(f"TensorFlow {tf.__version__} sees no GPU (a CPU build)")
    n = gpus()
    out = tmp_path / "gpu.json"
    finish(worker("resnet56", out, "--device", "cuda", "--workers", str(n), "--batch", str(8 * n)))
    r = json.loads(out.read_text())
    assert r["status"] == "ok" and r["replicas_agree"] is True
    assert r["device"] == "cuda" and r["workers"] == n and r["threads_used"] is None
    assert "NcclAllReduce" in r["backend"]
