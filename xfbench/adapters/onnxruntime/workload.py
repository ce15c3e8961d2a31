"""One ONNX Runtime cell: a session over the canonical graph, the batch bound once.

The graph is exchange.build_graph's, the one the canonical file holds, with the
weights the harness gives (identical to the file's). It is handed to the session
as bytes, so nothing is written to disk.

IO binding keeps the batch and the output buffer on the device across steps;
a step is one run_with_iobinding, which returns once the device has finished
(ONNX Runtime synchronises the provider's stream at the end of a run).
"""

from __future__ import annotations

import logging

import numpy as np
import onnxruntime as ort

from xfbench.adapters.base import Cell, Workload
from xfbench.adapters.onnxruntime.reasons import TRAIN_REASON
from xfbench.errors import CannotRun
from xfbench.exchange.names import INPUT, OPSET, OUTPUT, canonical_path
from xfbench.models import Spec, synthetic_batch


def provider_list(cell: Cell) -> list[tuple[str, dict]]:
    """The providers to ask for, first the one the cell names."""
    if cell.mode in ("cpu", "fused"):
        return [("CPUExecutionProvider", {})]
    device_id = int(cell.device.split(":")[1])
    cuda = (
        "CUDAExecutionProvider",
        {
            "device_id": device_id,
            # fp32 means IEEE fp32: the CUDA provider's TF32 default is switched off.
            "use_tf32": 1 if cell.precision == "tf32" else 0,
            "cudnn_conv_algo_search": "EXHAUSTIVE",
            "do_copy_in_default_stream": 1,
        },
    )
    if cell.mode == "cuda":
        return [cuda]
    trt = (
        "TensorrtExecutionProvider",
        {"device_id": device_id, "trt_fp16_enable": False, "trt_int8_enable": False},
    )
    return [trt, cuda]


def _model(spec: Spec, weights, seed: int):
    """The inference graph, as bytes built from weights where onnx is installed, else the
    path of the canonical file (written where onnx is, and copied into $XFBENCH_CACHE):
    running a graph needs onnxruntime alone. The canonical file holds the weights of seed,
    which are the harness's initial weights."""
    try:
        from xfbench.exchange.graph import build_graph
    except ImportError:
        path = canonical_path(spec, seed)
        if not path.exists():
            raise CannotRun(
                f"onnx is not installed, and the canonical file {path.name} is not in "
                f"{path.parent}: write it where onnx is (python -m xfbench.exchange write "
                f"{spec.id} --scale {spec.scale}) and copy it, with its .data file, here, "
                "or install onnx"
            ) from None
        return str(path)
    model, _ = build_graph(spec, weights, "infer")
    return model.SerializeToString()


def transformer_fusions(spec: Spec, model: bytes) -> tuple[bytes, dict[str, int]]:
    """The graph after ONNX Runtime's transformer optimizer (its Python fusions, the
    graph-level ones left to the session), and how many of each fused operator it made:
    those it did not recognise stay as written, and the record says so by their count."""
    try:
        import onnx
        from onnxruntime.transformers.fusion_options import FusionOptions
        from onnxruntime.transformers.optimizer import optimize_model
    except ImportError as e:
        raise CannotRun(f"the fused mode needs onnx and onnxruntime.transformers: {e}") from None
    from xfbench.models import layers as L

    block = spec.layer(L.TransformerBlock)[0]
    dim = spec.layer(L.TokenEmbedding)[0].dim
    model_type = "gpt2" if block.causal else "bert"
    # its warning that the graph's producer is not PyTorch (it is xfbench's) says nothing
    logging.getLogger("onnxruntime.transformers.optimizer").setLevel(logging.ERROR)
    fusions = FusionOptions(model_type)
    # The optimizer fuses every Gelu node with its bias into BiasGelu, the erf form,
    # whatever the node's approximate attribute says. GPT-2's GELU is the tanh form:
    # its documented approximation option turns those into FastGelu, which computes it.
    fusions.enable_gelu_approximation = block.gelu == "tanh"
    optimized = optimize_model(
        onnx.load_from_string(model),
        model_type=model_type,
        num_heads=block.heads,
        hidden_size=dim,
        opt_level=0,
        use_gpu=False,
        optimization_options=fusions,
    )
    wrong = [g for g in gelus(optimized.model) if g != block.gelu]
    if wrong:
        raise RuntimeError(
            f"the fused graph computes a {wrong[0]} GELU where {spec.id}'s is the "
            f"{block.gelu} one: it would time another function"
        )
    counts = {k: int(v) for k, v in optimized.get_fused_operator_statistics().items() if v}
    return optimized.model.SerializeToString(), counts


# The GELU each operator computes: ONNX's Gelu by its approximate attribute; ONNX Runtime's
# contrib operators by their definition (FastGelu is the tanh form).
_GELU_OPS = {"BiasGelu": "erf", "FastGelu": "tanh", "Gelu": None}


