"""Data-parallel scaling at smoke size: two Gloo DDP processes and two JAX host devices
run, check their replicas, and compute the same step as one process on the whole batch
(fcn_r, no BatchNorm); on ResNet-56 PyTorch, JAX and TensorFlow compute the same
per-worker-BatchNorm step; JAX clips the averaged gradient; the cell, the commands, the
stats helper, speedup and bad input."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from xfbench.errors import UsageError
from xfbench.harness.external import record_durations
from xfbench.scaling import launch
from xfbench.scaling.cell import ScalingCell, parse_args, to_argv
from xfbench.scaling.protocol import Hooks, measure
from xfbench.scaling.speedup import fill_speedup

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT = 300


def cell(network, framework, workers, batch=16, scaling="strong", device="cpu"):
    return ScalingCell(
        network=network,
        framework=framework,
        device=device,
        workers=workers,
        scaling=scaling,
        batch=batch,
        threads_per_worker=1,
        scale="smoke",
    )


def check_ran(result, workers, steps):
    assert result["status"] == "ok", result.get("reason")
    assert result["workers"] == workers and len(result["step_seconds"]) == steps
    assert all(s > 0 for s in result["step_seconds"])
    assert result["replicas_agree"] and result["replicas_max_diff"] == 0.0
    assert np.isfinite(result["loss"])


def relative_error(a: dict, b: dict) -> float:
    assert set(a) == set(b)
    return max(float(np.abs(a[k] - b[k]).max() / max(np.abs(b[k]).max(), 1e-12)) for k in b)


def l2_relative(a: dict, b: dict) -> float:
    """||a - b|| / ||b|| over all tensors together (the suite's rule for BatchNorm networks)."""
    assert set(a) == set(b)
    num = sum(float(np.sum((a[k].astype(np.float64) - b[k]) ** 2)) for k in b)
    return (num / sum(float(np.sum(np.square(b[k], dtype=np.float64))) for k in b)) ** 0.5


# -- the cell and the commands --------------------------------------------------------
def test_cell_batches_id_and_the_workers_command_line(tmp_path):
    strong, weak = (
        cell("resnet56", "torch", 2, 16),
        cell(network="resnet56", framework="torch", workers=2, batch=16, scaling="weak"),
    )
    assert (strong.global_batch, strong.per_worker_batch) == (16, 8)
    assert (weak.global_batch, weak.per_worker_batch) == (32, 16)
    assert strong.id == "resnet56-torch-cpu-w2-strong-b16"
    with pytest.raises(UsageError, match="must divide by 3"):
        cell("resnet56", "torch", 3, 16).check()
    run = parse_args(to_argv(strong, 1, 4, str(tmp_path / "r.json")))
    assert (run.cell, run.warmup, run.steps) == (strong, 1, 4)


def test_commands_follow_the_contract(tmp_path, monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "--xla_dump_to=/nowhere")
    argv, env = launch.command(cell("fcn_r", "torch", 2), 1, 3, tmp_path / "r.json")
    assert argv[1:5] == ["-m", "torch.distributed.run", "--nproc-per-node", "2"]
    assert argv[5] == "--master-port" and argv[7:9] == ["-m", "xfbench.scaling.torch_ddp"]
    assert env["OMP_NUM_THREADS"] == "1" and env["XFBENCH_SCALING_CPUS"]
    argv, env = launch.command(cell("fcn_r", "jax", 2), 1, 3, tmp_path / "r.json")
    assert argv[1:3] == ["-m", "xfbench.scaling.jax_sharding"]
    assert env["XLA_FLAGS"] == "--xla_dump_to=/nowhere --xla_force_host_platform_device_count=2"
    argv, _ = launch.command(cell("fcn_r", "tensorflow", 2), 1, 3, tmp_path / "r.json")
    assert argv[1:3] == ["-m", "xfbench.scaling.tensorflow_mirrored"]
    # Several machines: torchrun's node and rendezvous options pass through.
    argv, _ = launch.command(
        cell=cell("fcn_r", "torch", 4),
        warmup=1,
        steps=3,
        out=tmp_path / "r.json",
        torchrun_options=["--nnodes", "2", "--node-rank", "1", "--rdzv-endpoint", "h:29500"],
    )
    assert argv[argv.index("--nproc-per-node") + 1] == "2" and "--master-port" not in argv
    for opt, value in (
        ("--nnodes", "2"),
        ("--node-rank", "1"),
        ("--rdzv-endpoint", "h:29500"),
        ("--rdzv-backend", "c10d"),
    ):
        assert argv[argv.index(opt) + 1] == value


# -- the helper that puts the workers' step times into pytest-benchmark's stats ---------
def test_external_durations_become_the_benchmark_stats(benchmark):
    if benchmark.disabled:
        pytest.skip("benchmarks are disabled in this session")
    stats = record_durations(benchmark, [0.3, 0.1, 0.2])
    assert stats is benchmark.stats
    assert stats.stats.rounds == 3 and stats.stats.median == pytest.approx(0.2)
    assert stats.stats.min == pytest.approx(0.1) and stats.iterations == 1
    assert stats.as_dict(include_data=True)["stats"]["data"] == [0.3, 0.1, 0.2]
    with pytest.raises(RuntimeError, match="already used"):
        record_durations(benchmark, [0.1])


def test_speedup_and_efficiency_over_one_worker():
    def rec(workers, scaling, seconds, batch):
        c = cell(
            network="resnet56", framework="torch", workers=workers, batch=batch, scaling=scaling
        )
        return {
            "kind": "scaling",
            **c.as_dict(),
            "cell_id": c.id,
            "status": "ok",
            "global_batch": c.global_batch,
            "per_worker_batch": c.per_worker_batch,
            "seconds_per_batch": seconds,
            "samples_per_s": c.global_batch / seconds,
        }

    records = [
        rec(1, "strong", 1.0, 16),
        rec(2, "strong", 0.8, 16),
        rec(4, "strong", 0.5, 16),
        rec(1, "weak", 1.0, 8),
        rec(2, "weak", 1.25, 8),
        rec(2, "strong", 0.5, 32),
    ]
    fill_speedup(records)
    assert records[1]["speedup"] == pytest.approx(1.25) and records[1]["efficiency"] == 0.625
    assert records[2]["speedup"] == 2.0 and records[2]["efficiency"] == 0.5
    assert records[1]["speedup_baseline"] == "resnet56-torch-cpu-w1-strong-b16"
    # weak: samples/s of 2 workers (16 samples in 1.25 s) over 1 worker's (8 in 1 s)
    assert records[4]["speedup"] == pytest.approx(1.6) and records[4]["efficiency"] == 0.8
    # no one-worker run of the same global batch: no speedup rather than a wrong one
    assert records[5]["speedup"] is None and records[5]["speedup_baseline"] is None


# -- the one measuring sequence every worker runs (scaling/protocol.py) ------------------
class FakeSteps(Hooks):
    """Hooks with no framework: each call is logged, and the steps move a fake clock
    (normal step 1 s, step without the all-reduce 0.25 s, compile 5 s)."""

    backend, device_name, versions = "fake", "fake device", {"fake": "0"}
    threads_config, layout, mode = {"intra_op": 1}, "channels_first", "eager"

    def __init__(self, diff=0.0):
        self.calls, self.now, self.diff = [], 0.0, diff

    def clock(self):
        return self.now

    def compile(self):
        self.calls.append("compile")
        self.now += 5.0

    def barrier(self):
        self.calls.append("barrier")

    def step(self, local=False):
        self.calls.append("local" if local else "step")
        self.now += 0.25 if local else 1.0

    def loss(self):
        self.calls.append("loss")
        return 2.5

    def slowest(self, seconds):
        self.calls.append(f"slowest {len(seconds)}")
        return seconds

    def mean(self, values):
        self.calls.append(f"mean {len(values)}")
        return values

    def replica_difference(self):
        self.calls.append("replicas")
        return self.diff, 1.0

    def save_weights(self, path):
        self.calls.append(f"save {path}")

    def cpus(self):
        return [0, 1]

    def extra(self):
        return {"own": 1}


COMMON_KEYS = [
    "step_seconds",
    "median_step_s",
    "compile_s",
    "warmup_steps",
    "comm_share",
    "comm_share_how",
    "replicas_agree",
    "replicas_max_diff",
    "loss",
    "threads_used",
    "threads_config",
    "layout",
    "mode",
]


def test_the_protocol_runs_the_sequence_once_for_every_worker():
    from xfbench.scaling import result as R
    from xfbench.scaling.cell import WorkerTask
    from xfbench.scaling.plugin import record

    c = cell("fcn_r", "torch", 2)
    hooks = FakeSteps()
    out = measure(
        WorkerTask(cell=c, warmup=2, steps=3, out="-", save_weights="w.npz"), hooks, hooks.clock
    )
    pairs = ["barrier", "step", "barrier", "local"] * R.COMM_PAIRS
    assert hooks.calls == (
        ["barrier", "compile", "step"]  # the first step, compile_s
        + ["barrier", "step"] * 2  # warm-up
        + ["barrier", "step"] * 3  # timed
        + ["slowest 3", "loss", "mean 2", "replicas", "save w.npz"]
        + ["barrier", "local"]  # the step without the all-reduce, its first run untimed
        + pairs
        + [f"slowest {2 * R.COMM_PAIRS}"]
    )
    header = list(R.header(c, "fake", "fake device", {}))
    assert list(out) == header + COMMON_KEYS + ["own", "cpus"]
    assert out["status"] == "ok" and out["backend"] == "fake"
    assert out["step_seconds"] == [1.0] * 3 and out["median_step_s"] == 1.0
    assert out["compile_s"] == 6.0 and out["warmup_steps"] == 2
    assert out["comm_share"] == 0.75 and out["comm_share_how"] == hooks.comm_comparison
    assert out["replicas_agree"] is True and out["replicas_max_diff"] == 0.0
    assert out["loss"] == 2.5 and out["cpus"] == [0, 1]
    assert isinstance(out["threads_used"], float)
    # The pytest plugin's record reads the same keys.
    rec = record(c, out, "smoke")
    assert rec["compile_s"] == 6.0 and rec["comm_share"] == 0.75 and rec["rounds"] == 3


def test_the_protocol_one_worker_no_barrier_first_and_disagreeing_replicas():
    from xfbench.scaling.cell import WorkerTask

    hooks = FakeSteps(diff=0.5)
    hooks.barrier_first_steps = hooks.warm_local_step = False
    out = measure(
        WorkerTask(cell=cell("fcn_r", "torch", 1, device="cuda"), warmup=1, steps=2, out="-"),
        hooks,
        hooks.clock,
    )
    assert hooks.calls == (
        ["compile", "step", "step", "barrier", "step", "barrier", "step"]
        + ["slowest 2", "loss", "mean 2", "replicas"]
    )
    assert out["comm_share"] is None and "one worker" in out["comm_share_how"]
    assert out["threads_used"] is None and out["cpus"] is None  # not on the CPU
    assert out["status"] == "failed" and out["replicas_agree"] is False
    assert out["reason"] == ("replicas disagree after the timed steps: weights differ by up to 0.5")


@pytest.mark.parametrize("module", ["torch_ddp", "jax_sharding", "tensorflow_mirrored"])
def test_the_workers_only_give_hooks(module):
    """No worker times steps, meters the CPU or fills the common keys itself: it hands
    its hooks to protocol.measure."""
    import ast

    tree = ast.parse((ROOT / "xfbench" / "scaling" / f"{module}.py").read_text())
    names, keys = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, ast.alias):
            names.add(node.name)
        elif isinstance(node, ast.Dict):  # the keys a dict literal fills
            keys |= {k.value for k in node.keys if isinstance(k, ast.Constant)}
        elif isinstance(node, ast.Call) and ast.unparse(node.func).endswith("update"):
            keys |= {k.arg for k in node.keywords}  # out.update(key=...)
    timing = {"time", "perf_counter", "monotonic", "CpuMeter", "warmup", "REPLICA_RTOL"}
    assert not names & timing, module
    assert not keys & set(COMMON_KEYS + ["status", "reason"]), module
    assert "measure" in names and "Hooks" in names


