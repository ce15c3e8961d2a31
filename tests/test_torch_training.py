"""GPT-2's training step as llm.c runs it on a GPU (adapters/torch/training.py): the
vocabulary padded with its padded logits masked, and a loss that never holds the whole
batch's logits in float32. Both must leave the function unchanged; checked on the CPU."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from xfbench.adapters import Cell, get_adapter
from xfbench.adapters.torch import training
from xfbench.adapters.torch import weights as W
from xfbench.adapters.torch import workload as torch_workload
from xfbench.adapters.torch.networks import build_network
from xfbench.exchange.reference import TOL, rel_err
from xfbench.harness.equivalence import FP64_TOL
from xfbench.models import get_spec, initial_weights, synthetic_batch

SPEC = get_spec("gpt2", "smoke")


def _net(dtype=torch.float64):
    net = build_network(SPEC)
    W.load(SPEC, net, initial_weights(SPEC))
    return net.to(dtype)


def _batch(n=4):
    x, y = synthetic_batch(SPEC, n, 0)
    return torch.from_numpy(x), torch.from_numpy(y)


def _loss_and_grads(net, x, y, chunked=False, rows=training.LOSS_CHUNK_ROWS):
    net.zero_grad(set_to_none=True)
    if chunked:
        head = getattr(net, net.order[-1])
        loss = training.chunked_cross_entropy(net.hidden(x), head, y, rows)
    else:
        loss = training.cross_entropy(net(x), y, None)
    loss.backward()
    return loss.item(), {k: p.grad.clone() for k, p in net.named_parameters()}


def test_a_padded_vocabulary_leaves_the_loss_and_gradients_as_they_were():
    x, y = _batch()
    plain = _net()
    loss, grads = _loss_and_grads(plain, x, y)
    padded = _net()
    assert training.pad_vocab(padded) == 4224  # 4,188 words: 66 tiles of 64
    assert padded.embed.word.shape[0] == 4224 and padded(x).shape[-1] == 4224
    padded_loss, padded_grads = _loss_and_grads(padded, x, y)
    assert padded_loss == pytest.approx(loss, rel=1e-12)
    for name, g in grads.items():
        got = padded_grads[name]
        if name == "embed.word":
            assert torch.count_nonzero(got[SPEC.vocab :]) == 0  # no gradient reaches a pad
            got = got[: SPEC.vocab]
        assert torch.allclose(got, g, rtol=1e-10, atol=1e-13), name


def test_adamw_keeps_the_padded_rows_zero_and_the_weights_those_of_the_unpadded_step():
    x, y = _batch()
    nets = [_net(torch.float32), _net(torch.float32)]
    training.pad_vocab(nets[1])
    for net in nets:
        opt = training.optimizer(SPEC, net, "fused")
        for _ in range(2):
            _loss_and_grads(net, x, y)
            opt.step()
    assert torch.count_nonzero(nets[1].embed.word[SPEC.vocab :]) == 0
    plain = W.from_module(SPEC, nets[0])
    padded = training.unpadded(W.from_module(SPEC, nets[1]), SPEC.vocab)
    for name, w in plain.items():
        assert rel_err(padded[name], w) <= TOL, name


@pytest.mark.parametrize("rows", [7, 64, training.LOSS_CHUNK_ROWS])
def test_the_chunked_loss_is_the_cross_entropy_and_its_gradients(rows):
    """In float64, chunks that divide the rows or not, padded or not: the same loss and
    gradients as F.cross_entropy over the whole batch's logits."""
    x, y = _batch()
    loss, grads = _loss_and_grads(_net(), x, y)
    for pad in (False, True):
        net = _net()
        if pad:
            training.pad_vocab(net)
        got_loss, got = _loss_and_grads(net, x, y, chunked=True, rows=rows)
        assert got_loss == pytest.approx(loss, rel=1e-12)
        for name, g in grads.items():
            assert torch.allclose(got[name][: g.shape[0]], g, rtol=1e-9, atol=1e-12), name


