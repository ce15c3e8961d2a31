"""The training step's loss and optimizer, as the spec names them, shared by the timed
workload and the plain reference step (reference.py).

SGD with momentum for Shi et al.'s networks; AdamW for the transformers, with weight
decay on the tensors spec.decays() names (matrices and embeddings) and none on biases and
LayerNorm, as pretraining does. impl picks PyTorch's implementation: "fused" (one kernel
for every tensor; CPU and CUDA), "foreach" (grouped ops; what torch.compile traces) or
"plain" (one tensor at a time: the reference).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from xfbench.models import Spec


def positions(spec: Spec, device) -> torch.Tensor | None:
    """The positions the loss is taken at, on device, or None for every position."""
    if spec.loss_positions is None:
        return None
    return torch.tensor(spec.loss_positions, dtype=torch.long, device=device)


def cross_entropy(logits, y, at: torch.Tensor | None, time_major: bool = False):
    """Mean cross-entropy over samples (and over tokens: every position, or those at)."""
    if at is not None:
        dim = 0 if time_major else 1
        logits, y = logits.index_select(dim, at), y.index_select(dim, at)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))


# llm.c's: GPT-2's 50,257 words padded to 50,304, so that the head's product has a
# dimension its tensor-core tiles divide
PAD_VOCAB_TO = 64


def pad_vocab(net: torch.nn.Module, multiple: int = PAD_VOCAB_TO) -> int | None:
    """A tied word matrix (GPT-2's) padded with zero rows to a multiple of `multiple`, its
    head's padded logits masked by a -inf bias: the same function (softmax gives them
    nothing, so their rows get no gradient, and AdamW's step of a zero row with a zero
    gradient is zero). -> the padded vocabulary, or None where there is nothing to pad."""
    from xfbench.adapters.torch.transformer import TiedLMHead

    heads = [m for m in net.modules() if isinstance(m, TiedLMHead)]
    if len(heads) != 1:
        return None
    head, word = heads[0], net.embed.word
    vocab = word.shape[0]
    padded = -(-vocab // multiple) * multiple
    if padded == vocab:
        return None
    with torch.no_grad():
        wider = word.new_zeros((padded, word.shape[1]))
        wider[:vocab] = word
    net.embed.word = torch.nn.Parameter(wider)
    head.word[0] = net.embed.word
    head.mask = torch.zeros(padded, dtype=word.dtype, device=word.device)
    head.mask[vocab:] = float("-inf")
    return padded


def unpadded(weights: dict, vocab: int) -> dict:
    """Canonical weights of a padded network: the word matrix's real rows."""
    return {k: (v[:vocab] if k == "embed.word" else v) for k, v in weights.items()}


# rows of logits the chunked loss holds at once: GPT-2's 50,304 words make 0.4 GB of them
# in bf16 and 0.8 GB of their softmax in float32, where the whole batch of 64 x 1,024
# tokens would hold 6.6 and 13.2 GB
LOSS_CHUNK_ROWS = 4096


class ChunkedLinearCrossEntropy(torch.autograd.Function):
    """Mean cross-entropy of the head's logits h word^T (+ mask) against y, computed a
    chunk of rows at a time with its gradients in the same pass: no more than one chunk's
    logits ever exist (in the product's type; the log-sum-exp and softmax in float32), as
    llm.c's fused classifier keeps none. The gradients, scaled by the loss's, come back in
    backward. h (N, d), word (V, d), mask (V,) or None, y (N,) int64."""

    @staticmethod
    def forward(ctx, h, word, mask, y, rows):
        n = h.shape[0]
        wide_type = torch.promote_types(word.dtype, torch.float32)  # float64 stays so
        dh = torch.empty_like(h)
        dword = torch.zeros_like(word, dtype=wide_type)
        loss = h.new_zeros((), dtype=wide_type)
        for start in range(0, n, rows):
            part, labels = h[start : start + rows], y[start : start + rows]
            logits = torch.nn.functional.linear(part, word, mask)
            wide = logits.to(wide_type)
            loss = loss + (torch.logsumexp(wide, -1) - wide.gather(1, labels[:, None])[:, 0]).sum()
            grad = torch.softmax(wide, -1)
            grad[torch.arange(len(labels), device=h.device), labels] -= 1
            grad = (grad / n).to(logits.dtype)
            dh[start : start + rows] = (grad @ word.to(grad.dtype)).to(h.dtype)
            dword += (grad.t() @ part.to(grad.dtype)).to(wide_type)
        ctx.save_for_backward(dh, dword.to(word.dtype))
        return loss / n

    @staticmethod
    def backward(ctx, grad_loss):
        dh, dword = ctx.saved_tensors
        return dh * grad_loss, dword * grad_loss, None, None, None


