"""GPT-2's greedy decoding in ONNX Runtime with a static key/value cache (xfbench/generation).

One session runs exchange/decoder.py's graph for prefill (the prompt's ISL tokens at
position 0) and for each decode step (one token). The cache tensors are OrtValues
allocated once and bound through I/O binding as both the graph's past_* inputs and its
present_* outputs: TensorScatter then writes the new position in place (ONNX Runtime
1.31 checks for that and logs a warning when it must copy instead). The chosen tokens
and logits are bound to OrtValues allocated once as well.

Mode cpu (CPUExecutionProvider, graph optimization ORT_ENABLE_ALL); cuda on the GPU with
onnxruntime-gpu. ONNX Runtime's transformer optimizer (the fused mode) does not take
opset-24 graphs, so it has no generation mode.
"""

from __future__ import annotations

import numpy as np
import onnxruntime as ort

from xfbench.adapters.base import Generator
from xfbench.adapters.onnxruntime.workload import provider_list
from xfbench.errors import CannotRun
from xfbench.exchange.decoder import LOGITS, NEXT, OPSET, POSITION, TOKENS, cache_names
from xfbench.models import Spec
from xfbench.models import layers as L

# Where ONNX Runtime says it copied the cache instead of writing it in place.
COPY_WARNING = "in-place optimization not activated"


def _session(model: bytes, cell) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.intra_op_num_threads = cell.threads
    options.inter_op_num_threads = 1
    providers = provider_list(cell)
    session = ort.InferenceSession(model, options, providers=providers)
    used = session.get_providers()
    if not used or used[0] != providers[0][0]:
        raise RuntimeError(
            f"asked ONNX Runtime for {providers[0][0]}, but the session runs on "
            f"{', '.join(used) or 'nothing'} (no silent fallback)"
        )
    return session


class OrtGenerator(Generator):
    def __init__(self, spec: Spec, cell, weights: dict[str, np.ndarray]):
        if cell.mode not in ("cpu", "cuda"):
            raise CannotRun(
                f"ONNX Runtime generates in the cpu and cuda modes (its {cell.mode} mode's "
                "optimizer does not take the decoder's opset-24 graph)"
            )
        try:
            from xfbench.exchange.decoder import build_decoder
        except ImportError:
            raise CannotRun(
                "the decoder's graph is built with onnx, which is not installed"
            ) from None
        length = cell.prompt_tokens + cell.new_tokens
        model = build_decoder(spec, weights, length).SerializeToString()
        self.session = _session(model, cell)
        del model
        gpu = cell.device != "cpu"
        self.where = ("cuda", int(cell.device.split(":")[1])) if gpu else ("cpu", 0)
        blocks = spec.layer(L.TransformerBlock)
        d, b = spec.layer(L.TokenEmbedding)[0].dim, cell.batch_size
        shape = (b, blocks[0].heads, length, d // blocks[0].heads)
        self.binding = self.session.io_binding()
        self._bind_cache(len(blocks), shape)
        self.next = ort.OrtValue.ortvalue_from_shape_and_type((b,), np.int64, *self.where)
        self._logits = ort.OrtValue.ortvalue_from_shape_and_type(
            (b, spec.layer(L.TokenEmbedding)[0].vocab), np.float32, *self.where
        )
        self.binding.bind_ortvalue_output(NEXT, self.next)
        self.binding.bind_ortvalue_output(LOGITS, self._logits)
        self.position = 0
        self.info = {
            "device_name": "cpu" if not gpu else cell.device,
            "execution_provider": self.session.get_providers()[0],
            "backend": f"ONNX Runtime {self.session.get_providers()[0]}",
            "graph_optimization_level": "ORT_ENABLE_ALL",
            "intra_op_num_threads": cell.threads,
            "inter_op_num_threads": 1,
            "io_binding": True,
            "onnx_opset": OPSET,
            "attention_kernel": "softmax(q k^T / sqrt(dh) + mask) v written out: MatMul "
            "and Softmax",
            "cache_write": "TensorScatter (opset 24), the cache bound as input and output",
        }

    def _bind_cache(self, layers: int, shape: tuple[int, ...]) -> None:
        """Each layer's key and value cache: one zeroed buffer on the device, bound as the
        past it reads and the present it writes."""
        self.cache = []
        for past_k, past_v, present_k, present_v in cache_names(layers):
            for past, present in ((past_k, present_k), (past_v, present_v)):
                # zeros, not uninitialised memory: attention multiplies the masked positions
                # by a probability of 0, and 0 x NaN would be NaN
                value = ort.OrtValue.ortvalue_from_numpy(np.zeros(shape, np.float32), *self.where)
                self.binding.bind_ortvalue_input(past, value)
                self.binding.bind_ortvalue_output(present, value)  # the same buffer
                self.cache.append(value)
        self.cache_bytes = 4 * int(np.prod(shape)) * len(self.cache)

    def _run(self, tokens: np.ndarray) -> np.ndarray:
        # Held here until the run: a bound host array is read in place, not copied.
        self.inputs = np.ascontiguousarray(tokens, np.int64), np.array([self.position], np.int64)
        self.binding.bind_cpu_input(TOKENS, self.inputs[0])
        self.binding.bind_cpu_input(POSITION, self.inputs[1])
        self.session.run_with_iobinding(self.binding)
        self.binding.synchronize_outputs()
        self.position += tokens.shape[1]
        return self.next.numpy().copy()  # numpy() shares the bound buffer

    def prefill(self, prompt: np.ndarray) -> np.ndarray:
        self.position = 0
        return self._run(prompt)

    def decode(self, tokens: np.ndarray) -> np.ndarray:
        return self._run(tokens[:, None])

    def logits(self) -> np.ndarray:
        return self._logits.numpy().copy()

    def close(self) -> None:
        del self.binding, self.session, self.cache
