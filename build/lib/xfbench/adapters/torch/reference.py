"""The training step computed plainly in PyTorch at a chosen dtype, on the CPU.

In float64 it is the reference the equivalence suite holds every framework's fp32
step to: the canonical function computed with round-off some nine digits below
fp32's. The same plain step in float32 measures how far fp32 itself can get from
it for this network and batch (the "fp32 floor"). Plain on purpose: eager,
channels-first, no fused or compiled paths, so it is the function as written.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from xfbench.adapters.torch import weights as W
from xfbench.adapters.torch.networks import build_network
from xfbench.models import Spec, synthetic_batch

DTYPES = {"float64": torch.float64, "float32": torch.float32}


def train_step(spec: Spec, weights: dict[str, np.ndarray], batch: int, dtype: str = "float64",
               seed: int = 0) -> tuple[float, dict[str, np.ndarray]]:
    """The loss of one SGD step from weights on the synthetic batch, and the updated
    canonical weights (as float64 numpy arrays)."""
    torch_dtype = DTYPES[dtype]
    torch.manual_seed(seed)
    net = build_network(spec)
    W.load(spec, net, weights)
    net = net.to(torch_dtype).train()
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