# -- PyTorch DDP over Gloo, two processes -----------------------------------------------
@pytest.mark.slow
def test_ddp_two_processes_resnet56():
    result = launch.run(cell("resnet56", "torch", 2), 1, 2, timeout=TIMEOUT)
    check_ran(result, 2, 2)
    assert result["backend"] == "gloo" and result["layout"] == "channels_last"
    assert result["comm_share"] is not None and 0 <= result["comm_share"] < 1
    first, second = result["cpus"]  # each rank pinned to CPUs of its own
    assert first and second and not set(first) & set(second)


@pytest.fixture(scope="module")
def ddp_fcn_r(tmp_path_factory):
    path = tmp_path_factory.mktemp("ddp") / "weights.npz"
    result = launch.run(cell("fcn_r", "torch", 2), 0, 1, timeout=TIMEOUT, save_weights=str(path))
    return result, dict(np.load(path))


@pytest.mark.slow
def test_ddp_two_processes_fcn_r(ddp_fcn_r):
    check_ran(ddp_fcn_r[0], 2, 1)


@pytest.mark.slow
def test_ddp_on_the_split_batch_is_the_one_process_step_on_the_whole_batch(ddp_fcn_r):
    """fcn_r has no BatchNorm, so two workers on 8 rows each, gradients averaged, must give
    the weights one process gets on all 16 rows (the same two steps: first + timed)."""
    from xfbench.adapters import Cell, get_adapter
    from xfbench.models import get_spec, initial_weights

    spec = get_spec("fcn_r", "smoke")
    one = Cell(
        network="fcn_r",
        framework="torch",
        mode="eager",
        precision="fp32",
        device="cpu",
        threads=1,
        batch_size=16,
        task="train",
        data="resident",
        scale="smoke",
    )
    work = get_adapter("torch").build(spec, one, initial_weights(spec, 0))
    work.step()
    work.step()
    assert relative_error(ddp_fcn_r[1], work.weights()) < 1e-5


