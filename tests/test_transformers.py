"""BERT-base and GPT-2 small: the spec's counts, the objectives, AdamW and what each
framework records running them (the equivalence suite proves they compute the same function)."""

import numpy as np
import pytest

from xfbench.adapters import Cell, get_adapter
from xfbench.harness import selection
from xfbench.models import TRANSFORMERS, get_spec, initial_weights, synthetic_batch
from xfbench.models import layers as L

# Hugging Face's BertForMaskedLM (no pooler) and GPT2LMHeadModel, heads tied.
HUGGING_FACE_PARAMETERS = {"bert_base": 109_514_298, "gpt2": 124_439_808}


def _cell(network, framework, mode, *, precision="fp32", task="train"):
    return Cell(
        network=network,
        framework=framework,
        mode=mode,
        precision=precision,
        device="cpu",
        threads=1,
        batch_size=4,
        task=task,
        scale="smoke",
    )


def _build(network, framework, mode, precision="fp32", task="train"):
    adapter = get_adapter(framework)
    if adapter.import_error():
        pytest.skip(adapter.import_error())
    spec = get_spec(network, "smoke")
    cell = _cell(network, framework, mode, precision=precision, task=task)
    return spec, adapter.build(spec, cell, initial_weights(spec, 0))


@pytest.mark.parametrize("network", TRANSFORMERS)
def test_parameter_counts_are_hugging_faces(network):
    spec = get_spec(network)
    assert spec.param_count == HUGGING_FACE_PARAMETERS[network]
    torch_networks = pytest.importorskip("xfbench.adapters.torch.networks")
    assert torch_networks.count_parameters(spec) == spec.param_count


@pytest.mark.parametrize("network", TRANSFORMERS)
def test_flops_equal_a_count_of_the_products_that_ran(network):
    """The spec's analytic FLOPs (attention's two products included) against PyTorch's own
    FLOP counter over a forward pass, attention run on its math backend (whose products the
    counter sees; the fused CPU kernel it does not count)."""
    torch = pytest.importorskip("torch")
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    from xfbench.adapters.torch.networks import build_network

    spec = get_spec(network, "smoke")
    x = torch.from_numpy(synthetic_batch(spec, 3)[0])
    with torch.no_grad(), sdpa_kernel([SDPBackend.MATH]), FlopCounterMode(display=False) as fc:
        build_network(spec)(x)
    assert fc.get_total_flops() == spec.forward_flops(3)


def test_full_size_flops_include_attention():
    spec = get_spec("gpt2")  # 128 tokens on CPUs
    t, d, layers, vocab = 128, 768, 12, 50257
    per_token = layers * (4 * d * d + 2 * d * 3072 + 2 * t * d) + d * vocab
    assert spec.forward_macs == t * per_token
    assert get_spec("gpt2", tokens=1024).forward_macs > 8 * spec.forward_macs  # attention grows


def test_masked_lm_hides_a_fixed_15_percent_of_positions():
    spec = get_spec("bert_base")
    at = spec.loss_positions
    assert len(at) == round(0.15 * 128) and list(at) == sorted(set(at))
    assert get_spec("bert_base").loss_positions == at  # drawn from its own seed, every time
    x, y = synthetic_batch(spec, 3, seed=5)
    assert (x[:, list(at)] == spec.mask_token).all()
    others = [i for i in range(128) if i not in at]
    assert np.array_equal(x[:, others], y[:, others])


def test_next_token_labels_are_the_following_tokens():
    spec = get_spec("gpt2", "smoke")
    x, y = synthetic_batch(spec, 2)
    assert x.shape == y.shape == (2, 16) and spec.loss_positions is None
    assert np.array_equal(x[:, 1:], y[:, :-1])


def test_adamw_decays_matrices_and_embeddings_only():
    spec = get_spec("bert_base", "smoke")
    decayed = {p.name for p in spec.params if spec.decays(p.name)}
    assert "embed.word" in decayed and "layer0.attn.qkv.weight" in decayed
    assert "layer0.attn.qkv.bias" not in decayed and "layer0.ln1.weight" not in decayed
    assert all(len(p.shape) >= 2 for p in spec.params if p.name in decayed)
    assert (spec.optimizer, spec.lr, spec.betas, spec.eps, spec.weight_decay) == (
        "adamw",
        1e-4,
        (0.9, 0.999),
        1e-8,
        0.01,
    )


def test_cells_carry_their_geometry_and_table7_keeps_the_nine():
    cpu = selection.parse(framework="torch", model="gpt2", preset="quick", device="cpu")
    [cell] = [c for c in selection.cells(cpu, "train") if c.mode == "eager"]
    assert (cell.tokens, cell.batch_size) == (128, 4) and cell.id.endswith("-b4-s128")
    assert selection.parse(preset="quick").networks[-2:] == ("bert_base", "gpt2")
    for preset in ("table7", "procurement"):
        assert not set(TRANSFORMERS) & set(selection.parse(preset=preset).networks)
    assert get_spec("gpt2").accelerator_geometry == (1024, 64)
    assert get_spec("bert_base").accelerator_geometry == (128, 64)


