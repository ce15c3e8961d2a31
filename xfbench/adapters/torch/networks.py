"""The nine networks as PyTorch modules, built layer by layer from the spec.

Each spec layer becomes one child module, so the network is exactly the one
docs/models.md describes; ResNet blocks are in resnet.py and the LSTM language model
in lstm.py.
"""

from __future__ import annotations

import torch
from torch import nn

from xfbench.adapters.torch.lstm import LSTMLanguageModel
from xfbench.adapters.torch.resnet import BasicBlock, Bottleneck
from xfbench.adapters.torch.transformer import Transformer
from xfbench.models import Spec
from xfbench.models import layers as L


def _module(layer: L.Layer, x: tuple[int, ...]) -> nn.Module:
    if isinstance(layer, L.Dense):
        return nn.Linear(x[-1], layer.units, bias=layer.bias)
    if isinstance(layer, L.Conv):
        return nn.Conv2d(
            x[0], layer.filters, layer.kernel, layer.stride, layer.pad, bias=layer.bias
        )
    if isinstance(layer, L.BatchNorm):
        return nn.BatchNorm2d(x[0], eps=layer.eps, momentum=layer.momentum)
    if isinstance(layer, L.ReLU):
        return nn.ReLU(inplace=True)
    if isinstance(layer, L.Sigmoid):
        return nn.Sigmoid()
    if isinstance(layer, L.MaxPool):
        return nn.MaxPool2d(layer.kernel, layer.stride, layer.pad)
    if isinstance(layer, L.AvgPool):
        return nn.AvgPool2d(layer.kernel, layer.stride)
    if isinstance(layer, L.GlobalAvgPool):
        return nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten())
    if isinstance(layer, L.Flatten):
        # Logical NCHW order whatever the memory format, as the spec (and ONNX) flattens.
        return nn.Flatten()
    if isinstance(layer, L.Bottleneck):
        return Bottleneck(
            cin=x[0],
            width=layer.width,
            stride=layer.stride,
            expansion=layer.expansion,
            projected=layer.projected(x),
        )
    if isinstance(layer, L.BasicBlock):
        return BasicBlock(x[0], layer.filters, layer.stride)
    raise TypeError(f"no PyTorch module for {type(layer).__name__}")


class SpecNet(nn.Sequential):
    """A feed-forward network: one child per spec layer, named after it."""

    def __init__(self, spec: Spec):
        super().__init__()
        for i, (layer, x) in enumerate(spec.shapes):
            self.add_module(
                f"{i}_{getattr(layer, 'name', type(layer).__name__)}".replace(".", "_"),
                _module(layer, x),
            )


def build_network(spec: Spec) -> nn.Module:
    if spec.transformer:
        return Transformer(spec)
    if spec.time_major:
        return LSTMLanguageModel(spec)
    return SpecNet(spec)


def canonical_keys(spec: Spec, net: nn.Module) -> dict[str, str]:
    """canonical parameter name -> key in net.state_dict() (LSTM handled in weights.py)."""
    if spec.transformer:  # its modules are named after the canonical parameters
        return {p.name: p.name for p in spec.params}
    if spec.time_major:
        return {}
    out = {}
    children = list(net.named_children())
    for (layer, x), (child, _) in zip(spec.shapes, children):
        for p in layer.params(x):
            suffix = p.name[len(layer.name) + 1 :]
            out[p.name] = f"{child}.{suffix}"
    return out


def count_parameters(spec: Spec) -> int:
    """Full-size parameter count without allocating weights (the meta device)."""
    with torch.device("meta"):
        net = build_network(spec)
    return sum(p.numel() for p in net.parameters())
