"""What proves a `cudagraph` cell ran CUDA graphs, read from PyTorch's own state.

torch.compile's mode="reduce-overhead" records each compiled function as a CUDA graph
(Inductor's graph trees) and replays it, unless Inductor skips graphs for that function (a
mutated input, a CPU tensor, dynamic shapes...), when it runs the same kernels launched one
by one and says so only in a log. On an H100 a GPT-2 decode step so labelled took 1.62 ms,
about what its kernels take launched one by one. So a cudagraph cell:
- compiles with Inductor's cudagraph_or_error on: a skip raises Inductor's own reason at
  compilation, and the cell fails with it;
- after its timed rounds, runs its step once more, untimed, counting the CUDA graphs it
  replays (torch.cuda.CUDAGraph.replay, which the graph trees call); none replayed, or any
  skip counted (counters["inductor"]["cudagraph_skips"]), fails the cell.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager

import torch


def require_cudagraphs() -> None:
    """Inductor raises, with its reason, where it would skip CUDA graphs."""
    import torch._inductor.config as inductor

    inductor.triton.cudagraph_or_error = True


@contextmanager
def counting_replays():
    """[replays so far] while inside: every torch.cuda.CUDAGraph replay in this process."""
    count = [0]
    real = torch.cuda.CUDAGraph.replay

    def replay(graph, *args, **kwargs):
        count[0] += 1
        return real(graph, *args, **kwargs)

    torch.cuda.CUDAGraph.replay = replay
    try:
        yield count
    finally:
        torch.cuda.CUDAGraph.replay = real


def judge(skips: int, replays: int, least: int) -> dict:
    """The record's proof from what the counters read, or RuntimeError in one line."""
    if skips:
        raise RuntimeError(
            f"Inductor skipped CUDA graphs {skips} time(s): the kernels ran launched one by "
            "one, not as a cudagraph cell claims (its reason is in Inductor's cudagraphs log)"
        )
    if replays < least:
        raise RuntimeError(
            f"{replays} CUDA graph replay(s) in a step that should replay at least {least}: "
            "the graphs were recorded again or not at all"
        )
    return {"cudagraph_skips": 0, "cudagraph_replays": replays}


def replay_facts(run: Callable[[], object], least: int) -> dict:
    """run() once (untimed), counting its replays, and judge them with Inductor's skips."""
    with counting_replays() as count:
        run()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
    skips = int(torch._dynamo.utils.counters["inductor"]["cudagraph_skips"])
    return judge(skips, count[0], least)
