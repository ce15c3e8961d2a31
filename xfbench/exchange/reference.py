"""The canonical graph run as written in ONNX Runtime: the reference every framework's
logits and loss are held to, and the error measure of those comparisons.

The measure of agreement is the relative error of one tensor against its reference,
    rel_err(a, ref) = max |a - ref| / max |ref|      (per tensor; 0/0 counts as 0),
and of a set of tensors the largest one. Two results agree when it is at most TOL.
Scaling by the largest reference value (not element by element) keeps logits near
zero from turning round-off into huge ratios, while a wrong layer still moves whole
tensors by far more than 1e-4 of their scale.
"""

from __future__ import annotations

import numpy as np

from xfbench.exchange.graph import build_graph
from xfbench.models import Spec, synthetic_batch

TOL = 1e-4


def rel_err(a: np.ndarray, ref: np.ndarray) -> float:
    a, ref = np.asarray(a, np.float64), np.asarray(ref, np.float64)
    if a.shape != ref.shape:
        return float("inf")
    diff = float(np.max(np.abs(a - ref))) if a.size else 0.0
    scale = float(np.max(np.abs(ref))) if ref.size else 0.0
    if scale == 0.0:
        return 0.0 if diff == 0.0 else float("inf")
    return diff / scale


def max_rel_err(a: dict[str, np.ndarray], ref: dict[str, np.ndarray]) -> tuple[float, str]:
    """The largest per-tensor relative error over ref's tensors, and which tensor."""
    worst, name = 0.0, ""
    for key, value in ref.items():
        err = rel_err(a[key], value) if key in a else float("inf")
        if err > worst or not name:
            worst, name = err, key
    return worst, name


def run_onnx(model_or_path, x: np.ndarray, threads: int = 1) -> np.ndarray:
    """The first output of a model (ModelProto, bytes or file path) on x, in ONNX Runtime."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.intra_op_num_threads = threads
    source = (
        model_or_path.SerializeToString()
        if hasattr(model_or_path, "SerializeToString")
        else str(model_or_path)
    )
    session = ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])
    first = session.get_inputs()[0]
    if first.type == "tensor(int32)" and x.dtype == np.int64:
        x = x.astype(np.int32)  # token ids, from an exporter that traced them as int32
    return session.run(None, {first.name: x})[0]


def cross_entropy(logits: np.ndarray, labels: np.ndarray) -> float:
    """Mean softmax cross-entropy over every sample (and every time step)."""
    z = logits.reshape(-1, logits.shape[-1]).astype(np.float64)
    y = labels.reshape(-1)
    z = z - z.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    return float(-logp[np.arange(len(y)), y].mean())


def reference_logits(spec: Spec, weights, batch: int, seed: int = 0) -> np.ndarray:
    x, _ = synthetic_batch(spec, batch, seed)
    return run_onnx(build_graph(spec, weights, "infer")[0], x)


def reference_loss(spec: Spec, weights, batch: int, seed: int = 0) -> float:
    x, y = synthetic_batch(spec, batch, seed)
    logits = run_onnx(build_graph(spec, weights, "train")[0], x)
    if spec.loss_positions is not None:  # the masked LM's positions
        logits, y = logits[:, list(spec.loss_positions)], y[:, list(spec.loss_positions)]
    return cross_entropy(logits, y)


def widened(model):
    """The same ONNX model computing in float64: every float32 tensor (weights, constants,
    inputs, outputs, Cast targets) made float64; token inputs stay int64."""
    import onnx
    from onnx import TensorProto, numpy_helper

    model = onnx.ModelProto.FromString(model.SerializeToString())
    graph = model.graph
    for init in graph.initializer:
        if init.data_type == TensorProto.FLOAT:
            wide = numpy_helper.to_array(init).astype(np.float64)
            init.CopyFrom(numpy_helper.from_array(wide, init.name))
    for info in [*graph.input, *graph.output, *graph.value_info]:
        if info.type.tensor_type.elem_type == TensorProto.FLOAT:
            info.type.tensor_type.elem_type = TensorProto.DOUBLE
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.name == "to" and attribute.i == TensorProto.FLOAT:
                attribute.i = TensorProto.DOUBLE
    return model


def float64_logits(spec: Spec, weights, batch: int, seed: int = 0) -> np.ndarray:
    """The canonical function in float64: the "infer" graph as written, widened to float64
    and run by ONNX's own reference interpreter (NumPy), which shares no kernel with any
    framework measured."""
    from onnx.reference import ReferenceEvaluator

    from xfbench.exchange.names import INPUT

    x, _ = synthetic_batch(spec, batch, seed)
    model = widened(build_graph(spec, weights, "infer")[0])
    wide = x.astype(np.float64) if x.dtype == np.float32 else x
    return ReferenceEvaluator(model).run(None, {INPUT: wide})[0]
