"""The JAX adapter builds the same networks as PyTorch: same parameter counts, same
logits, loss and one-step update from the same canonical weights and batch, and a
step that is compiled once, ahead of time, with its state donated."""

from __future__ import annotations

import functools

import numpy as np
import pytest

jax = pytest.importorskip("jax")

from xfbench.adapters import get_adapter  # noqa: E402
from xfbench.adapters.base import Cell  # noqa: E402
from xfbench.adapters.jax import networks  # noqa: E402
from xfbench.adapters.jax import weights as W  # noqa: E402
from xfbench.adapters.jax.workload import JaxWorkload  # noqa: E402
from xfbench.errors import CannotRun  # noqa: E402
from xfbench.models import NETWORKS, get_spec, initial_weights  # noqa: E402
from xfbench.models.layers import (  # noqa: E402
    BasicBlock,
    BatchNorm,
    Conv,
    Dense,
    GlobalAvgPool,
    ReLU,
)
from xfbench.models.spec import Spec  # noqa: E402

# The table of docs/models.md.
PARAMETERS = {
    "fcn5": 117_997_696,
    "fcn8": 130_586_752,
    "fcn_r": 14_205_962,
    "alexnet": 62_378_344,
    "alexnet_r": 85_098,
    "resnet50": 25_557_032,
    "resnet56": 853_018,
    "lstm32": 6_182_672,
    "lstm64": 6_182_672,
    "bert_base": 109_514_298,  # Hugging Face's BertForMaskedLM
    "gpt2": 124_439_808,  # Hugging Face's GPT2LMHeadModel
}


def cell(network, task="train", precision="fp32", device="cpu", framework="jax", mode="jit"):
    return Cell(
        network=network,
        framework=framework,
        mode=mode,
        precision=precision,
        device=device,
        threads=1,
        batch_size=8,
        task=task,
        scale="smoke",
    )


def jax_workload(network, task="train", precision="fp32", spec=None):
    spec = spec or get_spec(network, "smoke")
    return JaxWorkload(spec, cell(network, task, precision), initial_weights(spec, 0))


def torch_workload(network, task):
    from xfbench.adapters.torch.workload import TorchWorkload

    spec = get_spec(network, "smoke")
    return TorchWorkload(
        spec, cell(network, task, framework="torch", mode="eager"), initial_weights(spec, 0)
    )


@pytest.mark.parametrize("network", list(NETWORKS))
def test_parameter_count_from_shapes_only(network):
    assert networks.count_parameters(get_spec(network)) == PARAMETERS[network]


@pytest.mark.parametrize("network", list(NETWORKS))
def test_canonical_weights_round_trip(network):
    spec = get_spec(network, "smoke")
    weights = initial_weights(spec, 0)
    back = W.to_canonical(spec, W.to_jax(spec, weights))
    assert set(back) == set(weights)
    for name, value in weights.items():
        np.testing.assert_array_equal(back[name], value, err_msg=name)


def test_built_workload_reports_the_weights_it_was_given():
    spec = get_spec("alexnet", "smoke")  # conv, and a dense layer after a 2x2 flatten
    weights = initial_weights(spec, 0)
    work = JaxWorkload(spec, cell("alexnet", "infer"), weights)
    for name, value in work.weights().items():
        np.testing.assert_array_equal(value, weights[name], err_msg=name)


