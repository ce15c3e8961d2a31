"""GPT-2's greedy decoding in PyTorch with a static key/value cache (xfbench/generation).

The network is adapters/torch/transformer.py's, with the canonical weights; the cache is
one (B, heads, ISL + OSL, dh) tensor per layer for keys and one for values, allocated
once. Prefill runs the prompt through scaled_dot_product_attention with is_causal (the
fused CPU/CUDA kernels) and writes its keys and values to positions [0, ISL); each decode
step writes one position with index_copy_ and attends to the whole cache under an
explicit mask of the positions written so far (is_causal does not mean that for one query
against a longer cache). The position and the output tokens are tensors on the device
that the step reads and writes, so that the compiled step is traced once, never
recompiles, and leaves nothing of the loop to run between steps; greedy's argmax is inside
the step.

Modes: eager; compile (torch.compile of prefill and of the decode step, fullgraph; on the
CPU with freezing and the C++ wrapper, and in fp32 max-autotune: _compiler; on a GPU with
coordinate-descent tuning and the step written as PyTorch's own fast decoding writes it:
CachedGPT); cudagraph (CUDA: the same with mode="reduce-overhead", which replays each
decode step as a CUDA graph: the tensors the steps write are marked static addresses, so
that the graph may write them in place, and the cell proves its graphs replayed:
cudagraphs.py); loop (CUDA: the compiled step without graph trees, every decode step of
a generation captured by hand into one CUDA graph, each step's end an event inside it).
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
from xfbench.models import Spec, seeded
from xfbench.models import layers as L

# loop: the compiled step without Inductor's graph trees, every decode step of a
# generation captured by hand into one CUDA graph (below)
COMPILE_MODES = {
    "eager": None,
    "compile": "default",
    "cudagraph": "reduce-overhead",
    "loop": "default",
}


def write(cache: torch.Tensor, position: torch.Tensor, new: torch.Tensor) -> None:
    """new (B, heads, n, dh) into cache at positions position.. (an int64 tensor of one)."""
    cache.index_copy_(2, position + torch.arange(new.shape[2], device=cache.device), new)


class CachedGPT(torch.nn.Module):
    """prefill(prompt) and step() over one static cache, the output tokens and the
    position held on the device: a step reads its input token from `out`, writes the next
    there and advances `position`, so that nothing of the decode loop runs outside it.

    products "linear" is F.linear (addmm with the bias); "mm+bias" a product and an add,
    which Inductor, with coordinate-descent tuning, turns into one fused reduction at
    batch 1 on CUDA (it decomposes addmm only on the CPU). attention "sdpa" is
    scaled_dot_product_attention under the mask of the positions written; "math" the
    same function written out (q k^T and softmax in float32, the mask, times v), which
    Inductor generates with the step around it instead of calling a separate kernel."""

    def __init__(
        self,
        spec: Spec,
        net: torch.nn.Module,
        *,
        batch: int,
        prompt_tokens: int,
        new_tokens: int,
        products: str = "linear",
        attention: str = "sdpa",
    ):
        super().__init__()
        self.net = net
        block = spec.layer(L.TransformerBlock)[0]
        d = spec.layer(L.TokenEmbedding)[0].dim
        self.blocks = [getattr(net, b.name) for b in spec.layer(L.TransformerBlock)]
        self.heads, self.dh = block.heads, d // block.heads
        self.prompt_tokens, self.length = prompt_tokens, prompt_tokens + new_tokens
        self.products, self.attention = products, attention
        # One tensor per layer: the compiled step writes each in place (a slice of one
        # tensor of every layer would be written back whole, each layer, each step)
        param = next(net.parameters())
        shape = (batch, self.heads, self.length, self.dh)
        self.keys, self.values = [], []
        for i in range(len(self.blocks)):
            for name, kept in (("keys", self.keys), ("values", self.values)):
                self.register_buffer(f"{name}{i}", param.new_zeros(shape))
                kept.append(getattr(self, f"{name}{i}"))
        self.register_buffer("slots", torch.arange(self.length, device=param.device))
        int64 = {"dtype": torch.int64, "device": param.device}
        # a spare column: a step after a generation's last (the host's) has one to write
        self.register_buffer("out", torch.zeros((batch, new_tokens + 1), **int64))
        self.register_buffer("position", torch.zeros(1, **int64))

    def state(self) -> list[torch.Tensor]:
        """The tensors the steps write in place (static addresses for CUDA graphs)."""
        return [*self.keys, *self.values, self.out, self.position]

    def _linear(self, layer: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
        if self.products == "linear":
            return layer(x)
        y = x.reshape(-1, x.shape[-1]) @ layer.weight.t()
        return (y + layer.bias).view(*x.shape[:-1], -1)

    def _qkv(self, block, x: torch.Tensor):
        n, t, d = x.shape
        qkv = self._linear(block.attn.qkv, block.ln1(x)).view(n, t, 3, self.heads, self.dh)
        return qkv.permute(2, 0, 3, 1, 4)  # (3, N, heads, T, dh)

    def _finish(self, block, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        n, t, d = x.shape
        x = x + self._linear(block.attn.out, y.transpose(1, 2).reshape(n, t, d))
        mlp = block.mlp
        h = F.gelu(self._linear(mlp.fc, block.ln2(x)), approximate=mlp.approximate)
        return x + self._linear(mlp.proj, h)

    def _attend(self, q, k, v, seen):
        if self.attention == "sdpa":
            return F.scaled_dot_product_attention(q, k, v, attn_mask=seen)
        # the scores summed in float32 from bf16 inputs, as the JAX adapter's einsum with
        # preferred_element_type=float32 (a bf16 product rounds them to bf16: 257 to 256);
        # compiled on a GPU (coordinate-descent tuning), Inductor makes the one-query
        # product a reduction that the upcast fuses into: no float32 copy of the cache
        scores = (q.float() @ k.float().transpose(-2, -1)) * self.dh**-0.5
        weights = torch.softmax(scores.masked_fill(~seen, float("-inf")), dim=-1)
        return weights.to(v.dtype) @ v

    def _head(self, x: torch.Tensor):
        logits = self.net.lm(self.net.final_ln(x))
        return logits.argmax(-1), logits

    def prefill(self, prompt: torch.Tensor) -> torch.Tensor:
        """prompt (B, ISL): the cache's first ISL positions, the first new token into
        out[:, 0], the position set to ISL; -> its logits (B, vocab)."""
        x = self.net.embed(prompt)
        start = torch.zeros(1, dtype=torch.int64, device=prompt.device)
        for i, block in enumerate(self.blocks):
            q, k, v = self._qkv(block, x)
            write(self.keys[i], start, k)
            write(self.values[i], start, v)
            x = self._finish(block, x, F.scaled_dot_product_attention(q, k, v, is_causal=True))
        token, logits = self._head(x[:, -1])
        self.out.select(1, 0).copy_(token)
        self.position.fill_(prompt.shape[1])
        return logits

    def step(self) -> torch.Tensor:
        """One decode step: the token at out[:, j - 1] (j = position - ISL + 1) at the
        cache position `position`; the next token into out[:, j], position + 1;
        -> its logits (B, vocab)."""
        column = self.position - self.prompt_tokens
        tokens = self.out.index_select(1, column)[:, 0]
        embed = self.net.embed
        x = (F.embedding(tokens, embed.word) + embed.position[self.position])[:, None]
        seen = (self.slots <= self.position)[None, None, None]  # (1, 1, 1, L): written so far
        for i, block in enumerate(self.blocks):
            q, k, v = self._qkv(block, x)
            write(self.keys[i], self.position, k)
            write(self.values[i], self.position, v)
            x = self._finish(block, x, self._attend(q, self.keys[i], self.values[i], seen))
        token, logits = self._head(x[:, 0])
        self.out.index_copy_(1, column + 1, token[:, None])
        self.position.add_(1)
        return logits


def _compiler(mode_name: str, device_type: str, precision: str = "fp32") -> str | None:
    """torch.compile's mode for a cell's mode (None: eager), Dynamo reset; the Inductor
    config it compiles under is _inductor_settings'. On a GPU, with coordinate-descent
    tuning. On the CPU, compile is PyTorch's own CPU inference path: freezing (the weights
    constants; the cache, a buffer the step writes, is not frozen), the C++ wrapper and
    prepacked weights; in fp32 max-autotune too, which sets Inductor's C++ GEMM templates against
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
    return "max-autotune" if device_type == "cpu" and precision == "fp32" else mode


