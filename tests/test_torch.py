"""The PyTorch adapter at smoke size: geometry, the training step, precisions, modes."""

import numpy as np
import pytest
import torch

from xfbench.adapters import Cell, get_adapter
from xfbench.adapters.torch import weights as W
from xfbench.adapters.torch.networks import build_network, count_parameters
from xfbench.models import NETWORKS, get_spec, initial_weights, synthetic_batch

ADAPTER = get_adapter("torch")


def build(network, task="train", mode="eager", precision="fp32", batch=8, seed=0, data="resident"):
    spec = get_spec(network, "smoke")
    cell = Cell(
        network=network,
        framework="torch",
        mode=mode,
        precision=precision,
        device="cpu",
        threads=torch.get_num_threads(),
        batch_size=batch,
        task=task,
        data=data,
        scale="smoke",
    )
    return spec, ADAPTER.build(spec, cell, initial_weights(spec, seed))


@pytest.mark.parametrize("network", NETWORKS)
def test_full_size_parameter_count_on_the_meta_device(network):
    spec = get_spec(network)
    assert count_parameters(spec) == spec.param_count


@pytest.mark.parametrize("network", NETWORKS)
def test_training_lowers_the_loss(network):
    _, work = build(network)
    losses = []
    for _ in range(4):
        work.step()
        losses.append(work.loss())
    assert all(np.isfinite(losses)) and losses[-1] < losses[0]


@pytest.mark.parametrize("network", NETWORKS)
def test_inference_is_deterministic(network):
    spec, work = build(network, task="infer")
    work.step()
    first = work.output()
    work.step()
    assert first.shape == (8,) + spec.output_shape
    assert np.array_equal(first, work.output())


def test_one_step_is_sgd_with_momentum_exactly():
    """w1 = w0 - lr * g on the first step (v = g), computed independently here."""
    spec, work = build("fcn_r")
    w0 = initial_weights(spec)
    net = build_network(spec)
    W.load(spec, net, w0)
    x, y = synthetic_batch(spec, 8)
    loss = torch.nn.functional.cross_entropy(net(torch.from_numpy(x)), torch.from_numpy(y))
    loss.backward()
    grads = {name: p.grad.numpy() for name, p in net.named_parameters()}
    work.step()
    assert work.loss() == pytest.approx(loss.item(), rel=1e-6)
    w1 = work.weights()
    keys = dict(zip(w0, grads))  # canonical order = module order for feed-forward nets
    for name, key in keys.items():
        np.testing.assert_allclose(w1[name], w0[name] - 0.01 * grads[key], rtol=1e-5, atol=1e-7)


def test_lstm_clips_the_global_gradient_norm(monkeypatch):
    calls = []
    original = torch.nn.utils.clip_grad_norm_
    monkeypatch.setattr(
        torch.nn.utils,
        "clip_grad_norm_",
        lambda params, max_norm, **kw: calls.append(max_norm) or original(params, max_norm, **kw),
    )
    _, work = build("lstm32")
    work.step()
    assert calls == [5.0]
    _, work = build("fcn_r")
    work.step()
    assert calls == [5.0]  # no clipping outside the LSTM


def test_lstm_gate_order_conversion():
    """ONNX gates (i, o, f, c) land in PyTorch's (i, f, g, o) rows, and back."""
    spec = get_spec("lstm32", "smoke")
    h = 32
    w = initial_weights(spec)
    marked = {k: v.copy() for k, v in w.items()}
    marked["lstm.l0.W"][h] = 7.0  # first row of ONNX gate o
    marked["lstm.l0.B"][2 * h] = 3.0  # first input-bias entry of ONNX gate f
    marked["lstm.l0.B"][4 * h + 3 * h] = 5.0  # first recurrent-bias entry of ONNX gate c
    state = W.to_state_dict(spec, build_network(spec), marked)
    assert (state["lstm.weight_ih_l0"][3 * h] == 7.0).all()  # torch gate o is the fourth block
    assert state["lstm.bias_ih_l0"][h] == 3.0  # torch gate f is the second
    assert state["lstm.bias_hh_l0"][2 * h] == 5.0  # torch gate g (cell) is the third
    net = build_network(spec)
    W.load(spec, net, marked)
    back = W.from_module(spec, net)
    for k in marked:
        np.testing.assert_array_equal(back[k], marked[k])


