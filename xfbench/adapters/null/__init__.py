"""The null adapter: steps that do nothing, so the harness's own cost per step is a
measured number rather than an assumption."""

from __future__ import annotations

import sys

import numpy as np

from xfbench.adapters.base import Adapter, Cell, Workload


class NullWorkload(Workload):
    def __init__(self, spec, cell: Cell, weights):
        self.spec, self.cell, self._weights = spec, cell, weights
        self.info = {"device_name": "none", "layout": "none"}

    def step(self) -> None:
        pass

    def loss(self) -> float:
        return float("nan")

    def output(self) -> np.ndarray:
        return np.zeros((self.cell.batch_size,) + self.spec.output_shape, np.float32)

    def infer_samples(self, x: np.ndarray) -> np.ndarray:
        return self.output()

    def weights(self):
        return dict(self._weights)


class NullAdapter(Adapter):
    name = "null"
    precisions = ("fp32",)

    def versions(self):
        return {"python": sys.version.split()[0]}

    def devices(self):
        return ["cpu"]

    def build(self, spec, cell, weights):
        return NullWorkload(spec, cell, weights)


ADAPTER = NullAdapter()
