"""One PyTorch cell: the network on its device, the batch resident, and the step.

Modes: eager; compile (torch.compile of forward+loss, which compiles the
backward through AOTAutograd, and of the optimizer update); cudagraph (the same
with mode="reduce-overhead", which replays CUDA graphs).
Precisions: fp32 is IEEE fp32 everywhere (PyTorch lets cuDNN convolutions and
RNNs use TF32 by default, so it is switched off explicitly); tf32 switches it on
for matmuls, convolutions and RNNs; bf16 and fp16 are autocast over fp32
master weights, fp16 with a gradient scaler; fp64 (CPU only) is the whole network,
batch and update in float64, for the equivalence proof.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import re
import tempfile

import numpy as np
import torch

from xfbench.adapters.base import Cell, Workload, check_layer_dtypes
from xfbench.adapters.torch import cudagraphs, training
from xfbench.adapters.torch import weights as W
from xfbench.adapters.torch.device_memory import CudaPeak
from xfbench.adapters.torch.networks import build_network
from xfbench.adapters.torch.precision import MATH_LAYERS, probe
from xfbench.errors import CannotRun
from xfbench.models import Spec, synthetic_batch

AMP_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def set_fp32_precision(precision: str) -> dict[str, str]:
    """IEEE fp32 unless tf32 was asked for; returns the settings now in force."""
    gpu = "tf32" if precision == "tf32" else "ieee"
    torch.backends.cuda.matmul.fp32_precision = gpu
    torch.backends.cudnn.conv.fp32_precision = gpu
    torch.backends.cudnn.rnn.fp32_precision = gpu
    # oneDNN on the CPU may otherwise run fp32 matmuls in bf16 when told to; never here.
    torch.backends.mkldnn.matmul.fp32_precision = "ieee"
    torch.backends.mkldnn.conv.fp32_precision = "ieee"
    return {
        "cuda.matmul": torch.backends.cuda.matmul.fp32_precision,
        "cudnn.conv": torch.backends.cudnn.conv.fp32_precision,
        "cudnn.rnn": torch.backends.cudnn.rnn.fp32_precision,
        "mkldnn.matmul": torch.backends.mkldnn.matmul.fp32_precision,
    }


def preferred_layout(spec: Spec, device: torch.device, precision: str) -> str:
    """channels_last where PyTorch is faster with it: oneDNN convolutions on the CPU,
    and tensor-core (tf32/bf16/fp16) convolutions on CUDA."""
    if spec.sequence or not any(len(s) == 3 for _, s in spec.shapes):
        return "n/a"
    if device.type == "cpu" or precision != "fp32":
        return "channels_last"
    return "channels_first"


@functools.cache
def blas() -> str:
    """The BLAS that takes fp32 matmuls and linear layers on the CPU, with the code path it
    announces. PyTorch's x86 wheels link oneMKL, and oneMKL picks its kernels by CPU vendor:
    its banner names the ISA it dispatched for on Intel CPUs, and only "Intel(R)
    Architecture processors" on others, where it ran well below oneDNN on AVX-512 AMD
    CPUs (docs/frameworks.md). The banner is what MKL_VERBOSE prints at its first call,
    read from file descriptor 1 for one tiny product."""
    if not torch.backends.mkl.is_available():
        return "no MKL (ATen's own or OpenBLAS GEMM)"
    libc = ctypes.CDLL(None)
    a = torch.ones(8, 8)
    with tempfile.TemporaryFile() as f:
        libc.fflush(None)
        saved = os.dup(1)
        os.dup2(f.fileno(), 1)
        try:
            with torch.backends.mkl.verbose(torch.backends.mkl.VERBOSE_ON):
                torch.mm(a, a)
            libc.fflush(None)
        finally:
            os.dup2(saved, 1)
            os.close(saved)
        f.seek(0)
        text = f.read().decode(errors="replace")
    m = re.search(r"MKL_VERBOSE (oneMKL [\d.]+[^\n]*?) Product build \d+ for (.*?), Lnx", text)
    if not m:
        return "MKL (its banner was not readable)"
    path = m[2].removeprefix("Intel(R) 64 architecture ").strip()
    return f"{m[1]}, {path}"


def backend(device_type: str, compiled: bool = False) -> dict:
    """What PyTorch runs on, as PyTorch reports it: on the CPU, the ISA ATen's kernels were
    dispatched for (ATEN_CPU_CAPABILITY can only lower it), whether oneDNN (mkldnn)
    takes the convolutions, and for compiled cells the vector ISA Inductor's C++ code is
    built for; on a GPU, cuDNN's version."""
    if device_type == "cuda":
        return {"backend": f"CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}"}
    capability = torch.backends.cpu.get_cpu_capability()
    onednn = torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled
    gemm = blas()
    out = {
        "aten_cpu_capability": capability,
        "onednn": onednn,
        "blas": gemm,
        "backend": f"ATen {capability}"
        + (", oneDNN convolutions" if onednn else ", no oneDNN")
        + f", GEMM {gemm}",
    }
    if compiled:
        from torch._inductor import cpu_vec_isa

        out["inductor_vec_isa"] = str(cpu_vec_isa.pick_vec_isa()) or "none"
        out["backend"] += f", Inductor C++ {out['inductor_vec_isa']}"
    return out