@pytest.mark.slow
def test_ddp_two_nodes_over_loopback(tmp_path):
    """Several machines, played by two launchers on this one: torchrun's node and rendezvous
    options pass through, and one of the two nodes (the one given global rank 0) writes."""
    port = launch.free_port()
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "xfbench.scaling.launch",
                "--framework",
                "torch",
                "--network",
                "fcn_r",
                "--scale",
                "smoke",
                "--workers",
                "2",
                "--batch",
                "16",
                "--warmup",
                "0",
                "--steps",
                "1",
                "--threads-per-worker",
                "1",
                "--nnodes",
                "2",
                "--node-rank",
                str(k),
                "--rdzv-endpoint",
                f"127.0.0.1:{port}",
                "--out",
                str(tmp_path / f"node{k}.json"),
                "--timeout",
                str(TIMEOUT),
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for k in (0, 1)
    ]
    outputs = [p.communicate(timeout=TIMEOUT)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    written = [json.loads(f.read_text()) for f in sorted(tmp_path.glob("node*.json"))]
    assert len(written) == 1
    check_ran(written[0], 2, 1)


@pytest.mark.gpu  # the NCCL path (one worker per GPU) runs only where a GPU is present
def test_ddp_nccl_one_worker():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip(f"torch {torch.__version__} sees no CUDA GPU")
    result = launch.run(cell("resnet56", "torch", 1, device="cuda"), 1, 2, timeout=TIMEOUT)
    check_ran(result, 1, 2)
    assert result["backend"] == "nccl" and result["comm_share"] is None


# -- JAX, the batch sharded over two host devices -------------------------------------------
@pytest.fixture(scope="module")
def jax_resnet56(tmp_path_factory):
    path = tmp_path_factory.mktemp("jax") / "weights.npz"
    result = launch.run(cell("resnet56", "jax", 2), 0, 1, timeout=TIMEOUT, save_weights=str(path))
    return result, dict(np.load(path))


@pytest.mark.slow
def test_jax_two_host_devices_resnet56(jax_resnet56):
    result = jax_resnet56[0]
    check_ran(result, 2, 1)
    sharding = result["sharding"]
    assert sharding["batch_devices"] == 2 and sharding["batch_pieces"] == 2
    # The gradients (one value per parameter) are all-reduced inside the step.
    assert sharding["all_reduces_in_step"] > 0
    assert sharding["all_reduced_values"] >= sharding["param_count"] > 0
    # comm_share against the same step compiled without the gradient average: only the
    # BatchNorm statistics and the loss are still all-reduced in it.
    assert sharding["all_reduced_values_without_gradient_average"] < sharding["param_count"]
    assert 0 <= result["comm_share"] < 1
    assert "without the gradient pmean" in result["comm_share_how"]
    assert (
        "after the timed ones, the replica check and the saved weights" in result["comm_share_how"]
    )


@pytest.mark.slow
def test_jax_two_devices_fcn_r_is_the_one_device_step(tmp_path):
    weights = {}
    for workers in (2, 1):
        path = tmp_path / f"w{workers}.npz"
        result = launch.run(
            cell("fcn_r", "jax", workers), 0, 1, timeout=TIMEOUT, save_weights=str(path)
        )
        check_ran(result, workers, 1)
        weights[workers] = dict(np.load(path))
    assert result["sharding"]["batch_devices"] == 1
    assert result["comm_share"] is None and "one worker" in result["comm_share_how"]
    assert relative_error(weights[2], weights[1]) < 1e-5


CLIP_SCRIPT = """
import dataclasses, json, sys
import jax, numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from xfbench.adapters.base import Cell
from xfbench.adapters.jax.workload import JaxWorkload
from xfbench.models import get_spec, initial_weights
from xfbench.scaling.jax_sharding import AXIS, batch_spec, data_parallel_step

spec = dataclasses.replace(get_spec("lstm32", "smoke"), clip_norm=float(sys.argv[1]))
w0 = initial_weights(spec, 0)
cell = Cell(network="lstm32", framework="jax", mode="jit", precision="fp32", device="cpu", threads=1, batch_size=16, task="train", data="resident", scale="smoke")
one = JaxWorkload(spec, cell, w0)
one.step()
two = JaxWorkload(spec, cell, w0)
mesh = Mesh(np.array(jax.devices()[:2]), (AXIS,))
rows = NamedSharding(mesh, batch_spec(spec))
two.state, _ = data_parallel_step(spec, two.dtype, False, mesh)(
    jax.device_put(two.state, NamedSharding(mesh, P())),
    jax.device_put(two.x_host, rows), jax.device_put(two.y_host, rows))
print(json.dumps({name: {k: (w[k] - w0[k]).tolist() for k in w0}
                  for name, w in (("one", one.weights()), ("two", two.weights()))}))
"""


@pytest.mark.slow  # among command 2's slowest on a 2-core Zen 3 (CI runs it)
def test_jax_clips_the_averaged_gradient(tmp_path):
    """The LSTM's gradient clip applies to the gradient averaged over the devices, as DDP
    clips after its all-reduce: with a clip norm small enough to act (the smoke gradients'
    norm is about 0.05), two devices on 8 rows each update exactly as one device on all 16.
    Clipping each device's gradient before averaging would make the update some 30 % shorter."""
    import os

    env = {
        **os.environ,
        "XLA_FLAGS": "--xla_force_host_platform_device_count=2",
        "PYTHONPATH": str(ROOT),
    }
    proc = subprocess.run(
        [sys.executable, "-c", CLIP_SCRIPT, "0.01"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    updates = json.loads(proc.stdout.splitlines()[-1])
    one, two = ({k: np.array(v) for k, v in updates[n].items()} for n in ("one", "two"))
    norm = sum(float(np.sum(u**2)) for u in one.values()) ** 0.5
    assert norm == pytest.approx(0.01 * 0.01, rel=1e-3)  # lr x clip norm: the clip acted
    assert l2_relative(two, one) < 1e-4


# -- bad input: one line, exit 2 (pytest's own usage-error code, 4, for its options) -------
@pytest.mark.parametrize(
    "argv, words",
    [
        (
            [
                "-m",
                "xfbench.scaling.torch_ddp",
                "--network",
                "fcn_r",
                "--framework",
                "torch",
                "--workers",
                "0",
                "--batch",
                "8",
                "--out",
                "x.json",
            ],
            "workers must be at least 1",
        ),
        (
            [
                "-m",
                "xfbench.scaling.torch_ddp",
                "--network",
                "fcn_r",
                "--framework",
                "torch",
                "--workers",
                "1",
                "--batch",
                "8",
                "--out",
                "x.json",
            ],
            "start me through torchrun",
        ),
        (
            [
                "-m",
                "xfbench.scaling.jax_sharding",
                "--network",
                "fcn_r",
                "--framework",
                "jax",
                "--workers",
                "3",
                "--batch",
                "8",
                "--out",
                "x.json",
            ],
            "must divide by 3",
        ),
        (
            [
                "-m",
                "xfbench.scaling.jax_sharding",
                "--network",
                "nope",
                "--framework",
                "jax",
                "--workers",
                "1",
                "--batch",
                "8",
                "--out",
                "x.json",
            ],
            "unknown network 'nope'",
        ),
        (
            [
                "-m",
                "xfbench.scaling.launch",
                "--network",
                "fcn_r",
                "--framework",
                "jax",
                "--workers",
                "2",
                "--batch",
                "8",
                "--out",
                "x.json",
                "--nnodes",
                "2",
            ],
            "torchrun options are for torch",
        ),
        (
            [
                "-m",
                "pytest",
                "xfbench/suites/test_scaling.py",
                "-p",
                "no:cacheprovider",
                "--workers",
                "two",
            ],
            "--workers takes positive whole numbers, not 'two'",
        ),
        (
            [
                "-m",
                "pytest",
                "xfbench/suites/test_scaling.py",
                "-p",
                "no:cacheprovider",
                "--scaling",
                "wide",
            ],
            "unknown scaling 'wide'; valid: strong, weak",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv, words, tmp_path):
    proc = subprocess.run(
        [sys.executable, *argv], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    lines = [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
    assert proc.returncode == (4 if "pytest" in argv else 2) and "Traceback" not in proc.stderr
    errors = [line for line in lines if "error" in line.lower()]
    assert len(errors) == 1 and words in errors[0], lines


# -- the suite: records, speedup at session end, skipped cells with their reason ------------
@pytest.mark.slow
def test_suite_records_speedup_and_skips(tmp_path):
    out = tmp_path / "out.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "xfbench/suites/test_scaling.py",
            "-q",
            "-p",
            "no:cacheprovider",
            "--framework",
            "torch,tensorflow",
            "--model",
            "fcn_r",
            "--preset",
            "smoke",
            "--workers",
            "1,2",
            "--device",
            "cpu",
            # a number of seconds, reaching the launcher as one (it once arrived as text)
            "--cell-timeout",
            "300",
            f"--benchmark-json={out}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "xfbench scaling: seconds per step" in proc.stdout
    data = json.loads(out.read_text())
    entries = {b["extra_info"]["cell_id"]: b for b in data["benchmarks"]}
    two = entries["fcn_r-torch-cpu-w2-strong-b16"]
    assert two["group"] == "scaling fcn_r strong"
    info = two["extra_info"]
    assert info["kind"] == "scaling" and info["status"] == "ok" and info["workers"] == 2
    assert info["speedup_baseline"] == "fcn_r-torch-cpu-w1-strong-b16"
    assert info["efficiency"] == pytest.approx(info["speedup"] / 2)
    assert info["seconds_per_batch"] == two["stats"]["median"]
    assert info["samples_per_s"] == pytest.approx(16 / info["seconds_per_batch"])
    assert len(two["stats"]["data"]) == info["rounds"]
    # TensorFlow's cells run through the same launcher: MirroredStrategy, speedup filled.
    tf = entries["fcn_r-tensorflow-cpu-w2-strong-b16"]["extra_info"]
    assert tf["status"] == "ok" and tf["replicas_agree"] is True
    assert tf["backend"].startswith("MirroredStrategy") and tf["mode"] == "function"
    assert tf["speedup_baseline"] == "fcn_r-tensorflow-cpu-w1-strong-b16"
    assert tf["efficiency"] == pytest.approx(tf["speedup"] / 2)
    assert not data["xfbench"]["failures"]


def test_a_timeout_ends_torchrun_and_its_workers(tmp_path):
    """torchrun starts each rank in a session of its own: a timed-out cell must end them
    too, or they keep the output pipe open and run() never returns."""
    from concurrent.futures import ThreadPoolExecutor
    from concurrent.futures import TimeoutError as Late

    import psutil

    out = tmp_path / "never.json"
    with ThreadPoolExecutor(1) as pool:
        # Full-size ResNet-56 for 50 steps: far longer than the 3 s allowed.
        future = pool.submit(
            launch.run,
            ScalingCell(
                network="resnet56",
                framework="torch",
                device="cpu",
                workers=2,
                scaling="strong",
                batch=128,
                threads_per_worker=1,
            ),
            1,
            50,
            out,
            3,
        )
        try:
            future.result(timeout=20)
            outcome = "no timeout"
        except launch.LaunchError as e:
            outcome = e.status
        except Late:
            outcome = "still waiting for the workers 20 s later"
        left = [
            p
            for p in psutil.process_iter(["cmdline"])
            if str(out) in " ".join(p.info["cmdline"] or [])
        ]
        for p in left:
            p.kill()
    assert outcome == "timeout"
    assert not left, f"workers left running after the timeout: {[p.pid for p in left]}"


# -- the data-parallel function itself: the same in every framework -----------------------
def plain_steps(spec, batch: int, workers: int, steps: int, dtype) -> dict:
    """`steps` data-parallel SGD steps written plainly in PyTorch on one process: each of
    `workers` equal row blocks through the network on its own (so BatchNorm normalises with
    that block's statistics), the gradient of the mean of their losses (the average of the
    workers' gradients), then PyTorch's SGD momentum. workers=1: the one-device step."""
    import torch
    import torch.nn.functional as F

    from xfbench.adapters.torch import weights as TW
    from xfbench.adapters.torch.networks import build_network
    from xfbench.models import initial_weights, synthetic_batch

    net = build_network(spec)
    TW.load(spec, net, initial_weights(spec, 0))
    net = net.to(dtype).train()
    x, y = synthetic_batch(spec, batch, 0)
    x, y = torch.from_numpy(x).to(dtype), torch.from_numpy(y)
    opt = torch.optim.SGD(net.parameters(), lr=spec.lr, momentum=spec.momentum)
    for _ in range(steps):
        opt.zero_grad()
        loss = sum(
            F.cross_entropy(net(xs), ys) for xs, ys in zip(x.chunk(workers), y.chunk(workers))
        )
        (loss / workers).backward()
        opt.step()
    return TW.from_module(spec, net, np.float64)


@pytest.mark.slow
def test_resnet56_every_framework_normalises_per_worker(tmp_path, jax_resnet56):
    """Two workers on 8 rows each of a global batch of 16 (ResNet-56, smoke size): PyTorch
    DDP, JAX under shard_map and TensorFlow's MirroredStrategy compute the same function,
    per-worker BatchNorm with averaged gradients, and not the one-device step on all 16 rows
    (BatchNorm over the global batch), which they are clearly farther from.

    The workers run two steps (the first and one timed). The equivalence suite's rule holds
    them to a float64 reference of that function within max(1e-4, 4 x the fp32 floor), the
    floor being how far the same plain step in float32 gets from float64. At this size the
    floor is large: ResNet-56 at initialisation amplifies fp32 round-off from step to step
    through BatchNorm over few values per channel (about 4e-5 after one step, 8e-4 after two),
    so frameworks whose kernels sum in different orders (oneDNN for PyTorch and TensorFlow,
    XLA's own for JAX) differ by that much, while the one-device step is 1e-2 away."""
    import torch

    from xfbench.models import get_spec

    spec = get_spec("resnet56", "smoke")
    got = {"jax": jax_resnet56[1]}
    frameworks = ["torch"] + (["tensorflow"] if importlib.util.find_spec("tensorflow") else [])
    for framework in frameworks:
        path = tmp_path / f"{framework}.npz"
        check_ran(
            launch.run(
                cell("resnet56", framework, 2), 0, 1, timeout=TIMEOUT, save_weights=str(path)
            ),
            2,
            1,
        )
        got[framework] = dict(np.load(path))

    per_worker = plain_steps(spec=spec, batch=16, workers=2, steps=2, dtype=torch.float64)
    global_bn = plain_steps(spec=spec, batch=16, workers=1, steps=2, dtype=torch.float64)
    floor = l2_relative(
        plain_steps(spec=spec, batch=16, workers=2, steps=2, dtype=torch.float32), per_worker
    )
    tolerance = max(1e-4, 4 * floor)
    apart = l2_relative(global_bn, per_worker)
    near = {f: l2_relative(w, per_worker) for f, w in got.items()}
    far = {f: l2_relative(w, global_bn) for f, w in got.items()}
    pairs = {f"{a}-{b}": l2_relative(got[a], got[b]) for a in got for b in got if a < b}
    print(
        f"fp32 floor {floor:.3g}, tolerance {tolerance:.3g}, per-worker vs global BatchNorm "
        f"{apart:.3g}; to the per-worker reference {near}; to the global one {far}; "
        f"pairwise {pairs}"
    )
    assert apart > 2 * tolerance  # the check can tell the two functions apart
    for framework in got:
        assert near[framework] <= tolerance, (framework, near, tolerance)
        assert far[framework] > tolerance and far[framework] > 4 * near[framework], (framework, far)
    assert all(d <= 2 * tolerance for d in pairs.values()), pairs