@pytest.mark.parametrize("network", TRANSFORMERS)
def test_torch_records_attention_kernel_and_checks_the_half_type(network):
    _, work = _build(network, "torch", "eager", "bf16")
    kinds = work.info["layer_dtypes"]
    head = "MaskedLMHead" if network == "bert_base" else "TiedLMHead"
    assert kinds["ScaledDotProduct"] == kinds[head] == kinds["Linear"] == "bfloat16"
    assert work.info["attention_kernel"] != "n/a"
    assert "AdamW" in work.info["optimizer"] and "fused" in work.info["optimizer"]


@pytest.mark.slow  # among command 2's slowest on a 2-core Zen 3 (CI runs it)
def test_jax_records_attention_implementation():
    _, work = _build("gpt2", "jax", "jit", "bf16")
    work.prepare()
    assert work.info["attention_kernel"].endswith("implementation=xla")
    assert work.info["layer_dtypes"] == {"dot_general": "bfloat16"}  # attention's backward too


def test_tensorflow_adamw_is_pytorchs_rule_over_several_steps():
    """ResourceApplyAdam with the epsilon the workload passes it must be PyTorch's AdamW at
    every step (its own epsilon sits elsewhere, which differs more as 1 - b2^t grows)."""
    _, tf_work = _build("bert_base", "tensorflow", "function", "fp64")
    _, torch_work = _build("bert_base", "torch", "eager", "fp64")
    before = {k: v.copy() for k, v in torch_work.weights().items()}  # not views
    for _ in range(3):
        tf_work.step()
        torch_work.step()
    a, b = tf_work.weights(), torch_work.weights()
    worst = max(
        np.abs((a[k] - before[k]) - (b[k] - before[k])).max() / np.abs(b[k] - before[k]).max()
        for k in b
    )
    assert worst < 1e-6


def test_onnxruntime_fused_mode_records_what_the_optimizer_fused():
    pytest.importorskip("onnx")
    spec, work = _build("bert_base", "onnxruntime", "fused", task="infer")
    work.step()
    fused = work.info["fused_operators"]
    assert fused.get("SkipLayerNormalization", 0) > 0  # the residual LayerNorms
    from xfbench.exchange.reference import reference_logits

    ref = reference_logits(spec, initial_weights(spec, 0), 4)
    assert np.abs(work.output() - ref).max() <= 1e-4 * np.abs(ref).max()


@pytest.mark.parametrize("network, gelu", [("gpt2", "tanh"), ("bert_base", "erf")])
def test_the_fused_graph_computes_the_networks_own_gelu(network, gelu, monkeypatch):
    """ONNX Runtime's optimizer fuses any Gelu into BiasGelu, the erf form: GPT-2's (the
    tanh form) must come out as FastGelu. With weights that put GELU's inputs near 1, as
    trained ones do, the fused GPT-2 cell agrees with the graph as written as closely as
    round-off allows (the erf form is 1e-4 off there). Without the approximation option
    the fused graph holds an erf GELU, and the cell refuses to run it."""
    pytest.importorskip("onnx")
    import onnx
    import onnxruntime.transformers.fusion_options as fusion_options

    from xfbench.adapters.onnxruntime import workload as ort_workload
    from xfbench.exchange.graph import build_graph
    from xfbench.exchange.reference import reference_logits

    spec = get_spec(network, "smoke")
    weights = initial_weights(spec, 0)
    for name in weights:
        if ".mlp.fc.weight" in name:
            weights[name] = weights[name] * 30
    model, _ = build_graph(spec, weights, "infer")
    fused, _ = ort_workload.transformer_fusions(spec, model.SerializeToString())
    assert set(ort_workload.gelus(onnx.load_from_string(fused))) == {gelu}
    cell = _cell(network, "onnxruntime", "fused", task="infer")
    work = get_adapter("onnxruntime").build(spec, cell, weights)
    work.step()
    ref = reference_logits(spec, weights, 4)
    assert np.abs(work.output() - ref).max() <= 2e-6 * np.abs(ref).max()

    if gelu == "tanh":  # the optimizer's default: the option stays off whatever is set
        stays_off = property(lambda self: False, lambda self, value: None)
        monkeypatch.setattr(
            fusion_options.FusionOptions, "enable_gelu_approximation", stays_off, raising=False
        )
        with pytest.raises(RuntimeError, match="computes a erf GELU where gpt2's is the tanh"):
            ort_workload.transformer_fusions(spec, model.SerializeToString())


