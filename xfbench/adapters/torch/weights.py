"""Canonical (ONNX-layout) weights to and from a PyTorch module.

Conv (O, I, KH, KW) and dense (out, in) layouts are PyTorch's own. The LSTM is
the one conversion: ONNX orders the gates i, o, f, c, PyTorch i, f, g(=c), o,
and ONNX keeps both biases in one vector B = [Wb, Rb].
"""

from __future__ import annotations

import numpy as np
import torch

from xfbench.adapters.torch.networks import canonical_keys
from xfbench.models import Spec

# Row blocks of PyTorch's gate order, taken from ONNX's (i, o, f, c).
ONNX_TO_TORCH_GATES = (0, 2, 3, 1)  # torch i, f, g, o = onnx blocks 0, 2, 3, 1
TORCH_TO_ONNX_GATES = (0, 3, 1, 2)  # onnx i, o, f, c = torch blocks 0, 3, 1, 2


def _reorder(a: np.ndarray, order: tuple[int, ...]) -> np.ndarray:
    return np.concatenate([b for b in (np.split(a, 4, axis=0)[i] for i in order)], axis=0)


def _lstm_keys(spec: Spec) -> list[tuple[str, str, str]]:
    """(canonical name, torch key, kind) for the LSTM language model."""
    embed, lstm, fc = spec.layers
    keys = [
        (f"{embed.name}.weight", "embed.weight", "plain"),
        (f"{fc.name}.weight", "fc.weight", "plain"),
        (f"{fc.name}.bias", "fc.bias", "plain"),
    ]
    for i in range(lstm.layers):
        n = f"{lstm.name}.l{i}"
        keys += [
            (f"{n}.W", f"lstm.weight_ih_l{i}", "gates"),
            (f"{n}.R", f"lstm.weight_hh_l{i}", "gates"),
            (f"{n}.B", f"lstm.bias_ih_l{i}", "bias_in"),
            (f"{n}.B", f"lstm.bias_hh_l{i}", "bias_rec"),
        ]
    return keys


def to_state_dict(spec: Spec, net: torch.nn.Module, weights: dict[str, np.ndarray]) -> dict:
    """The state dict entries of net's parameters from canonical weights."""
    if not spec.time_major:
        return {
            key: torch.from_numpy(weights[name]) for name, key in canonical_keys(spec, net).items()
        }
    out = {}
    for name, key, kind in _lstm_keys(spec):
        w = weights[name]
        if kind == "gates":
            w = _reorder(w, ONNX_TO_TORCH_GATES)
        elif kind in ("bias_in", "bias_rec"):
            half = w.shape[0] // 2
            w = _reorder(w[:half] if kind == "bias_in" else w[half:], ONNX_TO_TORCH_GATES)
        out[key] = torch.from_numpy(np.ascontiguousarray(w))
    return out


def load(spec: Spec, net: torch.nn.Module, weights: dict[str, np.ndarray]) -> None:
    state = to_state_dict(spec, net, weights)
    missing = {k for k, _ in net.named_parameters()} - set(state)
    if missing:
        raise ValueError(f"{spec.id}: no canonical weight for {sorted(missing)}")
    net.load_state_dict(state, strict=False)


def from_module(spec: Spec, net: torch.nn.Module, dtype=np.float32) -> dict[str, np.ndarray]:
    """Canonical weights from net's current parameters (float32 unless asked, host)."""
    state = {
        k: v.detach().cpu().numpy().astype(dtype, copy=False) for k, v in net.state_dict().items()
    }
    if not spec.time_major:
        return {name: state[key] for name, key in canonical_keys(spec, net).items()}
    out, biases = {}, {}
    for name, key, kind in _lstm_keys(spec):
        w = state[key]
        if kind == "plain":
            out[name] = w
        elif kind == "gates":
            out[name] = _reorder(w, TORCH_TO_ONNX_GATES)
        else:
            biases.setdefault(name, {})[kind] = _reorder(w, TORCH_TO_ONNX_GATES)
    for name, parts in biases.items():
        out[name] = np.concatenate([parts["bias_in"], parts["bias_rec"]])
    return out