@pytest.mark.parametrize("network", list(NETWORKS))
@pytest.mark.slow
def test_agrees_with_pytorch_and_learns(network):
    """Same logits, same loss and the same weights after one update as PyTorch
    (catches layout, flatten-order, gate-order and optimizer mistakes); then the
    loss keeps falling over a few more steps on the same batch."""
    pytest.importorskip("torch")
    jx, th = jax_workload(network, "infer"), torch_workload(network, "infer")
    jx.prepare()
    jx.step()
    th.step()
    out_t = th.output()
    np.testing.assert_allclose(jx.output(), out_t, rtol=1e-4, atol=1e-5 * np.abs(out_t).max())

    jx, th = jax_workload(network), torch_workload(network, "train")
    jx.prepare()
    jx.step()
    th.step()
    assert jx.loss() == pytest.approx(th.loss(), rel=1e-4)
    # The updated weights: as close to the float64 step as fp32 can be (harness.equivalence's
    # rule, derived from that step: the fp32 floor and the ReLU and max-pool decisions near
    # a tie).
    from xfbench.harness.equivalence import ReferenceStep, weights_error

    reference = ReferenceStep.compute(jx.spec, initial_weights(jx.spec, 0), jx.cell.batch_size)
    err, where = weights_error(jx.spec, jx.weights(), reference.weights)
    assert err <= reference.tolerance, (where, err, reference)  # repr: tolerance and near ties
    if network in ("resnet56", "resnet50"):  # BatchNorm running statistics after one step
        from xfbench.adapters.torch.networks import canonical_keys

        state = th.net.state_dict()
        keys = {
            name.rsplit(".", 1)[0]: key.rsplit(".", 1)[0]
            for name, key in canonical_keys(th.spec, th.net).items()
        }
        for name, value in jx.running_stats().items():
            bn, stat = name.rsplit(".", 1)
            expected = state[f"{keys[bn]}.{stat}"].numpy()
            np.testing.assert_allclose(value, expected, rtol=1e-4, atol=1e-5, err_msg=name)

    first = jx.loss()
    for _ in range(3):
        jx.step()
    assert jx.loss() < first


def test_prepared_step_never_compiles_again_and_donates_its_state():
    import jax.monitoring

    work = jax_workload("alexnet_r")
    work.prepare()
    events = []
    listener = lambda name, *args, **kwargs: events.append(name)  # noqa: E731
    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        old = jax.tree.leaves(work.state)
        work.step()
        work.step()
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
    compiles = [e for e in events if "compile" in e or "trace" in e]
    assert compiles == []
    assert all(leaf.is_deleted() for leaf in old)  # updated in place: donated


@pytest.mark.slow  # among command 2's slowest on a 2-core Zen 3 (CI runs it)
def test_one_device_step_ignores_the_data_parallel_options():
    """average_gradients only acts with data_axis: the one-device step lowers to the same
    program with or without it, and that program has no collective."""
    from xfbench.adapters.jax.workload import make_train_step

    work = jax_workload("resnet56")
    args = (work.state, work.x, work.y)
    texts = [
        jax.jit(make_train_step(work.spec, work.dtype, False, **kw), donate_argnums=0)
        .lower(*args)
        .as_text()
        for kw in ({}, {"average_gradients": False})
    ]
    assert texts[0] == texts[1]
    assert "all_reduce" not in texts[0] and "all-reduce" not in texts[0]


def test_fp32_traces_every_product_at_highest_precision():
    work = jax_workload("alexnet_r")
    work.prepare()
    text = work.lowered.as_text()
    precisions = [
        line.split("precision_config = ")[1][:80]
        for line in text.splitlines()
        if "precision_config" in line
    ]
    assert len(precisions) >= 8  # 4 layers forward, and their gradients
    assert all("DEFAULT" not in p and "HIGH>" not in p for p in precisions), precisions


def tiny_resnet() -> Spec:
    """Convolution, BatchNorm and an option-A block, cheap to compile."""
    layers = (
        Conv(name="conv1", filters=8, kernel=3, stride=1, pad=1, bias=False),
        BatchNorm("bn1"),
        ReLU(),
        BasicBlock("layer2.0", 16, 2),
        GlobalAvgPool(),
        Dense("fc", 10),
    )
    return Spec(
        id="resnet56",
        paper_name="tiny ResNet",
        input_shape=(3, 8, 8),
        classes=10,
        layers=layers,
        batch_size=8,
        scale="smoke",
    )