def test_the_chunked_loss_in_bf16_holds_no_float32_logits_of_the_batch_and_agrees():
    """Under bf16 autocast, as a GPU's cell runs it: the loss within bf16's rounding of
    the whole-batch cross-entropy's, and no float32 tensor of the batch's logits made."""
    x, y = _batch(8)
    net = _net(torch.float32)
    training.pad_vocab(net)
    with torch.autocast("cpu", torch.bfloat16):
        expected = F.cross_entropy(net(x).float().reshape(-1, 4224), y.reshape(-1)).item()
    made = []
    real = torch.Tensor.to

    def watched(t, *a, **k):
        out = real(t, *a, **k)
        if out.dtype == torch.float32 and t.dtype != torch.float32:
            made.append(tuple(t.shape))
        return out

    torch.Tensor.to = watched
    try:
        with torch.autocast("cpu", torch.bfloat16):
            loss = training.chunked_cross_entropy(net.hidden(x), net.lm, y, rows=32)
    finally:
        torch.Tensor.to = real
    assert loss.item() == pytest.approx(expected, rel=2e-2)
    batch_rows = x.numel()
    assert made and all(s[0] <= 32 for s in made if len(s) == 2 and s[-1] == 4224), made
    assert batch_rows > 32


def test_a_gpus_gpt2_training_cell_pads_chunks_and_trains_as_the_plain_one(monkeypatch):
    """The workload's wiring, the GPU's choices played on the CPU: the padded, chunked
    step's loss and weights after two steps are the plain step's, in float64 (AdamW's
    update, about lr g / |g|, would magnify float32's rounding of gradients near 0), and
    the record says what ran."""

    def cell():
        return Cell(network="gpt2", framework="torch", mode="eager", precision="fp64",
                    device="cpu", threads=torch.get_num_threads(), batch_size=4,
                    task="train", data="resident", scale="smoke")  # fmt: skip

    adapter = get_adapter("torch")
    plain = adapter.build(SPEC, cell(), initial_weights(SPEC))
    monkeypatch.setattr(torch_workload, "PADDED_ON", {"cpu", "cuda"})
    padded = adapter.build(SPEC, cell(), initial_weights(SPEC))
    for _ in range(2):
        plain.step()
        padded.step()
    assert padded.info["vocab_padded_to"] == 4224 and "chunked" in padded.info["loss_kernel"]
    assert "vocab_padded_to" not in plain.info
    assert padded.loss() == pytest.approx(plain.loss(), rel=1e-12)
    mine, theirs = padded.weights(), plain.weights()
    assert mine.keys() == theirs.keys()
    for name in theirs:
        assert mine[name].shape == theirs[name].shape
        assert rel_err(mine[name], theirs[name]) <= FP64_TOL, name
    assert np.isfinite(padded.loss())


@pytest.mark.slow  # a compilation of GPT-2's training step: about a minute on 2 cores
def test_the_padded_chunked_step_compiles_whole_and_trains_as_eager(monkeypatch):
    """Compiled as a GPU's cell compiles it (the update AdamW's fused kernel beside the
    compiled forward and backward): no fallback, and the eager step's loss."""

    def cell(mode):
        return Cell(network="gpt2", framework="torch", mode=mode, precision="fp32",
                    device="cpu", threads=torch.get_num_threads(), batch_size=4,
                    task="train", data="resident", scale="smoke")  # fmt: skip

    monkeypatch.setattr(torch_workload, "PADDED_ON", {"cpu"})
    monkeypatch.setattr(torch_workload.TorchWorkload, "_fused_update", lambda self, mode: True)
    adapter = get_adapter("torch")
    eager = adapter.build(SPEC, cell("eager"), initial_weights(SPEC))
    compiled = adapter.build(SPEC, cell("compile"), initial_weights(SPEC))
    for _ in range(2):
        eager.step()
        compiled.step()
    assert compiled.compile_facts()["compiled_graphs"] >= 1
    assert "fused" in compiled.info["optimizer"] and compiled.info["vocab_padded_to"] == 4224
    assert compiled.loss() == pytest.approx(eager.loss(), rel=1e-4)
