"""Canonical (ONNX-layout) weights to and from TensorFlow layouts.

TensorFlow keeps conv kernels as (KH, KW, I, O) whatever the data layout, and
dense kernels as (in, out). Two conversions need care:
- the dense layer after a flatten, when the network computes channels-last: the
  spec flattens (C, H, W) but an NHWC tensor flattens (H, W, C), so the dense
  kernel's rows are permuted on import (no transpose in the step);
- the LSTM: Keras orders gates i, f, c, o in columns where ONNX orders them
  i, o, f, c in rows, and Keras keeps one bias per layer where ONNX keeps two.
  The two halves of B are summed on import; on export B is [sum, zeros].
Numpy only: the network modules create the variables from these arrays.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

Shape = tuple[int, ...]


@dataclass(frozen=True)
class Converter:
    """One canonical parameter's TensorFlow layout."""

    kind: str  # "same", "conv", "dense" or "flat_dense"
    chw: Shape | None = None  # flat_dense: the (C, H, W) map that was flattened

    def tf_shape(self, shape: Shape) -> Shape:
        if self.kind == "conv":
            o, i, kh, kw = shape
            return (kh, kw, i, o)
        if self.kind in ("dense", "flat_dense"):
            return (shape[1], shape[0])
        return tuple(shape)

    def to_tf(self, w: np.ndarray, dtype=np.float32) -> np.ndarray:
        if self.kind == "conv":
            w = w.transpose(2, 3, 1, 0)  # OIHW -> HWIO
        elif self.kind == "dense":
            w = w.T  # (out, in) -> (in, out)
        elif self.kind == "flat_dense":
            c, h, ww = self.chw  # rows in (H, W, C) order
            w = w.reshape(-1, c, h, ww).transpose(2, 3, 1, 0).reshape(h * ww * c, -1)
        return np.ascontiguousarray(w, dtype=dtype)

    def from_tf(self, w: np.ndarray, dtype=np.float32) -> np.ndarray:
        if self.kind == "conv":
            w = w.transpose(3, 2, 0, 1)  # HWIO -> OIHW
        elif self.kind == "dense":
            w = w.T
        elif self.kind == "flat_dense":
            c, h, ww = self.chw
            w = w.reshape(h, ww, c, -1).transpose(3, 2, 0, 1).reshape(-1, c * h * ww)
        return np.ascontiguousarray(w, dtype=dtype)


SAME = Converter("same")
CONV = Converter("conv")
DENSE = Converter("dense")


# -- LSTM ---------------------------------------------------------------------------
# Blocks of Keras's gate order (i, f, c, o) taken from ONNX's (i, o, f, c), and back.
ONNX_TO_KERAS_GATES = (0, 2, 3, 1)
KERAS_TO_ONNX_GATES = (0, 3, 1, 2)


def _reorder(a: np.ndarray, order: tuple[int, ...], axis: int = 0) -> np.ndarray:
    blocks = np.split(a, 4, axis=axis)
    return np.concatenate([blocks[i] for i in order], axis=axis)


def lstm_to_keras(W: np.ndarray, R: np.ndarray, B: np.ndarray, dtype=np.float32):
    """ONNX W (4H, in), R (4H, H), B (8H,) -> Keras kernel (in, 4H),
    recurrent_kernel (H, 4H) and bias (4H,) = input bias + recurrent bias."""
    h = R.shape[1]
    kernel = _reorder(W, ONNX_TO_KERAS_GATES).T
    recurrent = _reorder(R, ONNX_TO_KERAS_GATES).T
    # Summed in dtype: in float64 the sum of two float32 halves is exact.
    B = B.astype(dtype)
    bias = _reorder(B[: 4 * h] + B[4 * h :], ONNX_TO_KERAS_GATES)
    return tuple(np.ascontiguousarray(a, dtype=dtype) for a in (kernel, recurrent, bias))


def lstm_from_keras(kernel: np.ndarray, recurrent: np.ndarray, bias: np.ndarray, dtype=np.float32):
    """Keras kernel, recurrent_kernel, bias -> ONNX W, R and B = [bias, zeros]."""
    W = _reorder(kernel, KERAS_TO_ONNX_GATES, axis=1).T
    R = _reorder(recurrent, KERAS_TO_ONNX_GATES, axis=1).T
    b = _reorder(bias, KERAS_TO_ONNX_GATES)
    B = np.concatenate([b, np.zeros_like(b)])
    return tuple(np.ascontiguousarray(a, dtype=dtype) for a in (W, R, B))
