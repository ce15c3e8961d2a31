"""TensorFlow's TPU path, tested where there is no TPU: discovery on a machine without one,
the reasons a TPU cell is refused, the one-core TPUStrategy built against a stand-in for
TensorFlow's TPU API, and the TPU step's own code under a one-replica strategy on the CPU.
None of this has run on a TPU (docs/frameworks.md)."""

from __future__ import annotations

import types
from dataclasses import replace

import numpy as np
import pytest

from xfbench import machine
from xfbench.adapters import Cell, get_adapter
from xfbench.adapters.tensorflow import tpu
from xfbench.errors import CannotRun, UsageError
from xfbench.harness import measure
from xfbench.harness.selection import cells, parse
from xfbench.models import get_spec, initial_weights

tf = pytest.importorskip("tensorflow")

from xfbench.adapters.tensorflow.tpu_workload import TpuWorkload  # noqa: E402
from xfbench.adapters.tensorflow.workload import TensorFlowWorkload  # noqa: E402

TF = get_adapter("tensorflow")

# A TPU v3-8's topology as TensorFlow describes it: a 2x2 mesh of chips with two cores
# each, all on one host; TensorFlow's TPU device d sits at DEVICE_COORDINATES[d].
DEVICE_COORDINATES = [[x, y, 0, core] for y in range(2) for x in range(2) for core in range(2)]
V3_8 = dict(mesh_shape=[2, 2, 1, 2], device_coordinates=[DEVICE_COORDINATES])


def tpu_cell(precision="fp32", mode="xla", network="fcn_r", task="train", device="tpu:0"):
    return Cell(
        network=network,
        framework="tensorflow",
        mode=mode,
        precision=precision,
        device=device,
        threads=1,
        batch_size=8,
        task=task,
        scale="smoke",
    )


@pytest.fixture(autouse=True)
def process_that_has_not_asked(monkeypatch):
    """Each test starts as a process that has not looked for a TPU yet."""
    monkeypatch.setattr(tpu, "_found", None)


@pytest.fixture
def no_tpu_here(monkeypatch):
    monkeypatch.setattr(machine, "tpu_chip_count", lambda: 0)
    monkeypatch.delenv("TPU_NAME", raising=False)


def fake_tensorflow(topology, calls: list):
    """The part of tensorflow's API that tpu.py calls, recording the calls; the topology
    is what initialize_tpu_system returns, DeviceAssignment is TensorFlow's own."""

    class TPUClusterResolver:
        def __init__(self, tpu):
            calls.append(("resolver", tpu))
            self.tpu = tpu

    class TPUStrategy:
        def __init__(self, resolver, experimental_device_assignment=None):
            self.resolver, self.assignment = resolver, experimental_device_assignment

    def initialize_tpu_system(resolver):
        calls.append(("initialize", resolver.tpu))
        return topology

    def list_logical_devices(kind):
        return [f"/device:TPU:{i}" for i in range(topology.num_tpus_per_task)]

    ns = types.SimpleNamespace
    return ns(
        distribute=ns(
            cluster_resolver=ns(TPUClusterResolver=TPUClusterResolver), TPUStrategy=TPUStrategy
        ),
        config=ns(
            experimental_connect_to_cluster=lambda r: calls.append(("connect", r.tpu)),
            list_logical_devices=list_logical_devices,
        ),
        tpu=ns(
            experimental=ns(
                initialize_tpu_system=initialize_tpu_system,
                DeviceAssignment=tf.tpu.experimental.DeviceAssignment,
            )
        ),
    )


# -- discovery ------------------------------------------------------------------------


def test_without_a_tpu_none_is_listed_and_tensorflow_is_not_asked(no_tpu_here, monkeypatch):
    def asked(*args, **kwargs):
        raise AssertionError("TensorFlow was asked for a TPU on a machine without one")

    monkeypatch.setattr(tf.distribute.cluster_resolver, "TPUClusterResolver", asked)
    assert not [d for d in TF.devices() if d.startswith("tpu")]
    assert tpu.failure() == "no TPU here (no /dev/accel* device, TPU_NAME not set)"


@pytest.mark.slow  # among command 2's slowest on a 2-core Zen 3 (CI runs it)
def test_a_tpu_that_does_not_start_is_absent_and_the_skip_says_why(monkeypatch):
    """TPU_NAME=local on this CPU-only TensorFlow: the real start fails, nothing raises, no
    TPU is listed, and a tpu cell's one-line reason carries TensorFlow's error."""
    monkeypatch.setattr(machine, "tpu_chip_count", lambda: 0)
    monkeypatch.setenv("TPU_NAME", "local")
    assert not [d for d in TF.devices() if d.startswith("tpu")]
    reason = TF.check(tpu_cell())
    assert reason.startswith("tpu:0 is not present to tensorflow (it sees: cpu")
    assert "TensorFlow could not start the TPU 'local': " in reason and "\n" not in reason


def test_a_tpu_cell_gets_one_replica_on_its_own_core(monkeypatch):
    monkeypatch.setattr(machine, "tpu_chip_count", lambda: 4)  # a TPU VM's /dev/accel0-3
    topology = tf.tpu.experimental.Topology(**V3_8)
    calls = []
    fake = fake_tensorflow(topology, calls)

    strategy, facts = tpu.one_core_strategy(fake, 3)
    assert calls == [("resolver", "local"), ("connect", "local"), ("initialize", "local")]
    assignment = strategy.assignment
    assert strategy.resolver.tpu == "local"
    assert (assignment.num_replicas, assignment.num_cores_per_replica) == (1, 1)
    assert assignment.tpu_device() == "/task:0/device:TPU:3"
    assert assignment.core_assignment[0, 0].tolist() == DEVICE_COORDINATES[3]
    assert facts == {
        "tpu_cores": 8,
        "tpu_mesh_shape": "2x2x1x2",
        "tpu_core_coordinates": DEVICE_COORDINATES[3],
    }

    # Once per process: a second cell reuses the TPU system (starting it again would
    # drop the first cell's variables), and the adapter lists its cores.
    assert tpu.one_core_strategy(fake, 0)[0].assignment.tpu_device() == "/task:0/device:TPU:0"
    assert calls.count(("initialize", "local")) == 1
    assert TF.devices()[-8:] == [f"tpu:{i}" for i in range(8)]


