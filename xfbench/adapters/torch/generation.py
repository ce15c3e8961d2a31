"""GPT-2's greedy decoding in PyTorch with a static key/value cache (xfbench/generation).

The network is adapters/torch/transformer.py's, with the canonical weights; the cache is
one (B, heads, ISL + OSL, dh) tensor per layer for keys and one for values, allocated
once. Prefill runs the prompt through scaled_dot_product_attention with is_causal (the
fused CPU/CUDA kernels) and writes its keys and values to positions [0, ISL); each decode
step writes one position with index_copy_ and attends to the whole cache under an
explicit mask of the positions written so far (is_causal does not mean that for one query
against a longer cache). The position is a tensor, so that the compiled step is traced
once and never recompiles; greedy's argmax is inside the step, on the device.

Modes: eager; compile (torch.compile of prefill and of the decode step; on the CPU
with freezing and the C++ wrapper, and in fp32 max-autotune: _compiler); cudagraph (CUDA: the same
with mode="reduce-overhead", which replays the decode step as a CUDA graph: the cache
tensors are marked static addresses, so that the graph may write them in place, and the
cell proves its graphs replayed: cudagraphs.py).
"""

from __future__ import annotations

import os
import time

import numpy as np
import torch
import torch.nn.functional as F

from xfbench.adapters.base import MATH_DTYPES, Generator
from xfbench.adapters.torch import cudagraphs
from xfbench.adapters.torch.device_memory import CudaPeak
from xfbench.adapters.torch.networks import build_network
from xfbench.adapters.torch.weights import load
from xfbench.models import Spec
from xfbench.models import layers as L

COMPILE_MODES = {"eager": None, "compile": "default", "cudagraph": "reduce-overhead"}


def write(cache: torch.Tensor, position: torch.Tensor, new: torch.Tensor) -> None:
    """new (B, heads, n, dh) into cache at positions position.. (an int64 tensor of one)."""
    cache.index_copy_(2, position + torch.arange(new.shape[2], device=cache.device), new)


