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