def test_core_0_is_where_device_assignment_build_puts_one_replica():
    topology = tf.tpu.experimental.Topology(**V3_8)
    built = tf.tpu.experimental.DeviceAssignment.build(
        topology, computation_shape=[1, 1, 1, 1], num_replicas=1
    )
    ours = tpu.device_assignment(tf, topology, 0)
    assert ours.core_assignment.tolist() == built.core_assignment.tolist()
    with pytest.raises(CannotRun, match=r"tpu:8 is not present \(TensorFlow's TPU host has 8"):
        tpu.device_assignment(tf, topology, 8)


# -- what a TPU cell may be ---------------------------------------------------------------


@pytest.mark.parametrize(
    "precision, reason",
    [
        ("fp16", "TPU cells run fp32 and bf16: bf16 is the TPU's half type, and fp16 has"),
        ("tf32", "tf32 is a mode of NVIDIA tensor cores; it has no meaning on tpu:0"),
        ("fp64", "fp64 runs on the CPU only"),
    ],
)
def test_precisions_other_than_fp32_and_bf16_are_refused_on_a_tpu(no_tpu_here, precision, reason):
    got = TF.check(tpu_cell(precision))
    assert got.startswith(reason) and "\n" not in got
    assert TF.precision_reason("xla", precision, "cpu") is None  # the CPU's are unchanged


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_fp32_and_bf16_tpu_cells_reach_the_device_check(no_tpu_here, precision):
    assert TF.check(tpu_cell(precision)).startswith("tpu:0 is not present to tensorflow")


@pytest.mark.parametrize("mode", ["eager", "function"])
def test_a_tpu_cell_runs_mode_xla_only(mode):
    assert "TensorFlow's TPU cells run in mode xla" in TF.check(tpu_cell(mode=mode))
    assert TF.mode_reason(mode, "cpu") is None


def test_a_tpu_cell_on_this_machine_is_refused_or_skipped_with_one_line(no_tpu_here):
    """Through the suite's own path: --device tpu:0 is refused before anything runs; with
    --skip-missing-devices the cell (mode xla only) is built and skipped with the reason."""
    options = dict(framework="tensorflow", model="fcn_r", device="tpu:0", preset="smoke")
    with pytest.raises(UsageError, match="device tpu:0 is not present on this machine"):
        parse(**options)
    (cell,) = cells(parse(**options, skip_missing_devices=True), "train")
    assert cell.mode == "xla"
    with pytest.raises(measure.CannotRun) as skip:
        measure.build(cell)
    assert str(skip.value) == (
        "tpu:0 is not present to tensorflow (it sees: cpu); "
        "no TPU here (no /dev/accel* device, TPU_NAME not set)"
    )


# -- the TPU step's code, under a one-replica strategy on the CPU --------------------------


@pytest.mark.parametrize(
    "network, task",
    [("fcn_r", "train"), ("fcn_r", "infer"), ("resnet56", "train"), ("lstm32", "train")],
)
@pytest.mark.slow
def test_the_tpu_step_computes_the_cpu_step_under_a_one_replica_strategy(
    monkeypatch, network, task
):
    """TPUStrategy needs a TPU; MirroredStrategy over the CPU alone keeps its protocol
    (scope, run, local results, one replica of distributed variables). Under it, the TPU
    workload's own code (variables made in the scope, the step through strategy.run, the
    host read that ends a step, batch-norm statistics assigned in the replica, Keras's LSTM
    variables) computes what the CPU cell computes (eager there, which traces nothing)."""
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    monkeypatch.setattr(tpu, "one_core_strategy", lambda tf_, core: (strategy, {"tpu_cores": 1}))
    spec = get_spec(network, "smoke")
    weights = initial_weights(spec)
    cell = tpu_cell(network=network, task=task)
    work = TpuWorkload(spec, cell, weights)
    ref = TensorFlowWorkload(spec, replace(cell, device="cpu", mode="eager"), weights)
    assert all(strategy.extended.variable_created_in_scope(v) for v in work.trainable)
    assert work.info["strategy"] == "MirroredStrategy, 1 replica" and work.info["tpu_cores"] == 1
    assert work.info["tpu_device"].endswith("device:CPU:0")
    work.prepare()
    # The dtype check reads the products inside strategy.run's replica too.
    assert work.info["layer_dtypes"] and set(work.info["layer_dtypes"].values()) == {"float32"}
    for _ in range(2):  # the second step starts from the first one's update
        work.step()
        ref.step()
        if task == "train":
            assert work.loss() == pytest.approx(ref.loss(), rel=1e-4)
        else:
            np.testing.assert_allclose(work.output(), ref.output(), rtol=1e-4, atol=1e-6)
    # The two updates moved each tensor alike (graph and eager round apart, so to 1 % of
    # how far the tensor moved).
    for name, value in ref.weights().items():
        moved = np.abs(value - weights[name]).max()
        assert np.abs(work.weights()[name] - value).max() <= 0.01 * moved + 1e-7, name
    work.close()
