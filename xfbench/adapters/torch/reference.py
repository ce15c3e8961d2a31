"""The training step computed plainly in PyTorch at a chosen dtype, on the CPU.

In float64 it is the reference the equivalence suite holds every framework's fp32
step to: the canonical function computed with round-off some nine digits below
fp32's. The same plain step in float32 measures how far fp32 itself can get from
it for this network and batch (the "fp32 floor"). Plain on purpose: eager,
channels-first, no fused or compiled paths, so it is the function as written.

Every decision the network takes between two branches can be recorded, and chosen
ones taken the other way: a ReLU passes or blocks its input (the tie is an input of
zero); a max-pool window passes its largest input (the tie is its two largest being
equal). Each call of a ReLU or max-pool module records a Decisions: its input, and per
decision the float64 (or float32) margin from the tie. A flipped ReLU unit passes its
input (and its gradient) where the plain ReLU would block it, and blocks it where the
ReLU would pass it; a flipped max-pool window passes its second largest input instead.
That is how harness.equivalence measures what decisions taken the other way near a tie do.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from xfbench.adapters.torch import training
from xfbench.adapters.torch import weights as W
from xfbench.adapters.torch.networks import build_network
from xfbench.models import Spec, synthetic_batch

DTYPES = {"float64": torch.float64, "float32": torch.float32}


@dataclass
class Decisions:
    """One ReLU or max-pool call: its input (N, C, ...) and each decision's margin from
    its tie (ReLU: the input itself; max-pool: each window's largest input minus its
    second largest, shaped like the output)."""

    kind: str  # "relu" or "maxpool"
    inputs: np.ndarray
    margin: np.ndarray


def _window_top2(pool: torch.nn.MaxPool2d, z: torch.Tensor):
    """Each window's largest and second largest input, shaped like the pool's output.
    Padding is the lowest value, as the pool pads."""
    k, s, p = (pool.kernel_size, pool.stride, pool.padding)
    k, s, p = (v if isinstance(v, tuple) else (v, v) for v in (k, s, p))
    n, c, h, w = z.shape
    padded = F.pad(z, (p[1], p[1], p[0], p[0]), value=float("-inf"))
    cols = F.unfold(padded, k, stride=s)  # (N, C*kh*kw, L)
    cols = cols.reshape(n, c, k[0] * k[1], -1)
    top = cols.topk(2, dim=2).values  # (N, C, 2, L)
    out_h = (h + 2 * p[0] - k[0]) // s[0] + 1
    out_w = (w + 2 * p[1] - k[1]) // s[1] + 1
    return (
        top[:, :, 0].reshape(n, c, out_h, out_w),
        top[:, :, 1].reshape(n, c, out_h, out_w),
    )


def _decision_hooks(net: torch.nn.Module, record: list | None, flips: list | None) -> None:
    """Record each ReLU and max-pool call's Decisions into record, and take the
    decisions marked True in flips[k] (a boolean array shaped like the k-th call's
    margin) the other way."""
    calls = iter(range(1 << 30))

    def relu_hook(module, inputs, output):
        k = next(calls)
        z = inputs[0]
        if record is not None:
            z_np = z.detach().cpu().numpy().copy()
            record.append(Decisions("relu", z_np, z_np))
        if flips is not None and flips[k] is not None and flips[k].any():
            keep = (z > 0) ^ torch.from_numpy(flips[k]).to(z.device)
            return z * keep.to(z.dtype)
        return None

    def pool_hook(module, inputs, output):
        k = next(calls)
        z = inputs[0]
        if record is None and (flips is None or flips[k] is None or not flips[k].any()):
            return None
        first, second = _window_top2(module, z)
        if record is not None:
            margin = (first - second).detach().cpu().numpy()
            record.append(Decisions("maxpool", z.detach().cpu().numpy().copy(), margin))
        if flips is not None and flips[k] is not None and flips[k].any():
            return torch.where(torch.from_numpy(flips[k]).to(z.device), second, output)
        return None

    for module in net.modules():
        if isinstance(module, torch.nn.ReLU):
            module.inplace = False  # the hook reads the input after the call
            module.register_forward_hook(relu_hook)
        elif isinstance(module, torch.nn.MaxPool2d):
            module.register_forward_hook(pool_hook)


def _net_and_batch(spec: Spec, weights, batch: int, dtype: str, seed: int, reverse: bool = False):
    torch_dtype = DTYPES[dtype]
    torch.manual_seed(seed)
    net = build_network(spec)
    W.load(spec, net, weights)
    net = net.to(torch_dtype)
    x, y = synthetic_batch(spec, batch, seed)
    if reverse:  # the same samples, summed in another order
        x, y = np.ascontiguousarray(x[::-1]), np.ascontiguousarray(y[::-1])
    if spec.time_major:  # the LSTM model is time-major: (T, N)
        x, y = np.ascontiguousarray(x.T), np.ascontiguousarray(y.T)
    x, y = torch.from_numpy(x), torch.from_numpy(y)
    if x.is_floating_point():
        x = x.to(torch_dtype)
    return net, x, y


def logits(
    spec: Spec, weights: dict[str, np.ndarray], batch: int, dtype: str = "float64", seed: int = 0
) -> np.ndarray:
    """The logits in evaluation mode on the synthetic batch, shaped as Workload.output()
    gives them ((N, classes) or (N, T, classes)). In float64 this is the reference of the
    float64 proof: ONNX Runtime has no float64 convolution on the CPU."""
    net, x, _ = _net_and_batch(spec=spec, weights=weights, batch=batch, dtype=dtype, seed=seed)
    with torch.no_grad():
        out = net.eval()(x).numpy()
    return out.transpose(1, 0, 2) if spec.time_major else out


def train_step(
    spec: Spec,
    weights: dict[str, np.ndarray],
    batch: int,
    dtype: str = "float64",
    seed: int = 0,
    decisions: list | None = None,
    flips: list | None = None,
    reverse: bool = False,
    gradients: dict | None = None,
) -> tuple[float, dict[str, np.ndarray]]:
    """The loss of one training step (the spec's optimizer) from weights on the synthetic batch, and the updated
    canonical weights (as float64 numpy arrays). decisions, when given, receives every
    ReLU and max-pool call's Decisions; flips (one boolean array or None per call, shaped
    like that call's margin) takes the marked decisions the other way. reverse: the batch's
    samples in reverse order (the same step, its sums taken in another order). gradients,
    when given (AdamW's networks, whose parameters have canonical names), receives each
    parameter's gradient."""
    net, x, y = _net_and_batch(
        spec=spec, weights=weights, batch=batch, dtype=dtype, seed=seed, reverse=reverse
    )
    net.train()
    if decisions is not None or flips is not None:
        _decision_hooks(net, decisions, flips)
    params = list(net.parameters())
    opt = training.optimizer(spec, net, "plain")
    loss = training.cross_entropy(net(x), y, training.positions(spec, "cpu"), spec.time_major)
    loss.backward()
    if spec.clip_norm:
        torch.nn.utils.clip_grad_norm_(params, spec.clip_norm)
    if gradients is not None:
        gradients.update({k: p.grad.detach().numpy().copy() for k, p in net.named_parameters()})
    opt.step()
    return float(loss.detach()), W.from_module(spec, net, np.float64)
