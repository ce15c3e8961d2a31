"""The TensorFlow adapter builds the spec's networks, trains them the spec's way in
all three modes, and computes what PyTorch computes on the same weights and batch."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from xfbench.adapters import Cell, get_adapter
from xfbench.models import NETWORKS, get_spec, initial_weights

tf = pytest.importorskip("tensorflow")

from xfbench.adapters.tensorflow.networks import count_parameters  # noqa: E402
from xfbench.adapters.tensorflow.weights import (  # noqa: E402,E501
    CONV,
    DENSE,
    Converter,
    lstm_from_keras,
    lstm_to_keras,
)
from xfbench.adapters.tensorflow.workload import _same_device, preferred_layout  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TF = get_adapter("tensorflow")
MODES = ("eager", "function", "xla")

# The table of docs/models.md (two LSTM biases per layer).
MODELS_DOC_PARAMS = {
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


def cell(network, mode="eager", task="train", precision="fp32", batch=8):
    return Cell(
        network=network,
        framework="tensorflow",
        mode=mode,
        precision=precision,
        device="cpu",
        threads=1,
        batch_size=batch,
        task=task,
        scale="smoke",
    )


def build(spec, mode="eager", task="train", precision="fp32", weights=None, framework=TF):
    c = replace(cell(spec.id, mode, task, precision), framework=framework.name)
    return framework.build(spec, c, initial_weights(spec) if weights is None else weights)


def rel_err(a, b) -> float:
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-12))


# -- what the adapter is ----------------------------------------------------------


def test_adapter_is_registered_and_imports_tensorflow_lazily():
    assert TF.name == "tensorflow" and TF.modes == MODES
    code = "import xfbench.adapters.tensorflow, sys; assert 'tensorflow' not in sys.modules"
    subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        check=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


@pytest.mark.parametrize("network", NETWORKS)
def test_full_size_parameter_counts_match_models_md(network):
    spec = get_spec(network)
    native = count_parameters(spec)  # shape-only: no weights allocated
    if spec.time_major:
        # Keras keeps one bias (4H) per LSTM layer where the spec counts two.
        lstm = spec.layers[1]
        assert native == MODELS_DOC_PARAMS[network] - lstm.layers * 4 * lstm.hidden == 6_180_624
        native += lstm.layers * 4 * lstm.hidden
    assert native == MODELS_DOC_PARAMS[network] == spec.param_count


# -- weights ----------------------------------------------------------------------


def test_converters_round_trip_and_flatten_order():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((5, 3, 2, 4)).astype(np.float32)
    assert CONV.to_tf(w).shape == (2, 4, 3, 5)
    np.testing.assert_array_equal(CONV.from_tf(CONV.to_tf(w)), w)
    d = rng.standard_normal((7, 3 * 2 * 2)).astype(np.float32)
    np.testing.assert_array_equal(DENSE.from_tf(DENSE.to_tf(d)), d)
    flat = Converter("flat_dense", (3, 2, 2))
    np.testing.assert_array_equal(flat.from_tf(flat.to_tf(d)), d)
    # An NHWC map flattened (H, W, C) times the permuted kernel equals the NCHW map
    # flattened (C, H, W) times the canonical one.
    chw = rng.standard_normal((4, 3, 2, 2)).astype(np.float32)
    nchw_flat = chw.reshape(4, -1) @ d.T
    nhwc_flat = chw.transpose(0, 2, 3, 1).reshape(4, -1) @ flat.to_tf(d)
    np.testing.assert_allclose(nhwc_flat, nchw_flat, rtol=1e-5)


def test_same_padding_only_where_it_is_the_spec_padding():
    from xfbench.adapters.tensorflow.layers import same_is_symmetric

    assert same_is_symmetric(32, 3, 1, 1)  # stride 1: SAME pads 1 and 1
    assert not same_is_symmetric(32, 3, 2, 1)  # stride 2: SAME pads 0 and 1
    assert not same_is_symmetric(224, 11, 4, 2)  # AlexNet's conv1: 56 maps, not 55
    assert not same_is_symmetric(224, 7, 2, 3)  # ResNet-50's conv1


def test_lstm_gates_reordered_and_biases_summed():
    h, fin = 3, 2
    # Each ONNX gate block (i, o, f, c) filled with its own number.
    W = np.repeat(np.array([1, 2, 3, 4], np.float32), h)[:, None] * np.ones((1, fin), np.float32)
    R = np.repeat(np.array([1, 2, 3, 4], np.float32), h)[:, None] * np.ones((1, h), np.float32)
    B = np.concatenate([np.repeat([1.0, 2.0, 3.0, 4.0], h), np.repeat([10.0, 20.0, 30.0, 40.0], h)])
    kernel, recurrent, bias = lstm_to_keras(W, R, B.astype(np.float32))
    # Keras columns are i, f, c, o.
    assert kernel.shape == (fin, 4 * h) and recurrent.shape == (h, 4 * h)
    np.testing.assert_array_equal(kernel[0, ::h], [1, 3, 4, 2])
    np.testing.assert_array_equal(bias[::h], [11, 33, 44, 22])
    W2, R2, B2 = lstm_from_keras(kernel, recurrent, bias)
    np.testing.assert_array_equal(W2, W)
    np.testing.assert_array_equal(R2, R)
    np.testing.assert_array_equal(B2[: 4 * h] + B2[4 * h :], B[: 4 * h] + B[4 * h :])
    assert not B2[4 * h :].any()


@pytest.mark.parametrize("network", NETWORKS)
def test_canonical_weights_round_trip(network):
    spec = get_spec(network, "smoke")
    w0 = initial_weights(spec)
    got = build(spec, task="infer", weights=w0).weights()
    assert set(got) == set(w0)
    for name, value in w0.items():
        if name.endswith(".B"):  # one Keras bias: [input + recurrent, zeros]
            h = value.shape[0] // 2
            np.testing.assert_allclose(got[name][:h], value[:h] + value[h:], rtol=1e-6)
            assert not got[name][h:].any()
        else:
            np.testing.assert_array_equal(got[name], value, err_msg=name)


# -- training in every mode -------------------------------------------------------


@pytest.mark.parametrize("network", NETWORKS)
@pytest.mark.slow
def test_loss_decreases_in_every_mode_and_modes_agree(network):
    spec = get_spec(network, "smoke")
    first = {}
    for mode in MODES:
        work = build(spec, mode)
        work.prepare()
        losses = []
        for _ in range(2):  # compilation dominates: one update is enough to see
            work.step()
            losses.append(work.loss())
        work.close()
        assert losses[-1] < losses[0], (mode, losses)
        first[mode] = losses[0]
    for mode in MODES:  # same weights, same batch: the same loss
        assert first[mode] == pytest.approx(first["eager"], rel=1e-4), first


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_mixed_precision_trains_near_fp32(precision):
    spec = get_spec("alexnet_r", "smoke")
    ref = build(spec, "function")
    ref.step()
    work = build(spec, "function", precision=precision)
    assert work.info["compute_dtype"] == {"bf16": "bfloat16", "fp16": "float16"}[precision]
    losses = []
    for _ in range(3):
        work.step()
        losses.append(work.loss())
    assert losses[-1] < losses[0]
    assert losses[0] == pytest.approx(ref.loss(), rel=2e-2)
    # fp32 master weights
    assert all(v.dtype == tf.float32 for v in work.trainable)


def test_fp32_switches_tf32_off_and_tf32_is_a_gpu_mode():
    work = build(get_spec("fcn_r", "smoke"))
    assert work.info["tf32"] is False
    assert not tf.config.experimental.tensor_float_32_execution_enabled()
    assert "tensor cores" in TF.check(cell("fcn_r", precision="tf32"))


# -- the same function as PyTorch -------------------------------------------------


@pytest.mark.parametrize("network", NETWORKS)
def test_inference_logits_match_pytorch(network):
    torch_adapter = get_adapter("torch")
    if torch_adapter.import_error():
        pytest.skip(torch_adapter.import_error())
    spec = get_spec(network, "smoke")
    w0 = initial_weights(spec)
    outs = []
    for framework in (TF, torch_adapter):
        work = build(spec, "eager", "infer", weights=w0, framework=framework)
        work.step()
        outs.append(work.output())
    assert outs[0].shape == outs[1].shape
    assert rel_err(*outs) < 1e-4


# ResNet-56 among command 2's slowest on a 2-core Zen 3: CI runs it
@pytest.mark.parametrize(
    "network", ["alexnet", pytest.param("resnet56", marks=pytest.mark.slow), "lstm32"]
)
def test_one_update_matches_the_float64_step(network):
    """Loss, backward, clipping and the momentum update: the weights after one step are
    as close to the float64 step as fp32 can be (harness.equivalence's rule: the fp32
    floor and the ReLU and max-pool decisions near a tie, both measured). The LSTM's clip
    is lowered so that clipping really happens; the update must be far larger than the
    tolerance."""
    from xfbench.harness.equivalence import ReferenceStep, functional, weights_error

    if get_adapter("torch").import_error():
        pytest.skip(get_adapter("torch").import_error())
    spec = get_spec(network, "smoke")
    if spec.clip_norm:
        spec = replace(spec, clip_norm=0.05)
    w0 = initial_weights(spec)
    reference = ReferenceStep.compute(spec, w0, 8)
    work = build(spec, "eager", weights=w0)
    work.step()
    assert work.loss() == pytest.approx(reference.loss, rel=1e-5)
    err, where = weights_error(spec, work.weights(), reference.weights)
    assert err <= reference.tolerance, (where, err, reference)  # repr: tolerance and near ties
    moved, _ = weights_error(spec, functional(spec, w0), reference.weights)
    assert moved > 10 * reference.tolerance, (moved, reference.tolerance)


def test_batchnorm_running_statistics_match_pytorch():
    torch = pytest.importorskip("torch")
    from xfbench.adapters.tensorflow.layers import BatchNorm, Variables
    from xfbench.models import layers as L

    x = np.random.default_rng(0).standard_normal((6, 4, 3, 3)).astype(np.float32)
    bn = BatchNorm(
        L.BatchNorm("bn"),
        (4, 3, 3),
        "NHWC",
        Variables({"bn.weight": np.ones(4, np.float32), "bn.bias": np.zeros(4, np.float32)}),
    )
    y = bn(tf.constant(x.transpose(0, 2, 3, 1)), training=True).numpy().transpose(0, 3, 1, 2)
    ref = torch.nn.BatchNorm2d(4, eps=1e-5, momentum=0.1)
    ry = ref(torch.from_numpy(x)).detach().numpy()
    np.testing.assert_allclose(y, ry, atol=1e-5)
    np.testing.assert_allclose(bn.mean.numpy(), ref.running_mean.numpy(), atol=1e-6)
    np.testing.assert_allclose(bn.var.numpy(), ref.running_var.numpy(), atol=1e-6)


@pytest.mark.parametrize("network", ["alexnet", "resnet50", "resnet56"])
def test_channels_first_layout_computes_the_same(network):
    """The GPU fp32 layout (NCHW), checked on the CPU where TensorFlow's CPU kernels run
    it: oneDNN's do, Eigen's (TensorFlow's default on CPUs where it leaves oneDNN off,
    such as AMD's) have no NCHW convolution, and the check is skipped with that reason."""
    from xfbench.adapters.tensorflow.networks import Network
    from xfbench.adapters.tensorflow.workload import layout_reason
    from xfbench.models import synthetic_batch

    reason = layout_reason("channels_first", "cpu")
    if reason:
        pytest.skip(reason)
    spec = get_spec(network, "smoke")
    w0 = initial_weights(spec)
    x, _ = synthetic_batch(spec, 4)
    with tf.device("/CPU:0"):
        nchw, nhwc = Network(spec, "channels_first", w0), Network(spec, "channels_last", w0)
        a = nchw(tf.constant(x), False).numpy()
        b = nhwc(tf.constant(x.transpose(0, 2, 3, 1)), False).numpy()
    assert np.linalg.norm(a - b) / np.linalg.norm(b) < 1e-4


def test_layouts_are_what_the_cpu_kernels_run():
    """oneDNN in use (TF_ENABLE_ONEDNN_OPTS, or TensorFlow's default for this CPU) is what
    decides whether NCHW runs on the CPU; the GPU runs both; the CPU's cells run NHWC."""
    from xfbench.adapters.tensorflow.workload import layout_reason, onednn_in_use

    assert (layout_reason("channels_first", "cpu") is None) == onednn_in_use()
    assert layout_reason("channels_last", "cpu") is None
    assert layout_reason("channels_first", "cuda:0") is None


def test_onednn_runs_unless_the_user_turned_it_off():
    """xfbench starts TensorFlow with oneDNN on every CPU (TensorFlow itself only does on
    some Intel ones); TF_ENABLE_ONEDNN_OPTS=0 measures Eigen. The record says which ran,
    as TensorFlow reports it."""
    import os

    work = build(get_spec("fcn5", "smoke"))
    asked_off = os.environ.get("TF_ENABLE_ONEDNN_OPTS") == "0"
    assert work.info["onednn"] is (not asked_off)
    assert work.info["backend"].startswith("Eigen" if asked_off else "oneDNN")


# -- devices, layout, threads -----------------------------------------------------


@pytest.mark.slow  # among command 2's slowest on a 2-core Zen 3 (CI runs it)
def test_cpu_cells_are_channels_last_and_record_how_they_ran():
    work = build(get_spec("resnet56", "smoke"), "function")
    assert work.layout == "channels_last" and work.x.shape[-1] == 3  # NHWC, once at build
    assert work.info["onednn"] in (True, False)  # what TensorFlow runs, not what was asked
    assert work.info["batchnorm_kernel"] == "FusedBatchNormV3"
    assert all("CPU" in v.device for v in work.trainable)
    lstm = build(get_spec("lstm32", "smoke"))
    assert lstm.info["lstm_kernel"].startswith("keras.layers.LSTM")
    assert (
        lstm.info["tensorflow_param_count"]
        == sum(p.size for p in get_spec("lstm32", "smoke").params) - 2 * 4 * 32
    )


def test_layout_choice_per_device():
    spec = get_spec("resnet50", "smoke")
    assert preferred_layout(spec, "cpu", "fp32") == "channels_last"
    assert preferred_layout(spec, "cuda:0", "fp32") == "channels_first"
    assert preferred_layout(spec, "cuda:0", "bf16") == "channels_last"
    assert preferred_layout(get_spec("lstm32", "smoke"), "cuda:0", "fp32") == "n/a"


def test_no_silent_fallback_to_another_device():
    assert not _same_device("/job:localhost/replica:0/task:0/device:CPU:0", "/GPU:0")
    assert _same_device("/job:localhost/replica:0/task:0/device:GPU:1", "/GPU:1")
    if not tf.config.list_physical_devices("GPU"):
        assert "not present" in TF.check(replace(cell("fcn_r"), device="cuda:0"))


def test_threads_cannot_change_after_tensorflow_started():
    tf.constant(1.0) + 1.0  # the runtime is up
    now = tf.config.threading.get_intra_op_parallelism_threads()
    with pytest.raises(RuntimeError, match="before its first operation"):
        TF.configure_threads(now + 3)


@pytest.mark.parametrize(
    "network, mode, precision, want",
    [
        ("resnet56", "function", "bf16", "bfloat16"),
        ("lstm32", "eager", "fp16", "float16"),
        ("fcn_r", "xla", "fp32", "float32"),
    ],
)
def test_the_record_says_which_dtype_the_products_and_convolutions_took(
    network, mode, precision, want
):
    work = build(get_spec(network, "smoke"), mode=mode, precision=precision)
    work.prepare()
    ran = work.info["layer_dtypes"]
    assert set(ran.values()) == {want}, ran
    assert "MatMul" in ran
    assert ("Conv2D" in ran) == (network == "resnet56")
    assert work.info["loss_scale"].startswith("dynamic" if precision == "fp16" else "none")


def test_a_product_in_another_dtype_fails_the_cell(monkeypatch):
    """A loss computed from float32 products under a bf16 label."""
    from xfbench.adapters.tensorflow import workload

    monkeypatch.setattr(
        workload.TensorFlowWorkload,
        "_loss_of",
        lambda self, logits, labels: tf.reduce_mean(
            tf.matmul(tf.cast(logits, tf.float32), tf.ones((10, 1)))
        ),
    )
    with pytest.raises(
        RuntimeError, match="bf16 cell must compute in bfloat16, but MatMul ran bfloat16,float32"
    ):
        build(get_spec("fcn_r", "smoke"), mode="eager", precision="bf16")
