"""One sequence batch decoded and timed, and the quantities every serving benchmark
reports, from those times (docs/generation.md names each peer's name for each).

A generation is the prefill (the prompt in, the first new token out: TTFT) and OSL - 1
decode steps (ITL, the gaps), each timed from the call to the host holding its tokens, or,
where the generator runs the loop itself with the host out of it, on the device's clock:
    TPOT = (end-to-end - TTFT) / (OSL - 1)          MLPerf's, vLLM's TPOT; AIPerf's ITL
A cell times several generations; each quantity is their median (the gaps: pooled).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import numpy as np

from xfbench.harness.stats import median_ci


@dataclass
class Generation:
    ttft_s: float
    gaps_s: list[float]  # each decode step's time, in order
    e2e_s: float
    tokens: np.ndarray  # (B, OSL) the new tokens
    logits: np.ndarray | None = None  # (rows kept, OSL, vocab) (the check's, untimed)

    @property
    def tpot_s(self) -> float:
        return (self.e2e_s - self.ttft_s) / len(self.gaps_s)


def generate(generator, prompt: np.ndarray, new_tokens: int, keep_logits=False) -> Generation:
    """Greedy decoding of new_tokens after prompt (B, ISL), timed; with keep_logits (True,
    or the rows of the batch to keep), each step's logits kept on the host too (for the
    check: its times then mean nothing). A generator with a loop of its own (run(): the
    host out of it, each step timed on the device) runs that; else each prefill and decode
    call is timed from the host, which holds every step's tokens."""
    rows = slice(None) if keep_logits is True else list(keep_logits or [])
    run = getattr(generator, "run", None)  # the generator's own loop, where it has one
    if run is not None and keep_logits is not True:
        resident = run(prompt, new_tokens, keep=rows or None)
        if resident is not None:
            tokens, ttft, gaps, logits = resident
            return Generation(
                ttft_s=ttft, gaps_s=gaps, e2e_s=ttft + sum(gaps), tokens=tokens, logits=logits
            )
    kept = []
    start = time.perf_counter()
    token = generator.prefill(prompt)
    first = time.perf_counter()
    out, gaps, last = [token], [], first
    for _ in range(new_tokens - 1):
        if keep_logits:
            kept.append(generator.logits()[rows])
        token = generator.decode(token)
        now = time.perf_counter()
        gaps.append(now - last)
        out.append(token)
        last = now
    if keep_logits:
        kept.append(generator.logits()[rows])
    return Generation(
        ttft_s=first - start,
        gaps_s=gaps,
        e2e_s=last - start,
        tokens=np.stack(out, axis=1),
        logits=np.stack(kept, axis=1) if keep_logits else None,
    )


def first_generation(generator, prompt: np.ndarray, new_tokens: int):
    """The first generation, where every framework compiles. -> (it, compile_s, its whole
    call's seconds). compile_s is that whole call less its decode steps after the first, as
    it timed them: the prefill and the first step, and any first-call work outside the
    timed region, which PyTorch's loop mode has (it compiles its step and captures every
    step's CUDA graph before its timed replay)."""
    t0 = time.perf_counter()
    first = generate(generator, prompt, new_tokens)
    whole_s = time.perf_counter() - t0
    return first, whole_s - sum(first.gaps_s[1:]), whole_s


def summary(runs: list[Generation], batch: int, prompt_tokens: int) -> dict:
    """The record's timing fields from the timed generations."""
    new_tokens = runs[0].tokens.shape[1]
    e2e = statistics.median(r.e2e_s for r in runs)
    tpot = statistics.median(r.tpot_s for r in runs)
    gaps = np.array([g for r in runs for g in r.gaps_s])
    return {
        "ttft_s": statistics.median(r.ttft_s for r in runs),
        "ttft_min_s": min(r.ttft_s for r in runs),
        "ttft_max_s": max(r.ttft_s for r in runs),
        "tpot_s": tpot,
        "tpot_min_s": min(r.tpot_s for r in runs),
        "tpot_max_s": max(r.tpot_s for r in runs),
        "e2e_s": e2e,
        "itl_p50_s": float(np.percentile(gaps, 50)),
        "itl_p90_s": float(np.percentile(gaps, 90)),
        "itl_p99_s": float(np.percentile(gaps, 99)),
        "itl_max_s": float(gaps.max()),
        "output_tokens_per_s": batch * new_tokens / e2e,
        "total_tokens_per_s": batch * (prompt_tokens + new_tokens) / e2e,
        "decode_tokens_per_s": batch / tpot,
        "per_sequence_tokens_per_s": 1 / tpot,
        "prefill_tokens_per_s": batch * prompt_tokens / statistics.median(r.ttft_s for r in runs),
        **intervals(runs, batch),
    }


def intervals(runs: list[Generation], batch: int) -> dict:
    """The medians' intervals over the timed generations (harness.stats: order statistics,
    the coverage reached recorded; 3 generations give [least, greatest] at 75 %): the
    frontier's error bars."""
    new_tokens = runs[0].tokens.shape[1]
    throughput = median_ci([batch * new_tokens / r.e2e_s for r in runs])
    interactivity = median_ci([1 / r.tpot_s for r in runs])
    return {
        "output_tokens_per_s_ci": [throughput[0], throughput[1]],
        "per_sequence_tokens_per_s_ci": [interactivity[0], interactivity[1]],
        "ci_coverage": throughput[2],
    }