def test_fp32_turns_tf32_off():
    build("resnet56", precision="fp32")
    assert torch.backends.cudnn.conv.fp32_precision == "ieee"
    assert torch.backends.cudnn.rnn.fp32_precision == "ieee"
    assert torch.backends.cuda.matmul.fp32_precision == "ieee"


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_mixed_precision_trains_with_fp32_master_weights(precision):
    _, work = build("resnet56", precision=precision)
    losses = []
    for _ in range(4):
        work.step()
        losses.append(work.loss())
    assert losses[-1] < losses[0]
    assert all(p.dtype == torch.float32 for p in work.net.parameters())
    assert (work.scaler is not None) == (precision == "fp16")


def test_unavailable_cells_give_reasons():
    cell = Cell(
        network="fcn_r",
        framework="torch",
        mode="eager",
        precision="tf32",
        device="cpu",
        threads=1,
        batch_size=8,
    )
    assert "tf32" in ADAPTER.check(cell)
    cell = Cell(
        network="fcn_r",
        framework="torch",
        mode="cudagraph",
        precision="fp32",
        device="cpu",
        threads=1,
        batch_size=8,
    )
    assert "CUDA" in ADAPTER.check(cell)
    if not torch.cuda.is_available():
        cell = Cell(
            network="fcn_r",
            framework="torch",
            mode="eager",
            precision="fp32",
            device="cuda:0",
            threads=1,
            batch_size=8,
        )
        assert "not present" in ADAPTER.check(cell)


@pytest.mark.parametrize("network", ["fcn_r", "lstm32"])
@pytest.mark.slow
def test_compile_mode_matches_eager_and_compiles_once(network):
    from torch._dynamo.utils import counters

    _, eager = build(network)
    _, compiled = build(network, mode="compile")
    counters.clear()
    eager.step()
    compiled.step()
    graphs_after_first = counters["stats"]["unique_graphs"]
    for _ in range(3):
        eager.step()
        compiled.step()
    assert counters["stats"]["unique_graphs"] == graphs_after_first  # no recompilation while timed
    assert compiled.loss() == pytest.approx(eager.loss(), rel=1e-4)


def test_copied_data_gives_the_same_step():
    _, resident = build("alexnet_r")
    _, copied = build("alexnet_r", data="copied")
    resident.step()
    copied.step()
    assert copied.loss() == resident.loss()
    assert copied.x_host.data_ptr() != copied._batch()[0].data_ptr()  # a new copy each step


@pytest.mark.slow
def test_compiled_cells_stay_compiled_past_dynamos_recompile_limit():
    """Every workload's _forward_loss is one code object: without a reset, Dynamo stops
    compiling it after 8 workloads and the cell runs eagerly while labelled compile."""
    for i in range(10):
        _, work = build("fcn_r", mode="compile", precision="fp32" if i % 2 else "bf16")
        work.prepare()
        work.step()
        facts = work.compile_facts()
        assert facts["compiled_graphs"] >= 2, (i, facts)
        work.close()


@pytest.mark.slow  # among command 2's slowest on a 2-core Zen 3 (CI runs it)
def test_a_compiled_mode_that_fell_back_fails_the_cell():
    _, work = build("fcn_r", mode="compile")
    work.prepare()
    work.step()
    work.compiled_functions = 99  # as if Dynamo had given up on most of them
    with pytest.raises(RuntimeError, match="torch.compile fell back to eager"):
        work.compile_facts()


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_the_lstm_runs_in_half_precision_on_any_cpu_and_says_which_kernel(precision):
    """oneDNN's bf16/fp16 LSTM needs avx512_bf16 or AMX and raises without them: there the
    LSTM runs ATen's kernels instead, and the record says so."""
    from xfbench.adapters.torch.lstm import onednn_runs_lstm

    _, work = build("lstm32", precision=precision)
    work.prepare()
    work.step()
    assert np.isfinite(work.loss())
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    expected = "onednn" if onednn_runs_lstm(dtype) else "aten (oneDNN has no"
    assert work.info["lstm_kernel"].startswith(expected)