# where training pads GPT-2's vocabulary and chunks its loss (a test adds the CPU)
PADDED_ON = {"cuda"}


def _inductor_cpu_settings() -> dict:
    """Inductor's settings that shape its CPU code: weight prepacking, freezing, C++ wrapper."""
    return {
        "inductor_weight_prepack": torch._inductor.config.cpp.weight_prepack,
        "inductor_freezing": torch._inductor.config.freezing,
        "inductor_cpp_wrapper": torch._inductor.config.cpp_wrapper,
    }


class TorchWorkload(CudaPeak, Workload):
    def __init__(self, spec: Spec, cell: Cell, weights: dict[str, np.ndarray], seed: int = 0):
        self.spec, self.cell = spec, cell
        self.device = torch.device(cell.device)
        precision_flags = set_fp32_precision(cell.precision)
        # cuDNN's autotuner picks each convolution's fastest algorithm for its fixed shape;
        # it runs in the first steps (compile and warm-up), never in the timed rounds.
        torch.backends.cudnn.benchmark = self.device.type == "cuda"
        torch.manual_seed(seed)
        self._place_network(weights)
        self._place_batch(seed)
        self._mixed_precision()
        lstm_note = self._choose_lstm_kernel(spec, cell)
        # What ran, asked of PyTorch: a layer that computed in another dtype than the
        # cell's precision fails the cell rather than being timed under its label.
        self.layer_dtypes, kernels = probe(self.net, self.x, self.autocast, spec.time_major)
        if cell.precision != "int8":  # int8: what its quantized graph holds, below
            check_layer_dtypes(cell.precision, self.layer_dtypes, MATH_LAYERS)
        mode = self._compile_mode()
        int8_facts = self._steps(weights, mode)
        params = next(self.net.parameters())
        if params.device != self.device or self.x.device != self.device:
            raise RuntimeError(f"asked for {self.device}, but tensors are on {params.device}")
        self.info = self._facts(
            precision_flags=precision_flags,
            kernels=kernels,
            lstm_note=lstm_note,
            mode=mode,
            int8_facts=int8_facts,
        )

    def _facts(
        self,
        *,
        precision_flags: dict,
        kernels: dict,
        lstm_note: str,
        mode: str | None,
        int8_facts: dict,
    ) -> dict:
        """The record's facts of the built workload: its device, layout and precision, the
        kernels PyTorch chose, its optimizer and loss scale, and its backend."""
        spec, cell = self.spec, self.cell
        return {
            "device_name": (
                torch.cuda.get_device_name(self.device) if self.device.type == "cuda" else "cpu"
            ),
            "layout": self.layout,
            "fp32_precision": precision_flags,
            "layer_dtypes": self.layer_dtypes,
            "lstm_kernel": (kernels.get("lstm") or "n/a") + lstm_note,
            "attention_kernel": kernels.get("attention", "n/a"),
            **(
                {
                    "vocab_padded_to": self.vocab_padded_to,
                    "loss_kernel": f"the head and its cross-entropy chunked by "
                    f"{training.LOSS_CHUNK_ROWS} rows, gradients in the forward pass",
                }
                if self.vocab_padded_to
                else {}
            ),
            **(
                {"optimizer": training.describe(spec, self.optimizer_impl)}
                if cell.task == "train"
                else {}
            ),
            "loss_scale": (
                f"dynamic (torch.amp.GradScaler, from {self.scaler.get_scale():g})"
                if self.scaler
                else "none"
            ),
            "cudnn_benchmark": torch.backends.cudnn.benchmark,
            **(_inductor_cpu_settings() if mode and self.device.type == "cpu" else {}),
            **backend(self.device.type, compiled=bool(mode)),
            **int8_facts,
        }

    def _place_network(self, weights: dict[str, np.ndarray]) -> None:
        """The network with the canonical weights, on the device in its dtype and layout."""
        net = build_network(self.spec)
        W.load(self.spec, net, weights)
        self.layout = preferred_layout(self.spec, self.device, self.cell.precision)
        self.net_format = (
            torch.channels_last if self.layout == "channels_last" else torch.contiguous_format
        )
        self.fp64 = self.cell.precision == "fp64"
        self.dtype = torch.float64 if self.fp64 else torch.float32
        self.net = net.to(self.device, self.dtype, memory_format=self.net_format)
        # Training on a GPU as llm.c trains GPT-2: the vocabulary padded, the function kept
        self.vocab_padded_to = (
            training.pad_vocab(self.net)
            if self.cell.task == "train" and self.device.type in PADDED_ON
            else None
        )

    def _place_batch(self, seed: int) -> None:
        """The synthetic batch, on the host (pinned for a GPU) and on the device."""
        x, y = synthetic_batch(self.spec, self.cell.batch_size, seed)
        if self.spec.time_major:  # the LSTM model is time-major: (T, N)
            x, y = np.ascontiguousarray(x.T), np.ascontiguousarray(y.T)
        if self.fp64 and x.dtype == np.float32:
            x = x.astype(np.float64)  # the same values, widened exactly
        self.x_host, self.y_host = torch.from_numpy(x), torch.from_numpy(y)
        if self.device.type == "cuda":
            self.x_host, self.y_host = self.x_host.pin_memory(), self.y_host.pin_memory()
        self.memory_format = self.net_format if x.ndim == 4 else torch.contiguous_format
        self.x, self.y = self._to_device()

    def _mixed_precision(self) -> None:
        """Autocast to the cell's half type (products in it, PyTorch's autocast lists), and
        fp16 training's dynamic loss scale."""
        precision = self.cell.precision
        if precision in AMP_DTYPES:
            self.autocast = lambda: torch.autocast(self.device.type, AMP_DTYPES[precision])
        else:
            self.autocast = contextlib.nullcontext
        self.scaler = (
            torch.amp.GradScaler(self.device.type)
            if precision == "fp16" and self.cell.task == "train"
            else None
        )

    def _compile_mode(self) -> str | None:
        """torch.compile's mode for the cell's (None: eager), its compiler made ready."""
        compile_mode = {"eager": None, "compile": "default", "cudagraph": "reduce-overhead"}
        if self.cell.mode not in compile_mode:
            raise CannotRun(f"unknown PyTorch mode {self.cell.mode!r}")
        mode = compile_mode[self.cell.mode]
        if mode and self.device.type == "cpu":
            import torch._inductor.config as inductor

            # With ATen's ISA lowered (ATEN_CPU_CAPABILITY), Inductor's prepacked linear
            # layers computed wrong training losses (torch 2.13.0, an AVX-512 AMD EPYC
            # limited to avx2: 2.17 against 2.38); without prepacking they agree.
            inductor.cpp.weight_prepack = not os.environ.get("ATEN_CPU_CAPABILITY")
            # Inference on the CPU as PyTorch's own CPU benchmarks run it: freezing (the
            # weights constants: BatchNorm folded into the convolutions, oneDNN's weights
            # prepacked) and the C++ wrapper (no Python between kernels). At batch 1 eager
            # ResNet-56 sends every convolution to ATen's native im2col path (its heuristic
            # for inputs of at most 20,480 values); this runs 4.5 ms down to 2.7 ms.
            frozen = self.cell.task == "infer" and self.cell.precision != "int8"
            inductor.freezing = frozen
            inductor.cpp_wrapper = frozen
        if self.cell.mode == "cudagraph":
            cudagraphs.require_cudagraphs()
        if mode:
            # Dynamo caches compiled code per code object, and every workload's
            # _forward_loss is the same one: past its recompile limit (8) later cells would
            # silently run eagerly. Each compiled cell starts from an empty cache.
            torch._dynamo.reset()
            torch._dynamo.utils.counters.clear()
        train = self.cell.task == "train"
        compiled_update = train and not self.scaler and not self._fused_update(mode)
        self.compiled_functions = 0 if not mode else 2 if compiled_update else 1
        return mode

    def _fused_update(self, mode: str | None) -> bool:
        """AdamW's update runs its fused kernel: eager cells, and compiled ones on a GPU."""
        return self.spec.optimizer == "adamw" and (not mode or self.device.type == "cuda")

    def _steps(self, weights: dict[str, np.ndarray], mode: str | None) -> dict:
        """The step the cell times (training: forward and loss, then the update; inference:
        the forward), compiled in mode; the int8 network's facts, or {}."""
        spec, cell = self.spec, self.cell
        compile_ = (lambda f: torch.compile(f, mode=mode)) if mode else (lambda f: f)
        self._loss = self._out = None
        self.positions = training.positions(spec, self.device)
        if cell.task == "train":
            self.net.train()
            self.params = [p for p in self.net.parameters()]
            # Eager cells, and compiled ones on a GPU, run AdamW's fused kernel (PyTorch
            # never traces into a fused optimizer: it runs beside the compiled forward and
            # backward, as in llm.c's and PyTorch's own GPT-2 training); a compiled update
            # on the CPU is traced from the foreach implementation.
            self.optimizer_impl = "fused" if self._fused_update(mode) else "foreach"
            self.opt = training.optimizer(spec, self.net, self.optimizer_impl)
            if spec.optimizer == "adamw" and self.optimizer_impl == "foreach":
                training.start_adamw(self.opt)
            if spec.optimizer == "sgd":
                # Zero momentum buffers from the start: the same first update as SGD's own
                # (v = g), and a compiled update that sees one state structure, so it
                # compiles once, in the first step, instead of again in the second.
                for p in self.params:
                    self.opt.state[p]["momentum_buffer"] = torch.zeros_like(p)
            self.forward_loss = compile_(self._forward_loss)
            # The scaler's update must see the inf check, so fp16 keeps it eager.
            eager_update = self.scaler or self.optimizer_impl == "fused"
            self.update = self._update if eager_update else compile_(self._update)
            self.step = self._train_step
            return {}
        self.step = self._infer_step
        if cell.precision == "int8":
            self.forward, int8_facts = self._int8(spec, weights)
            return int8_facts
        self.net.eval()
        self.forward = compile_(self.net)
        return {}

    def _int8(self, spec: Spec, weights: dict[str, np.ndarray]):
        """The PT2E int8 network, compiled for this workload (int8.py), and what its record
        says: the quantization, the quantized graph's quantize/dequantize nodes, and its
        logits' distance from this fp32 network's on the check samples. The quantization
        and its check are made once for a run of cells of one network (int8.once)."""
        from xfbench.adapters import int8
        from xfbench.adapters.torch import int8 as q8

        self.net.eval()
        to_input = q8.host_input(spec, self.memory_format)

        def make():
            converted, nodes = q8.quantize(self.net, spec, to_input)
            x = to_input(int8.check_samples(spec))
            with torch.inference_mode():
                quantized, reference = q8.compiled(converted)(x), self.net(x)
            facts = {
                **int8.drift(quantized.float().numpy(), reference.float().numpy()),
                "int8_quantization": q8.SETTINGS,
                "int8_quantize_nodes": nodes,
                "int8_cpu_isa": int8.isa(),
            }
            return converted, facts

        key = ("torch", spec.id, spec.scale, spec.input_shape)
        converted, facts = int8.once(
            key + (int8.digest(weights[k] for k in sorted(weights)),), make
        )
        self.layer_dtypes = {"quantized graph": "int8"}
        return q8.compiled(converted), {**facts, "layer_dtypes": self.layer_dtypes}

    # -- the batch ----------------------------------------------------------------
    def _to_device(self):
        x = self.x_host.to(self.device, non_blocking=True, copy=True)
        if x.ndim == 4:
            x = x.contiguous(memory_format=self.memory_format)
        return x, self.y_host.to(self.device, non_blocking=True, copy=True)

    def _batch(self):
        return self._to_device() if self.cell.data == "copied" else (self.x, self.y)

    def input_batches(self, source, seed: int, workers: int):
        from xfbench.adapters.torch.input_pipeline import batches

        return batches(
            src=source,
            batch=self.cell.batch_size,
            seed=seed,
            workers=workers,
            cuda=self.device.type == "cuda",
        )

    def feed(self, x, y) -> None:
        if self.spec.time_major:  # time-major, as the resident batch
            x, y = x.t(), y.t()
        x = x.to(self.device, self.dtype if x.is_floating_point() else None, non_blocking=True)
        self.x = x.contiguous(memory_format=self.memory_format)
        self.y = y.to(self.device, non_blocking=True).contiguous()

    def infer_samples(self, x: np.ndarray) -> np.ndarray:
        if self.spec.time_major:
            x = x.T
        if self.fp64 and x.dtype == np.float32:
            x = x.astype(np.float64)
        x = torch.from_numpy(np.ascontiguousarray(x)).to(self.device, non_blocking=True)
        self.x = x.contiguous(memory_format=self.memory_format)
        self._infer_step()
        return self.output()

    # -- steps --------------------------------------------------------------------
    def _forward_loss(self, x, y):
        with self.autocast():
            if (
                self.vocab_padded_to and self.positions is None
            ):  # GPT-2 on a GPU: no float32 logits of the whole batch
                head = getattr(self.net, self.net.order[-1])
                return training.chunked_cross_entropy(self.net.hidden(x), head, y)
            return training.cross_entropy(self.net(x), y, self.positions, self.spec.time_major)

    def _update(self):
        if self.spec.clip_norm:
            torch.nn.utils.clip_grad_norm_(self.params, self.spec.clip_norm, foreach=True)
        self.opt.step()

    def _train_step(self) -> None:
        x, y = self._batch()
        self.opt.zero_grad(set_to_none=True)
        loss = self.forward_loss(x, y)
        if self.scaler:
            self.scaler.scale(loss).backward()
            if self.spec.clip_norm:
                self.scaler.unscale_(self.opt)
                torch.nn.utils.clip_grad_norm_(self.params, self.spec.clip_norm, foreach=True)
            self.scaler.step(self.opt)
            self.scaler.update()
        else:
            loss.backward()
            self.update()
        self._loss = loss.detach()
        self._sync()

    def _infer_step(self) -> None:
        x, _ = self._batch()
        with torch.inference_mode(), self.autocast():
            self._out = self.forward(x)
        self._sync()

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def _choose_lstm_kernel(self, spec: Spec, cell: Cell) -> str:
        """Where the half-precision LSTM must run otherwise than autocast would run it,
        set it so and say why (appended to the kernel the probe saw). On the CPU, oneDNN
        has no bf16/fp16 LSTM without avx512_bf16 or AMX and raises instead of falling
        back, and ATen's LSTM under autocast computes in float32: ATen's kernels run it,
        in that type, cast explicitly. On CUDA, autocast would run a bf16 LSTM in fp16
        (precision.py): it runs in bf16, cast explicitly."""
        if not spec.time_major or cell.precision not in AMP_DTYPES:
            return ""
        dtype = AMP_DTYPES[cell.precision]
        if self.device.type == "cuda":
            if dtype == torch.bfloat16:
                self.net.explicit_dtype = dtype
                return " (bf16 cast explicitly: autocast runs cuDNN's LSTM in fp16)"
            return ""
        from xfbench.adapters.torch.lstm import onednn_runs_lstm

        if not onednn_runs_lstm(dtype):
            # ATen's LSTM under autocast runs in float32 on the CPU: cast explicitly.
            self.net.onednn = False
            self.net.explicit_dtype = dtype
            return f" (oneDNN has no {cell.precision} LSTM on this CPU; cast explicitly)"
        return ""

    def compile_facts(self) -> dict:
        if not self.compiled_functions:
            return {}
        counters = torch._dynamo.utils.counters
        graphs = int(counters["stats"]["unique_graphs"])
        breaks = counters["graph_break"]
        facts = {
            "compiled_graphs": graphs,
            "graph_breaks": int(sum(breaks.values())),
            "graph_break_reasons": sorted({r.splitlines()[0][:120] for r in breaks}),
        }
        if graphs < self.compiled_functions:
            raise RuntimeError(
                f"torch.compile fell back to eager: {graphs} graph(s) compiled for "
                f"{self.compiled_functions} compiled function(s) (Dynamo's recompile limit, "
                "or a function it could not trace)"
            )
        return facts

    def replay_facts(self) -> dict:
        return cudagraphs.replay_facts(self.step, least=1) if self.cell.mode == "cudagraph" else {}

    # -- results ------------------------------------------------------------------
    def layer_times(self, steps: int) -> list[dict]:
        from xfbench.adapters import get_adapter
        from xfbench.adapters.torch.layer_times import measure

        reason = get_adapter("torch").layer_times_reason(self.cell)
        if reason:
            raise CannotRun(reason)

        return measure(self, steps)

    def loss(self) -> float:
        return float(self._loss)

    def output(self) -> np.ndarray:
        out = self._out.to(self.dtype).cpu().numpy()
        return out.transpose(1, 0, 2) if self.spec.time_major else out  # back to (N, T, C)

    def weights(self) -> dict[str, np.ndarray]:
        out = W.from_module(self.spec, self.net, np.float64 if self.fp64 else np.float32)
        return training.unpadded(out, self.spec.vocab) if self.vocab_padded_to else out

    def export_onnx(self, path: str) -> None:
        """torch.onnx.export with the dynamo exporter (torch 2.13's default; it writes
        through onnxscript), at the suite's opset, weights as external data."""
        from xfbench.exchange.graph import INPUT, OPSET, OUTPUT

        net = _BatchFirst(self.net) if self.spec.time_major else self.net
        x = self.x.T if self.spec.time_major else self.x  # back to (N, T) for the LSTM model
        was_training = self.net.training
        self.net.eval()
        saved = (torch.backends.cudnn.conv.fp32_precision, torch.backends.cudnn.rnn.fp32_precision)
        try:
            # torch.export reads cuDNN's legacy allow_tf32 flag, which raises in torch 2.13
            # when conv and rnn are both "ieee"; the flag shapes no exported node, so it is
            # set to its default for the export and put back after.
            torch.backends.cudnn.conv.fp32_precision = "tf32"
            torch.backends.cudnn.rnn.fp32_precision = "tf32"
            with torch.no_grad():
                torch.onnx.export(
                    net,
                    (x,),
                    str(path),
                    input_names=[INPUT],
                    output_names=[OUTPUT],
                    opset_version=OPSET,
                    dynamo=True,
                    external_data=True,
                    verbose=False,
                )
        finally:
            torch.backends.cudnn.conv.fp32_precision, torch.backends.cudnn.rnn.fp32_precision = (
                saved
            )
            self.net.train(was_training)

    def close(self) -> None:
        self.net = self.x = self.y = self._loss = self._out = None
        if self.device.type == "cuda":
            torch.cuda.empty_cache()


class _BatchFirst(torch.nn.Module):
    """The time-major LSTM model seen batch-first, as the exchange format is: (N, T) -> (N, T, V)."""

    def __init__(self, net: torch.nn.Module):
        super().__init__()
        self.net = net

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.net(tokens.transpose(0, 1)).transpose(0, 1)