class CachedGPT(torch.nn.Module):
    """prefill(prompt) and decode(tokens, position) over one static cache."""

    def __init__(self, spec: Spec, net: torch.nn.Module, batch: int, length: int):
        super().__init__()
        self.net = net
        block = spec.layer(L.TransformerBlock)[0]
        d = spec.layer(L.TokenEmbedding)[0].dim
        self.blocks = [getattr(net, b.name) for b in spec.layer(L.TransformerBlock)]
        self.heads, self.dh, self.length = block.heads, d // block.heads, length
        # One tensor per layer: the compiled step writes each in place (a slice of one
        # tensor of every layer would be written back whole, each layer, each step)
        param = next(net.parameters())
        shape = (batch, self.heads, length, self.dh)
        self.keys, self.values = [], []
        for i in range(len(self.blocks)):
            for name, kept in (("keys", self.keys), ("values", self.values)):
                self.register_buffer(f"{name}{i}", param.new_zeros(shape))
                kept.append(getattr(self, f"{name}{i}"))
        self.register_buffer("slots", torch.arange(length, device=param.device))

    def _qkv(self, block, x: torch.Tensor):
        n, t, d = x.shape
        qkv = block.attn.qkv(block.ln1(x)).view(n, t, 3, self.heads, self.dh)
        return qkv.permute(2, 0, 3, 1, 4)  # (3, N, heads, T, dh)

    def _finish(self, block, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        n, t, d = x.shape
        x = x + block.attn.out(y.transpose(1, 2).reshape(n, t, d))
        return x + block.mlp(block.ln2(x))

    def _head(self, x: torch.Tensor):
        logits = self.net.lm(self.net.final_ln(x))
        return logits.argmax(-1), logits

    def prefill(self, prompt: torch.Tensor):
        """prompt (B, ISL) -> the next token (B,) and its logits (B, vocab)."""
        x = self.net.embed(prompt)
        start = torch.zeros(1, dtype=torch.int64, device=prompt.device)
        for i, block in enumerate(self.blocks):
            q, k, v = self._qkv(block, x)
            write(self.keys[i], start, k)
            write(self.values[i], start, v)
            x = self._finish(block, x, F.scaled_dot_product_attention(q, k, v, is_causal=True))
        return self._head(x[:, -1])

    def decode(self, tokens: torch.Tensor, position: torch.Tensor):
        """tokens (B,) at position (an int64 tensor of one) -> the next (B,), its logits."""
        embed = self.net.embed
        x = (F.embedding(tokens, embed.word) + embed.position[position])[:, None]
        seen = (self.slots <= position)[None, None, None]  # (1, 1, 1, L): written so far
        for i, block in enumerate(self.blocks):
            q, k, v = self._qkv(block, x)
            write(self.keys[i], position, k)
            write(self.values[i], position, v)
            y = F.scaled_dot_product_attention(q, self.keys[i], self.values[i], attn_mask=seen)
            x = self._finish(block, x, y)
        return self._head(x[:, 0])


def _compiler(mode_name: str, device_type: str, precision: str = "fp32") -> str | None:
    """torch.compile's mode for a cell's mode (None: eager), Inductor made ready. On the
    CPU, compile is PyTorch's own CPU inference path: freezing (the weights constants;
    the cache, a buffer the step writes, is not frozen), the C++ wrapper and prepacked
    weights; in fp32 max-autotune too, which sets Inductor's C++ GEMM templates against
    ATen's oneMKL calls and keeps the faster: at batch 1 the decode step ran 44 ms eager,
    32 ms compiled with oneMKL's products and 16-18 ms so (GPT-2, 2 threads of a Zen 4
    EPYC; docs/generation.md). Not in bf16: autotuning times each product alone, its
    weights in cache, while a decode step streams them from memory, where the bf16
    templates it chose read 18-21 GB/s against oneDNN's prepacked products' 30-34 (batch-1
    TPOT 12.0-13.4 ms against 7.5-8.4, batch 8 15.9 against 15.1; 64/64, 2 threads of a
    Zen 5 EPYC)."""
    mode = COMPILE_MODES[mode_name]
    if mode is None:
        return None
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    if mode_name == "cudagraph":
        cudagraphs.require_cudagraphs()
    if device_type != "cpu":
        return mode
    import torch._inductor.config as inductor

    inductor.freezing = inductor.cpp_wrapper = True
    # as the inference cells (workload.py): no prepacked linear layers with ATen's ISA
    # lowered, where they computed wrong numbers
    inductor.cpp.weight_prepack = not os.environ.get("ATEN_CPU_CAPABILITY")
    return "max-autotune" if precision == "fp32" else mode


def _inductor_facts(mode: str) -> dict:
    import torch._inductor.config as inductor

    return {
        "inductor_freezing": inductor.freezing,
        "inductor_cpp_wrapper": inductor.cpp_wrapper,
        "inductor_weight_prepack": inductor.cpp.weight_prepack,
        **(
            {"inductor_gemm_backends": inductor.max_autotune_gemm_backends}
            if mode == "max-autotune"
            else {}
        ),
    }


class StepClock:
    """When each step of a generation ended, on the device's own clock: CUDA events,
    read once after the last step; on the CPU, whose steps the host runs, perf_counter."""

    def __init__(self, device: torch.device, steps: int):
        self.cuda = device.type == "cuda"
        if self.cuda:
            self.events = [torch.cuda.Event(enable_timing=True) for _ in range(steps + 1)]
        self.stamps: list[float] = []

    def start(self) -> None:
        self.mark()

    def mark(self) -> None:
        if self.cuda:
            self.events[len(self.stamps)].record()
            self.stamps.append(0.0)
        else:
            self.stamps.append(time.perf_counter())

    def seconds(self) -> list[float]:
        """Each step's seconds, from the start (after the device finished them all)."""
        if self.cuda:
            torch.cuda.synchronize()
            marks = self.events[: len(self.stamps)]
            return [a.elapsed_time(b) / 1000 for a, b in zip(marks, marks[1:])]
        return [b - a for a, b in zip(self.stamps, self.stamps[1:])]


def kernel_profile(events, top: int = 8) -> dict:
    """A profiler's device kernels (kineto's CUDA activity): how many, their device time
    in all, and the costliest by name, to say what holds a step once launches do not."""
    spent: dict[str, list] = {}
    for e in events:
        if str(getattr(e, "device_type", "")).endswith("CUDA"):
            calls_us = spent.setdefault(e.name, [0, 0.0])
            calls_us[0] += 1
            calls_us[1] += e.time_range.elapsed_us()
    costliest = sorted(spent.items(), key=lambda kv: -kv[1][1])[:top]
    return {
        "kernels_per_decode_step": sum(calls for calls, _ in spent.values()),
        "decode_step_kernel_us": round(sum(us for _, us in spent.values()), 1),
        "decode_step_kernels": [
            {"name": name[:120], "calls": calls, "us": round(us, 1)}
            for name, (calls, us) in costliest
        ],
    }


class TorchGenerator(CudaPeak, Generator):
    def __init__(self, spec: Spec, cell, weights: dict[str, np.ndarray]):
        self.device = torch.device(cell.device)
        self.resident = True  # run(): the host out of the decode loop
        net = build_network(spec)
        load(spec, net, weights)
        # bf16: the weights, and with them the cache and every activation, in bfloat16 (the
        # weights arrive rounded to it: check.decoding_weights); LayerNorm, softmax and the
        # products' sums run in float32 inside PyTorch's bf16 kernels
        net = net.to(self.device, dtype=getattr(torch, MATH_DTYPES[cell.precision])).eval()
        length = cell.prompt_tokens + cell.new_tokens
        self.model = CachedGPT(spec, net, cell.batch_size, length)
        self.cache_bytes = sum(
            t.numel() * t.element_size() for t in self.model.keys + self.model.values
        )
        mode = _compiler(cell.mode, self.device.type, cell.precision)
        self.graphs = cell.mode == "cudagraph"
        if self.graphs:  # written in place by the graph: never copied into it as inputs
            for t in self.model.keys + self.model.values:
                torch._dynamo.mark_static_address(t)
        self.decode_steps = cell.new_tokens - 1
        wrap = (lambda f: torch.compile(f, mode=mode, dynamic=False)) if mode else (lambda f: f)
        self._prefill, self._decode = wrap(self.model.prefill), wrap(self.model.decode)
        self.compiled_functions = 2 if mode else 0
        self.position = 0
        self._logits = None
        self.info = {
            "device_name": (
                torch.cuda.get_device_name(self.device) if self.device.type == "cuda" else "cpu"
            ),
            "attention_kernel": "scaled_dot_product_attention (prefill is_causal; decode "
            "an explicit mask over the static cache)",
            "cache_write": "index_copy_ at a position tensor",
            "weights_dtype": str(next(net.parameters()).dtype).removeprefix("torch."),
            "cache_dtype": str(self.model.keys[0].dtype).removeprefix("torch."),
            **(_inductor_facts(mode) if mode and self.device.type == "cpu" else {}),
            **({"compile_mode": mode} if mode else {}),
        }

    def _own(self, t: torch.Tensor) -> torch.Tensor:
        """t, where it outlives the next call of a compiled step, as a tensor of ours: in
        inference, CUDA graph trees overwrite a graphed call's outputs at the next call (a
        graph's output fed back as the next step's input failed the H100's cells: "accessing
        tensor output of CUDAGraphs that has been overwritten by a subsequent run"), so the
        token and the last logits are copied out, as gpt-fast does; one small copy a step."""
        return t.clone() if self.graphs else t

    def _sync(self, out) -> np.ndarray:
        tokens, logits = out
        self._logits = self._own(logits)
        return tokens.cpu().numpy()  # a host copy: it waits for the device

    def run(self, prompt: np.ndarray, new_tokens: int, keep: list[int] | None = None):
        """The whole generation with the host out of the loop: each step's token, on the
        device, is the next step's input, the position advances on the device, each step's
        end is a device event (a timestamp on the CPU, whose steps the host runs anyway),
        and the host reads the tokens (and the kept rows' logits) once, at the end.
        -> (tokens (B, OSL), TTFT s, each decode step's s, kept logits or None)"""
        if not self.resident:
            return None
        dev = self.device
        clock = StepClock(dev, new_tokens)
        with torch.inference_mode():
            x = torch.from_numpy(prompt).to(dev)
            out = torch.empty((x.shape[0], new_tokens), dtype=torch.int64, device=dev)
            position = torch.full((1,), x.shape[1], dtype=torch.int64, device=dev)
            kept = None
            clock.start()
            token, logits = self._prefill(x)
            for j in range(new_tokens):
                if j:
                    token, logits = self._decode(self._own(token), position)
                    position += 1
                out[:, j] = token
                if keep:
                    kept = (
                        kept
                        if kept is not None
                        else logits.new_empty(
                            (len(keep), new_tokens, logits.shape[-1]), dtype=torch.float32
                        )
                    )
                    kept[:, j] = logits[keep]
                clock.mark()
            self._logits = self._own(logits)
            tokens = out.cpu().numpy()  # the one read of the tokens: it waits for the device
            logits_kept = kept.cpu().numpy() if kept is not None else None
        ttft, *gaps = clock.seconds()
        self.position = prompt.shape[1] + new_tokens - 1
        return tokens, ttft, gaps, logits_kept

    def decode_profile(self, tokens: np.ndarray) -> dict:
        """One decode step under the profiler (CUDA only; the base's Nones elsewhere)."""
        if self.device.type != "cuda":
            return super().decode_profile(tokens)
        from torch.profiler import ProfilerActivity, profile

        with torch.inference_mode():
            token = torch.from_numpy(tokens).to(self.device)
            position = torch.full((1,), self.position, dtype=torch.int64, device=self.device)
            self._decode(token, position)  # any first-call work outside the count
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                self._decode(token, position)
                torch.cuda.synchronize()
        return kernel_profile(prof.events())

    def prefill(self, prompt: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            prompt = torch.from_numpy(prompt).to(self.device)
            out = self._sync(self._prefill(prompt))
        self.position = prompt.shape[1]
        return out

    def decode(self, tokens: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            position = torch.tensor([self.position], device=self.device)
            out = self._sync(self._decode(torch.from_numpy(tokens).to(self.device), position))
        self.position += 1
        return out

    def logits(self) -> np.ndarray:
        return self._logits.float().cpu().numpy()

    def compile_facts(self) -> dict:
        if not self.compiled_functions:
            return {}
        counters = torch._dynamo.utils.counters
        graphs = int(counters["stats"]["unique_graphs"])
        if graphs < self.compiled_functions or counters["graph_break"]:
            raise RuntimeError(
                f"torch.compile did not compile prefill and decode whole: {graphs} graph(s), "
                f"{int(sum(counters['graph_break'].values()))} graph break(s)"
            )
        return {"compiled_graphs": graphs, "graph_breaks": 0}

    def replay_facts(self, generation) -> dict:
        if not self.graphs:
            return {}
        return cudagraphs.replay_facts(generation, least=self.decode_steps)

    def close(self) -> None:
        del self.model, self._prefill, self._decode
        if self.device.type == "cuda":
            torch.cuda.empty_cache()