def gelus(model) -> list[str]:
    """The form ("erf" or "tanh") of every GELU of an ONNX model, in node order."""
    out = []
    for node in model.graph.node:
        if node.op_type not in _GELU_OPS:
            continue
        form = _GELU_OPS[node.op_type]
        if form is None:
            approximate = next(
                (a.s.decode() for a in node.attribute if a.name == "approximate"), "none"
            )
            form = "tanh" if approximate == "tanh" else "erf"
        out.append(form)
    return out


def _session_options(cell: Cell):
    """All of ONNX Runtime's graph optimizations, ops run in order on the cell's threads."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.intra_op_num_threads = cell.threads
    options.inter_op_num_threads = 1
    return options


class OrtWorkload(Workload):
    def __init__(self, spec: Spec, cell: Cell, weights: dict[str, np.ndarray], seed: int = 0):
        if cell.task != "infer":
            raise CannotRun(TRAIN_REASON)
        self.spec, self.cell, self._weights = spec, cell, weights
        model = _model(spec, weights, seed)
        fused = None
        if cell.mode == "fused":
            model, fused = transformer_fusions(spec, model)
        options = _session_options(cell)
        providers = provider_list(cell)
        int8 = {}
        if cell.precision == "int8":
            if not isinstance(model, bytes):
                raise CannotRun("int8 quantizes the canonical graph, which needs onnx installed")
            from xfbench.adapters.onnxruntime.int8 import quantized

            model, int8 = quantized(spec, model, options, providers)
        self.session = ort.InferenceSession(model, options, providers=providers)
        del model
        used = self.session.get_providers()
        if not used or used[0] != providers[0][0]:
            raise RuntimeError(
                f"asked ONNX Runtime for {providers[0][0]}, but the session runs "
                f"on {', '.join(used) or 'nothing'} (no silent fallback)"
            )

        gpu = cell.device != "cpu"
        self.where = ("cuda", int(cell.device.split(":")[1])) if gpu else ("cpu", 0)
        self._bind_io(seed)

        from xfbench import machine

        self.info = {
            "device_name": (machine.gpu_name(cell.device) or "cuda") if gpu else "cpu",
            "layout": "NCHW graph (the provider picks its internal layout)",
            "execution_provider": used[0],
            "backend": f"ONNX Runtime {used[0]}",
            "session_providers": used,
            "graph_optimization_level": "ORT_ENABLE_ALL",
            "intra_op_num_threads": cell.threads,
            "inter_op_num_threads": 1,
            "io_binding": True,
            "cuda_use_tf32": providers[-1][1].get("use_tf32") if gpu else None,
            "onnx_opset": OPSET,
            **({"fused_operators": fused} if fused is not None else {}),
            **int8,
        }

    def _bind_io(self, seed: int) -> None:
        """The synthetic batch and the output, on the cell's device, bound to the session."""
        spec, cell = self.spec, self.cell
        x, _ = synthetic_batch(spec, cell.batch_size, seed)
        self.x_host = x
        self.x = ort.OrtValue.ortvalue_from_numpy(x, *self.where)
        out_shape = (cell.batch_size,) + spec.output_shape
        self.out = ort.OrtValue.ortvalue_from_shape_and_type(out_shape, np.float32, *self.where)
        self.binding = self.session.io_binding()
        self.binding.bind_ortvalue_input(INPUT, self.x)
        self.binding.bind_ortvalue_output(OUTPUT, self.out)

    def step(self) -> None:
        if self.cell.data == "copied":
            # A fresh host copy, bound as host memory: ONNX Runtime moves it to the
            # device inside the run.
            self.binding.bind_cpu_input(INPUT, self.x_host.copy())
        self.session.run_with_iobinding(self.binding)
        self.binding.synchronize_outputs()

    def input_batches(self, source, seed: int, workers: int):
        """ONNX Runtime has no input pipeline: the same samples in the same order as the
        other frameworks, prepared here in numpy (data/sources.py), no workers."""
        self.input_workers = 0
        return self._numpy_batches(source, seed)

    def _numpy_batches(self, source, seed: int):
        from xfbench.data.sources import batches_of_indices, sample

        rng = np.random.default_rng([seed, 11])
        for idx in batches_of_indices(len(source), self.cell.batch_size, seed):
            pairs = [sample(source, int(i), rng) for i in idx]
            yield np.stack([x for x, _ in pairs]), np.stack([np.asarray(y) for _, y in pairs])

    def feed(self, x, y) -> None:
        self.x_host = np.ascontiguousarray(x)
        self.binding.bind_cpu_input(INPUT, self.x_host)

    def infer_samples(self, x: np.ndarray) -> np.ndarray:
        self.binding.bind_cpu_input(INPUT, np.ascontiguousarray(x))
        self.session.run_with_iobinding(self.binding)
        self.binding.synchronize_outputs()
        return self.output()

    def loss(self) -> float:
        raise CannotRun(TRAIN_REASON)

    def output(self) -> np.ndarray:
        if self.where[0] != "cpu":
            return np.asarray(self.binding.copy_outputs_to_cpu()[0], np.float32)
        return np.asarray(self.out.numpy(), np.float32)

    def weights(self) -> dict[str, np.ndarray]:
        return dict(self._weights)  # inference never changes them

    def close(self) -> None:
        self.binding = self.session = self.x = self.out = None