@functools.lru_cache
def tiny_resnet_fp32_loss() -> float:
    work = jax_workload("resnet56", spec=tiny_resnet())
    work.step()
    return work.loss()


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
@pytest.mark.slow  # among command 2's slowest on a 2-core Zen 3 (CI runs it)
def test_mixed_precision_keeps_float32_state_and_learns(precision):
    work = jax_workload("resnet56", precision=precision, spec=tiny_resnet())
    work.step()
    assert all(leaf.dtype == np.float32 for leaf in jax.tree.leaves(work.state["params"]))
    assert work.info["compute_dtype"] == {"bf16": "bfloat16", "fp16": "float16"}[precision]
    assert work.loss() == pytest.approx(tiny_resnet_fp32_loss(), rel=3e-2)
    first = work.loss()
    for _ in range(3):
        work.step()
    assert work.loss() < first


@pytest.mark.slow  # among command 2's slowest on a 2-core Zen 3 (CI runs it)
def test_fp16_overflow_skips_the_update_and_backs_off():
    """The LSTM path: loss scaling, unscaling, then clipping."""
    work = jax_workload("lstm32", precision="fp16")
    work.step()
    assert float(work.state["scaler"]["scale"]) == 2.0**16
    before = work.weights()
    work.state["scaler"]["scale"] = jax.device_put(np.float32(2.0**100), work.device)
    work.step()
    assert float(work.state["scaler"]["scale"]) == 2.0**99
    for name, value in work.weights().items():
        np.testing.assert_array_equal(value, before[name], err_msg=name)


def test_arrays_live_on_the_device_asked_for():
    work = jax_workload("fcn_r")
    device = jax.devices("cpu")[0]
    for leaf in jax.tree.leaves((work.state, work.x, work.y)):
        assert leaf.devices() == {device}


def test_absent_accelerator_is_refused_not_replaced():
    adapter = get_adapter("jax")
    assert "cpu" in adapter.devices()
    if "cuda:0" in adapter.devices():
        pytest.skip("a GPU is present")
    assert "not present" in adapter.check(cell("fcn_r", device="cuda:0"))
    spec = get_spec("fcn_r", "smoke")
    with pytest.raises(CannotRun, match="no cuda device"):
        JaxWorkload(spec, cell("fcn_r", device="cuda:0"), initial_weights(spec, 0))


def test_thread_report_reads_the_affinity():
    import os

    report = get_adapter("jax").configure_threads(len(os.sched_getaffinity(0)))
    assert report["cpus_allowed"] == len(os.sched_getaffinity(0))
    assert report["matches_request"]


@pytest.mark.slow  # among command 2's slowest on a 2-core Zen 3 (CI runs it)
def test_peak_device_memory_is_the_cells_own_from_xlas_buffer_assignment():
    """The device's peak_bytes_in_use is the process's and cannot be reset: a later,
    smaller cell would inherit an earlier one's peak. The step's own comes from XLA."""
    from xfbench.adapters.jax.workload import step_peak_bytes

    peaks = []
    for network in ("fcn_r", "resnet56", "fcn_r"):
        spec = get_spec(network, "smoke")
        cell = Cell(
            network=network,
            framework="jax",
            mode="jit",
            precision="fp32",
            device="cpu",
            threads=1,
            batch_size=8,
            task="train",
            data="resident",
            scale="smoke",
        )
        work = get_adapter("jax").build(spec, cell, initial_weights(spec))
        work.prepare()
        peaks.append(step_peak_bytes(work._compiled.memory_analysis()))
        assert work.peak_device_memory() is None  # the host's is measured as RSS
        work.close()
    assert peaks[0] == peaks[2] > 0 and peaks[1] != peaks[0]  # its own, in any order


