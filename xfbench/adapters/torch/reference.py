"""The training step computed plainly in PyTorch at a chosen dtype, on the CPU.

In float64 it is the reference the equivalence suite holds every framework's fp32
step to: the canonical function computed with round-off some nine digits below
fp32's. The same plain step in float32 measures how far fp32 itself can get from
it for this network and batch (the "fp32 floor"). Plain on purpose: eager,
channels-first, no fused or compiled paths, so it is the function as written.

Every ReLU's input can be recorded (one array per call, in call order), and chosen
ReLU decisions can be flipped: a flipped unit passes its input (and its gradient)
where the plain ReLU would block it, and blocks it where the ReLU would pass it. That
is how exchange.verify measures what a decision taken the other way near a tie does.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from xfbench.adapters.torch import weights as W
from xfbench.adapters.torch.networks import build_network
from xfbench.models import Spec, synthetic_batch

DTYPES = {"float64": torch.float64, "float32": torch.float32}


def _relu_hooks(net: torch.nn.Module, record: list | None, flips: list | None) -> None:
    """Record each ReLU call's input into record, and flip the decisions marked True in
    flips[k] (a boolean array shaped like the k-th call's input)."""
    calls = iter(range(1 << 30))

    def hook(module, inputs, output):
        k = next(calls)
        z = inputs[0]
        if record is not None:
            record.append(z.detach().cpu().numpy().copy())
        if flips is not None and flips[k] is not None and flips[k].any():
            keep = (z > 0) ^ torch.from_numpy(flips[k]).to(z.device)
            return z * keep.to(z.dtype)
        return None

    for module in net.modules():
        if isinstance(module, torch.nn.ReLU):
            module.inplace = False  # the hook reads the input after the call
            module.register_forward_hook(hook)


def train_step(
    spec: Spec,
    weights: dict[str, np.ndarray],
    batch: int,
    dtype: str = "float64",
    seed: int = 0,
    relu_inputs: list | None = None,
    relu_flips: list | None = None,
) -> tuple[float, dict[str, np.ndarray]]:
    """The loss of one SGD step from weights on the synthetic batch, and the updated
    canonical weights (as float64 numpy arrays). relu_inputs, when given, receives every
    ReLU call's input; relu_flips (one boolean array or None per call) flips decisions."""
    torch_dtype = DTYPES[dtype]
    torch.manual_seed(seed)
    net = build_network(spec)
    W.load(spec, net, weights)
    net = net.to(torch_dtype).train()
    if relu_inputs is not None or relu_flips is not None:
        _relu_hooks(net, relu_inputs, relu_flips)
    x, y = synthetic_batch(spec, batch, seed)
    if spec.sequence:  # the model is time-major: (T, N)
        x, y = np.ascontiguousarray(x.T), np.ascontiguousarray(y.T)
    x, y = torch.from_numpy(x), torch.from_numpy(y)
    if x.is_floating_point():
        x = x.to(torch_dtype)
    params = list(net.parameters())
    opt = torch.optim.SGD(params, lr=spec.lr, momentum=spec.momentum)
    logits = net(x)
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
    loss.backward()
    if spec.clip_norm:
        torch.nn.utils.clip_grad_norm_(params, spec.clip_norm)
    opt.step()
    return float(loss.detach()), W.from_module(spec, net, np.float64)