def test_inductor_prepacking_is_off_while_atens_isa_is_lowered(monkeypatch):
    """With ATEN_CPU_CAPABILITY set, Inductor's prepacked linear layers gave wrong training
    losses (torch 2.13.0 on an AVX-512 CPU limited to avx2), so compiled CPU cells turn
    prepacking off then, and every compiled CPU cell records which it ran with."""
    import torch._inductor.config as inductor

    saved = inductor.cpp.weight_prepack
    try:
        monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx2")
        _, limited = build("fcn_r", mode="compile")
        assert limited.info["inductor_weight_prepack"] is False
        monkeypatch.delenv("ATEN_CPU_CAPABILITY")
        _, plain = build("fcn_r", mode="compile")
        assert plain.info["inductor_weight_prepack"] is True
        _, eager = build("fcn_r")
        assert "inductor_weight_prepack" not in eager.info
    finally:
        inductor.cpp.weight_prepack = saved


@pytest.mark.parametrize(
    "network, precision",
    [("resnet56", "fp32"), ("resnet56", "bf16"), ("lstm32", "bf16"), ("lstm32", "fp16")],
)
def test_the_record_says_which_dtype_each_layer_ran(network, precision):
    _, work = build(network, precision=precision)
    want = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}[precision]
    ran = work.info["layer_dtypes"]
    kinds = ("Conv2d", "Linear") if network == "resnet56" else ("LSTM", "Linear")
    assert {ran[k] for k in kinds} == {want}, ran
    assert work.info["loss_scale"].startswith("dynamic" if precision == "fp16" else "none")


def test_a_layer_computing_in_another_dtype_fails_the_cell(monkeypatch):
    """As autocast's cuDNN wrapper does on CUDA: the bf16 LSTM computed in fp16."""
    forward = torch.nn.LSTM.forward

    def fp16_lstm(self, *args, **kwargs):
        out, state = forward(self, *args, **kwargs)
        return out.half(), state

    monkeypatch.setattr(torch.nn.LSTM, "forward", fp16_lstm)
    with pytest.raises(RuntimeError, match="bf16 cell must compute in bfloat16, but LSTM ran"):
        build("lstm32", precision="bf16")


def test_the_explicitly_cast_bf16_lstm_trains_the_float32_master_weights():
    """The CUDA bf16 LSTM's path (autocast off, casts explicit), run on the CPU: it computes
    in bf16, its gradients reach float32 weights, and its loss is autocast's to bf16's
    precision."""
    _, auto = build("lstm32", precision="bf16")
    _, explicit = build("lstm32", precision="bf16")
    explicit.net.explicit_dtype = torch.bfloat16
    explicit.net.onednn = auto.net.onednn
    auto.step()
    explicit.step()
    assert explicit.loss() == pytest.approx(auto.loss(), rel=1e-2)
    assert all(p.dtype == torch.float32 and p.grad is not None for p in explicit.params)
    from xfbench.adapters.torch.precision import probe

    dtypes, _ = probe(explicit.net, explicit.x, explicit.autocast, time_major=True)
    assert dtypes["LSTM"] == "bfloat16"