def test_fp64_runs_in_float64_and_leaves_x64_off():
    """fp64 computes in float64 under jax.enable_x64 scoped to the workload's own calls:
    before, between and after them the process keeps JAX's 32-bit defaults."""
    work = jax_workload("lstm32", precision="fp64")
    assert not jax.config.x64_enabled
    work.prepare()
    work.step()
    assert not jax.config.x64_enabled
    assert all(w.dtype == np.float64 for w in work.weights().values())
    assert work.state["params"]["fc.bias"].dtype == np.float64
    assert jax.numpy.zeros(1).dtype == np.float32  # another cell's arrays stay float32
    work.close()


@pytest.mark.parametrize(
    "network, precision, want",
    [
        # the half-precision ones among command 2's slowest on a 2-core Zen 3: CI runs them
        pytest.param("resnet56", "bf16", "bfloat16", marks=pytest.mark.slow),
        pytest.param("lstm32", "fp16", "float16", marks=pytest.mark.slow),
        ("fcn_r", "fp32", "float32"),
    ],
)
def test_the_record_says_which_dtype_the_products_and_convolutions_took(network, precision, want):
    work = jax_workload(network, precision=precision)
    work.prepare()
    ran = work.info["layer_dtypes"]
    assert set(ran.values()) == {want}, ran
    assert "dot_general" in ran
    assert ("conv_general_dilated" in ran) == (network == "resnet56")


def test_a_product_in_another_dtype_fails_the_cell(monkeypatch):
    """A network whose dense layers stayed float32 under a bf16 label."""
    import jax.numpy as jnp

    apply = networks.apply
    monkeypatch.setattr(
        networks,
        "apply",
        lambda spec, params, stats, x, train, dtype, attention="xla": apply(
            spec=spec, params=params, stats=stats, x=x, train=train, dtype=jnp.float32
        ),
    )
    work = jax_workload("fcn_r", precision="bf16")
    with pytest.raises(
        RuntimeError, match="bf16 cell must compute in bfloat16, but dot_general ran float32"
    ):
        work.prepare()


@pytest.mark.parametrize(
    ("precision", "want", "mode"),
    [("fp32", "HIGHEST", "jit"), ("tf32", "HIGH", "jit"), ("fp32", "HIGHEST", "loop")],
)
def test_generation_traces_every_product_at_its_cells_precision(precision, want, mode):
    """JAX's generation cells labelled fp32 ran in TF32 on an H100 (the GPU's default for
    float32 products): prefill and decode are traced at the cell's precision whatever the
    process's default is, read back from each lowered program and recorded."""
    from types import SimpleNamespace

    from xfbench.adapters.jax.generation import JaxGenerator
    from xfbench.generation.check import decoding_weights
    from xfbench.generation.measure import prompt_ids
    from xfbench.generation.metrics import generate

    spec = get_spec("gpt2", "smoke")
    cell = SimpleNamespace(
        device="cpu", mode=mode, precision=precision, batch_size=1, prompt_tokens=4, new_tokens=3
    )
    gen = JaxGenerator(spec, cell, decoding_weights(spec))
    try:  # the process's default as a GPU's is, unasked: float32 products at the lowest
        with jax.default_matmul_precision("bfloat16"):
            generate(gen, prompt_ids(spec, 1, 4), 3)
            facts = gen.compile_facts()["lowered_precisions"]
    finally:
        gen.close()
    assert set(facts) == {"prefill", "decode" if mode == "jit" else "loop"}
    for step, counts in facts.items():
        assert set(counts) == {want} and counts[want] >= 4 * 2, (step, counts)
    assert gen.info["matmul_precision"] == {"fp32": "highest", "tf32": "tensorfloat32"}[precision]


def test_a_generation_product_below_its_precision_fails_the_cell():
    from xfbench.adapters.jax.generation import check_precision

    check_precision("fp32", {"HIGHEST": 30}, "prefill")
    with pytest.raises(RuntimeError, match="not all at HIGHEST"):
        check_precision("fp32", {"HIGHEST": 29, "DEFAULT": 1}, "prefill")