def _inductor_settings(device_type: str) -> dict:
    """The Inductor config a compiled cell's steps compile under (_compiler says why)."""
    if device_type != "cpu":
        # PyTorch's own fast decoding (gpt-fast) sets it on a GPU: the Triton kernels'
        # launch settings searched, and batch-1 products decomposed into fused reductions
        return {"coordinate_descent_tuning": True}
    return {
        "coordinate_descent_tuning": False,
        "freezing": True,
        "cpp_wrapper": True,
        # as the inference cells (workload.py): no prepacked linear layers with ATen's ISA
        # lowered, where they computed wrong numbers
        "cpp.weight_prepack": not os.environ.get("ATEN_CPU_CAPABILITY"),
    }


class InductorSettings:
    """Inductor's config is the process's: a compiled cell's settings hold while its
    generators live, and the values they replaced come back when the last one closes, so
    that a later cell inherits nothing (token serving holds a generator per bucket and
    closes them in the order built, so each cannot simply restore what it found)."""

    def __init__(self):
        self.replaced: dict = {}
        self.holders = 0

    def hold(self, settings: dict) -> None:
        import torch._inductor.config as inductor

        for key, value in settings.items():
            self.replaced.setdefault(key, getattr(inductor, key))
            setattr(inductor, key, value)
        self.holders += 1

    def release(self) -> None:
        import torch._inductor.config as inductor

        self.holders -= 1
        if self.holders == 0:
            for key, value in self.replaced.items():
                setattr(inductor, key, value)
            self.replaced.clear()