def chunked_cross_entropy(h, head, y, rows: int = LOSS_CHUNK_ROWS) -> torch.Tensor:
    """The tied head and its mean cross-entropy over every position, chunked (above):
    h (N, T, d) the states before the head, y (N, T)."""
    d = h.shape[-1]
    word = head.word[0]
    # Function.apply takes its arguments by position only (torch 2.11 refuses keywords)
    inputs = (h.reshape(-1, d), word, head.mask, y.reshape(-1), rows)
    return ChunkedLinearCrossEntropy.apply(*inputs)


def optimizer(spec: Spec, net: torch.nn.Module, impl: str) -> torch.optim.Optimizer:
    flags = {"fused": {"fused": True}, "foreach": {"foreach": True}, "plain": {"foreach": False}}
    kw = flags[impl]
    if spec.optimizer == "sgd":
        # As before AdamW came: PyTorch's default implementation for the device (foreach on
        # CUDA, one tensor at a time on the CPU), which the nine networks' numbers were taken with.
        return torch.optim.SGD(net.parameters(), lr=spec.lr, momentum=spec.momentum)
    if spec.optimizer != "adamw":
        raise ValueError(f"{spec.id}: unknown optimizer {spec.optimizer!r}")
    named = list(net.named_parameters())
    known = {p.name for p in spec.params}
    if any(k not in known for k, _ in named):
        raise ValueError(f"{spec.id}: AdamW needs canonical parameter names")
    groups = [
        {"params": [p for k, p in named if spec.decays(k)], "weight_decay": spec.weight_decay},
        {"params": [p for k, p in named if not spec.decays(k)], "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=spec.lr, betas=spec.betas, eps=spec.eps, **kw)


def start_adamw(opt: torch.optim.Optimizer) -> None:
    """AdamW's state, zero, before the first step, as PyTorch's own first step makes it for
    the foreach implementation, except that the step count of float64 parameters is float64.
    Compiled, the bias corrections 1 - b^t are tensor arithmetic in the step count's type:
    PyTorch's float32 count puts them 5e-5 off in a float64 step (its update 6.7e-6 off, seen
    by the float64 proof), where eager code computes them from a Python float. Made here, the
    state also has one structure from the first step, so the compiled update compiles once."""
    for group in opt.param_groups:
        for p in group["params"]:
            wide = p.dtype == torch.float64
            opt.state[p] = {
                "step": torch.tensor(0.0, dtype=torch.float64 if wide else torch.float32),
                "exp_avg": torch.zeros_like(p, memory_format=torch.preserve_format),
                "exp_avg_sq": torch.zeros_like(p, memory_format=torch.preserve_format),
            }


def describe(spec: Spec, impl: str) -> str:
    if spec.optimizer == "sgd":
        return f"SGD momentum {spec.momentum} (PyTorch's default implementation)"
    return (
        f"AdamW lr {spec.lr:g}, betas {spec.betas}, eps {spec.eps:g}, weight decay "
        f"{spec.weight_decay:g} on matrices and embeddings ({impl})"
    )