def test_the_fused_mode_is_only_swept_for_the_transformers():
    sel = selection.parse(
        framework="onnxruntime", model="resnet56,gpt2", preset="smoke", device="cpu"
    )
    modes = {(c.network, c.mode) for c in selection.cells(sel, "infer")}
    assert ("gpt2", "fused") in modes and ("resnet56", "fused") not in modes
    named = selection.parse(framework="onnxruntime", model="resnet56", mode="fused", device="cpu")
    [cell] = selection.cells(named, "infer")
    assert "transformers only" in get_adapter("onnxruntime").check(cell)


def test_compiled_adamw_counts_float64_steps_in_float64():
    """Compiled AdamW computes its bias corrections in the step count's type: a float32
    count put a float64 update 6.7e-6 off (training.start_adamw)."""
    torch = pytest.importorskip("torch")
    from xfbench.adapters.torch import training
    from xfbench.adapters.torch.networks import build_network

    spec = get_spec("gpt2", "smoke")
    for dtype in (torch.float64, torch.float32):
        net = build_network(spec).to(dtype)
        opt = training.optimizer(spec, net, "foreach")
        training.start_adamw(opt)
        steps = {s["step"].dtype for s in opt.state.values()}
        assert steps == {dtype} and len(opt.state) == len(list(net.parameters()))


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_written_out_attention_keeps_its_scores_in_float32(precision):
    """One rule for the scores in the half precisions (docs/frameworks.md): the half-type
    values' products, summed in float32 and kept so, as PyTorch's and JAX's kernels keep
    them. TensorFlow's attention and JAX's written-out one (float64, fp16 on the CPU) form
    the scores that way: within float32's round-off of the exact products, where scores
    rounded to the half type are 1e-4 to 1e-3 off."""
    jnp = pytest.importorskip("jax.numpy")
    tf = pytest.importorskip("tensorflow")
    from xfbench.adapters.jax.transformer import written_scores
    from xfbench.adapters.tensorflow.transformer import scores

    dtype = {"bf16": "bfloat16", "fp16": "float16"}[precision]
    rng = np.random.default_rng(0)
    q, k = (rng.standard_normal((2, 8, 2, 16)).astype(np.float32) for _ in range(2))
    qh, kh = jnp.asarray(q, dtype), jnp.asarray(k, dtype)
    wide = [np.asarray(a, np.float64) for a in (qh, kh)]
    exact = np.einsum("btnh,bsnh->bnts", *wide)

    def off(a):
        return np.abs(np.asarray(a, np.float64) - exact).max() / np.abs(exact).max()

    assert written_scores(qh, kh).dtype == jnp.float32 and off(written_scores(qh, kh)) < 1e-6
    qt, kt = (tf.cast(tf.transpose(tf.constant(a), [0, 2, 1, 3]), dtype) for a in (q, k))
    assert off(scores(qt, kt, tf.float32).numpy()) < 1e-6
    assert off(jnp.einsum("btnh,bsnh->bnts", qh, kh)) > 1e-4  # what rounding would do


def test_gpt2_trains_with_its_published_recipe():
    """GPT-2 small as llm.c and nanoGPT train it: AdamW at 6e-4 with betas (0.9, 0.95),
    weight decay 0.1 on the matrices and embeddings, a global-norm clip at 1.0, and the
    residual projections initialised at 0.02 / sqrt(2 x 12 layers)."""
    import math

    spec = get_spec("gpt2", "full")
    assert (spec.optimizer, spec.lr, spec.betas, spec.eps, spec.weight_decay) == (
        "adamw",
        6e-4,
        (0.9, 0.95),
        1e-8,
        0.1,
    )
    assert spec.clip_norm == 1.0
    blocks = spec.layer(L.TransformerBlock)
    assert len(blocks) == 12
    assert all(b.residual_std == pytest.approx(0.02 / math.sqrt(24)) for b in blocks)
    assert spec.decays("embed.word") and not spec.decays("layer0.ln1.weight")


def test_the_fused_gpt2_graph_stays_fused():
    """ONNX Runtime's fused mode: GPT-2's graph after the transformer optimizer holds its
    tanh GELU as FastGelu and the residual LayerNorms as SkipLayerNormalization, and no
    plain Gelu or Tanh is left unfused."""
    pytest.importorskip("onnx")
    spec, work = _build("gpt2", "onnxruntime", "fused", task="infer")
    work.step()
    fused = work.info["fused_operators"]
    assert fused.get("FastGelu", 0) == len(spec.layer(L.TransformerBlock))
    assert fused.get("SkipLayerNormalization", 0) > 0
    assert not fused.get("BiasGelu") and not fused.get("Gelu")