INDUCTOR = InductorSettings()


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
        # bf16: the weights, and with them the cache and every activation, in bfloat16 (the
        # weights arrive rounded to it: check.decoding_weights); LayerNorm, softmax and the
        # products' sums run in float32 inside PyTorch's bf16 kernels
        dtype = getattr(torch, MATH_DTYPES[cell.precision])
        self.spec, self.made = spec, weights if isinstance(weights, seeded.Made) else None
        if self.made:
            net = made_here(spec, self.device, dtype, self.made.seed)
        else:
            net = build_network(spec)
            load(spec, net, weights)
            net = net.to(self.device, dtype=dtype).eval()
        # compiled on a GPU, the step as PyTorch's own fast decoding writes it (CachedGPT);
        # eager and the CPU keep the fused kernels they run fastest (addmm, SDPA)
        fused_by_inductor = self.device.type == "cuda" and cell.mode != "eager"
        self.model = CachedGPT(
            spec,
            net,
            batch=cell.batch_size,
            prompt_tokens=cell.prompt_tokens,
            new_tokens=cell.new_tokens,
            products="mm+bias" if fused_by_inductor else "linear",
            attention="math" if fused_by_inductor else "sdpa",
        )
        self.cache_bytes = sum(
            t.numel() * t.element_size() for t in self.model.keys + self.model.values
        )
        mode = _compiler(cell.mode, self.device.type, cell.precision)
        self.inductor_held = bool(mode)  # released at close
        if mode:
            INDUCTOR.hold(_inductor_settings(self.device.type))
        self.graphs = cell.mode == "cudagraph"  # Inductor's graph trees, a graph a step
        self.loop = cell.mode == "loop"  # one graph of every decode step, captured here
        if self.graphs:  # written in place by the graph: never copied into it as inputs
            for t in self.model.state():
                torch._dynamo.mark_static_address(t)
        self.decode_steps = cell.new_tokens - 1
        wrap = (
            (lambda f: torch.compile(f, mode=mode, dynamic=False, fullgraph=True))
            if mode
            else (lambda f: f)
        )
        self._prefill, self._step = wrap(self.model.prefill), wrap(self.model.step)
        self.compiled_functions = 2 if mode else 0
        self._captured: dict = {}  # the loop mode's graph, per rows of logits kept
        self._logits = None
        self.info = {
            "device_name": (
                torch.cuda.get_device_name(self.device) if self.device.type == "cuda" else "cpu"
            ),
            "attention_kernel": (
                "scaled_dot_product_attention (prefill is_causal; decode "
                + (
                    "written out: q k^T and softmax in float32, the mask, times v, "
                    "generated by Inductor with the step)"
                    if self.model.attention == "math"
                    else "an explicit mask over the static cache)"
                )
            ),
            "cache_write": "index_copy_ at a position tensor",
            "decode_products": (
                "mm + bias (Inductor's fused reduction at batch 1)"
                if self.model.products == "mm+bias"
                else "linear (addmm)"
            ),
            "decode_step_inputs": "none: the token, the position and the output write "
            "on the device, inside the step",
            "weights_dtype": str(next(net.parameters()).dtype).removeprefix("torch."),
            "cache_dtype": str(self.model.keys[0].dtype).removeprefix("torch."),
            **(_inductor_facts(mode) if mode and self.device.type == "cpu" else {}),
            **(
                {
                    "compile_mode": mode,
                    "fullgraph": True,
                    "coordinate_descent_tuning": _coordinate_descent(),
                }
                if mode
                else {}
            ),
            **({"decode_steps_per_graph": self.decode_steps} if self.loop else {}),
        }

    def _own(self, t: torch.Tensor) -> torch.Tensor:
        """t, where it outlives the next call of a compiled step, as a tensor of ours: in
        inference, CUDA graph trees overwrite a graphed call's outputs at the next call
        ("accessing tensor output of CUDAGraphs that has been overwritten by a subsequent
        run"), so the last logits are copied out, once a generation."""
        return t.clone() if self.graphs or self.loop else t

    def _tokens(self) -> np.ndarray:
        """The generation's tokens on the host: a copy (on the CPU too), never the buffer
        the next generation writes."""
        return self.model.out[:, :-1].to("cpu", copy=True).numpy()

    def run(self, prompt: np.ndarray, new_tokens: int, keep: list[int] | None = None):
        """The whole generation with the host out of the loop: each step reads its token
        and position on the device and writes the next there, each step's end is a device
        event (a timestamp on the CPU, whose steps the host runs anyway), and the host
        reads the tokens (and the kept rows' logits) once, at the end.
        -> (tokens (B, OSL), TTFT s, each decode step's s, kept logits or None)"""
        if not self.resident:
            return None
        with torch.inference_mode():
            x = torch.from_numpy(prompt).to(self.device)
            if self.loop:
                return self._run_graph(x, new_tokens, tuple(keep or ()))
            clock = StepClock(self.device, new_tokens)
            kept = None
            clock.start()
            logits = self._prefill(x)
            for j in range(new_tokens):
                if j:
                    logits = self._step()
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
            tokens = self._tokens()  # the one read of the tokens: it waits for the device
            logits_kept = kept.cpu().numpy() if kept is not None else None
        ttft, *gaps = clock.seconds()
        return tokens, ttft, gaps, logits_kept

    def _capture(self, x: torch.Tensor, new_tokens: int, rows: tuple):
        """Every decode step of a generation as one CUDA graph, captured by hand from the
        compiled step (run first on a side stream, as capture requires), each step's end
        an event of its own inside the graph, so that each step is still timed. The graph
        reads the token and position that the prefill before it leaves in the buffers."""
        steps = new_tokens - 1
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            self._prefill(x)
            for _ in range(min(2, steps)):
                self._step()
        torch.cuda.current_stream(self.device).wait_stream(side)
        index = torch.tensor(rows, dtype=torch.int64, device=self.device) if rows else None
        kept = None
        if rows:
            kept = torch.empty(
                (len(rows), new_tokens, self.model.net.embed.word.shape[0]),
                dtype=torch.float32,
                device=self.device,
            )
        ends = [torch.cuda.Event(enable_timing=True, external=True) for _ in range(steps)]

        def steps_of_a_generation():
            logits = None
            for j in range(steps):
                logits = self._step()
                if rows:
                    kept[:, j + 1] = logits.index_select(0, index)
                ends[j].record()
            return logits

        replay, last = capture_graph(steps_of_a_generation)
        return replay, ends, last, kept, index

    def _run_graph(self, x: torch.Tensor, new_tokens: int, rows: tuple):
        if rows not in self._captured:
            self._captured[rows] = self._capture(x, new_tokens, rows)
        replay, ends, last, kept, index = self._captured[rows]
        start, prefilled = (torch.cuda.Event(enable_timing=True) for _ in range(2))
        start.record()
        logits = self._prefill(x)
        if rows:
            kept[:, 0] = logits.index_select(0, index)
        prefilled.record()
        replay()
        torch.cuda.synchronize(self.device)
        marks = [prefilled, *ends]
        gaps = [a.elapsed_time(b) / 1000 for a, b in zip(marks, marks[1:])]
        self._logits = self._own(last if new_tokens > 1 else logits)
        tokens = self._tokens()
        return (
            tokens,
            start.elapsed_time(prefilled) / 1000,
            gaps,
            (kept.cpu().numpy() if rows else None),
        )

    def decode_profile(self, tokens: np.ndarray) -> dict:
        """One decode step under the profiler (CUDA only; the base's Nones elsewhere)."""
        if self.device.type != "cuda":
            return super().decode_profile(tokens)
        from torch.profiler import ProfilerActivity, profile

        with torch.inference_mode():
            self.model.out[:, 0] = torch.from_numpy(tokens).to(self.device)
            self.model.position.fill_(self.model.prompt_tokens)
            self._step()  # any first-call work outside the count
            self.model.position.fill_(self.model.prompt_tokens)
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                self._step()
                torch.cuda.synchronize()
        return kernel_profile(prof.events())

    def reference_logits(self, sequence: np.ndarray) -> np.ndarray:
        """The float32 logits (B, T, vocab) of the same network with no cache, every
        position given every token before it (teacher-forced over sequence (B, T)), its
        weights made again on the device in float32 (rounded to the cell's type first):
        the check of a decoder too large for the host's float64 reference."""
        if self.made is None:
            raise ValueError("reference_logits: the weights were not made on the device")
        cell_dtype = self.model.keys[0].dtype
        with torch.inference_mode():
            if cell_dtype == torch.float32:
                net = self.model.net  # the cell's own weights, already float32
            else:
                net = made_here(self.spec, self.device, cell_dtype, self.made.seed)
                net = net.to(torch.float32)
            tokens = torch.from_numpy(sequence).to(self.device)
            out = net(tokens).float().cpu().numpy()
            del net
        return out

    def prefill(self, prompt: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            self._logits = self._own(self._prefill(torch.from_numpy(prompt).to(self.device)))
            return self._tokens()[:, 0]

    def decode(self, tokens: np.ndarray) -> np.ndarray:
        """The host's step: tokens into the column the step reads, then the step."""
        with torch.inference_mode():
            column = int(self.model.position) - self.model.prompt_tokens
            self.model.out[:, column] = torch.from_numpy(tokens).to(self.device)
            self._logits = self._own(self._step())
            return self.model.out[:, column + 1].to("cpu", copy=True).numpy()

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
        if self.graphs:
            return cudagraphs.replay_facts(generation, least=self.decode_steps)
        if self.loop:
            return cudagraphs.replay_facts(generation, least=1)
        return {}

    def close(self) -> None:
        del self.model, self._prefill, self._step, self._captured
        if self.inductor_held:
            INDUCTOR.release()
        if self.device.type == "cuda":
            torch.cuda.empty_cache()


def made_here(spec: Spec, device: torch.device, dtype, seed: int) -> torch.nn.Module:
    """The network with its weights made on device in dtype (models/seeded.py): built on
    no device, then allocated there and filled parameter by parameter, so that a full-size
    decoder never passes through the host nor holds a float32 copy beside its own."""
    with torch.device("meta"):
        net = build_network(spec)
    net = net.to(dtype=dtype).to_empty(device=device).eval()
    with torch.no_grad():
        for draw in seeded.plan(spec):
            net.get_parameter(draw.name).copy_(seeded.torch_value(draw, device, dtype, seed))
    return net


def capture_graph(body):
    """body() captured as one CUDA graph: (replay, what body returned), a tensor of the
    graph's own memory that every replay rewrites. Replay looks CUDAGraph.replay up at
    each call, where cudagraphs.counting_replays counts it."""
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = body()
    return (lambda: graph.replay()), out


def _coordinate_descent() -> bool:
    import torch._inductor.config as inductor

    return bool(inductor.coordinate_descent_tuning)