def test_a_cudagraph_cell_proves_its_graphs_replayed_or_fails(monkeypatch):
    """On an H100 a 'cudagraph' decode step took what its kernels take launched one by one.
    The proof reads Inductor's skip counter and counts the graphs one more untimed run
    replays: a skip, or no replay, fails the cell in one line."""
    from xfbench.adapters.torch import cudagraphs

    monkeypatch.setattr(torch.cuda.CUDAGraph, "replay", lambda graph: None)
    counters = torch._dynamo.utils.counters
    counters.clear()

    def replaying(n):
        return lambda: [torch.cuda.CUDAGraph.replay(object()) for _ in range(n)]

    assert cudagraphs.replay_facts(replaying(127), least=127) == {
        "cudagraph_skips": 0,
        "cudagraph_replays": 127,
    }
    with pytest.raises(RuntimeError, match="0 CUDA graph replay"):
        cudagraphs.replay_facts(replaying(0), least=1)
    counters["inductor"]["cudagraph_skips"] += 1
    with pytest.raises(RuntimeError, match="skipped CUDA graphs 1 time"):
        cudagraphs.replay_facts(replaying(127), least=127)
    counters.clear()
    # and compilation is told to raise Inductor's own reason where it would skip graphs
    import torch._inductor.config as inductor

    monkeypatch.setattr(inductor.triton, "cudagraph_or_error", False)
    from xfbench.adapters.torch.generation import _compiler

    assert _compiler("cudagraph", "cuda") == "reduce-overhead"
    assert inductor.triton.cudagraph_or_error is True


@pytest.mark.parametrize("proven", [True, False])
def test_a_cells_unproven_claim_after_its_rounds_fails_it(monkeypatch, benchmark, proven):
    """measure() asks the workload, after the timed rounds, to prove what only a run shows
    (replay_facts: a cudagraph cell's replays); its RuntimeError is the cell's failure, and
    its facts go into the record."""
    from xfbench.adapters import Cell
    from xfbench.adapters.null import NullWorkload
    from xfbench.harness.measure import measure
    from xfbench.harness.presets import PRESETS

    cell = Cell(
        network="fcn5", framework="null", mode="none", precision="fp32", device="cpu",
        threads=1, batch_size=8, task="train", scale="smoke",
    )  # fmt: skip

    def facts(self):
        if proven:
            return {"cudagraph_replays": 3}
        raise RuntimeError("0 CUDA graph replay(s) in a step that should replay at least 1")

    monkeypatch.setattr(NullWorkload, "replay_facts", facts)
    if proven:
        record = measure(benchmark, cell, preset=PRESETS["smoke"], threads_config={})
        assert record["cudagraph_replays"] == 3
    else:
        with pytest.raises(RuntimeError, match="0 CUDA graph replay"):
            measure(benchmark, cell, preset=PRESETS["smoke"], threads_config={})


@pytest.mark.parametrize(("task", "frozen"), [("infer", True), ("train", False)])
def test_compiled_inference_on_the_cpu_freezes_and_uses_the_cpp_wrapper(task, frozen):
    """PyTorch's own CPU inference path: a compiled inference cell freezes its weights
    (BatchNorm folded, oneDNN's weights prepacked) and runs Inductor's C++ wrapper; a
    training cell cannot freeze. The record says which."""
    import torch._inductor.config as inductor

    _, work = build("resnet56", task=task, mode="compile")
    assert inductor.freezing is frozen and inductor.cpp_wrapper is frozen
    assert work.info["inductor_freezing"] is frozen
    assert work.info["inductor_cpp_wrapper"] is frozen


def test_compiled_decoding_on_the_cpu_autotunes_fp32_only():
    """Inductor's max-autotune times each product alone with its weights in cache; a
    decode step streams them, where the bf16 templates it chose ran at about 60 % of
    oneDNN's prepacked products (docs/generation.md): bf16 compiles without it, and both
    freeze and prepack their weights."""
    from xfbench.adapters.torch.generation import _compiler, _inductor_settings

    assert _compiler("compile", "cpu", "fp32") == "max-autotune"
    assert _compiler("compile", "cpu", "bf16") == "default"
    settings = _inductor_settings("cpu")  # at any precision
    assert settings["freezing"] and settings["cpp_wrapper"]
    assert _compiler("eager", "cpu", "bf16") is None
