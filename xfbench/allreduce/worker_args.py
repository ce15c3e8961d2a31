"""The command line both workers share (torch_collectives under torchrun, jax_psum)."""

from __future__ import annotations

import argparse

from xfbench import command_line
from xfbench.allreduce import ALLREDUCE_FAULT
from xfbench.allreduce.sizes import parse_sizes
from xfbench.allreduce.timing import TIMINGS
from xfbench.errors import UsageError

# Test hook: "max" makes the workers reduce with max instead of sum, a wrong
# reduction the correctness check must catch.


def _sizes(text: str) -> list[int]:
    try:
        return parse_sizes(text)
    except UsageError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def parser(prog: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog,
        description="All-reduce bandwidth over message sizes "
        "(nccl-tests' algbw and busbw), with reduce-then-broadcast and "
        "parameter-server baselines",
    )
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument(
        "--sizes",
        type=_sizes,
        default=parse_sizes("1KB:1GB"),
        help="message sizes in bytes: 1KB,4MB or a doubling range 1KB:1GB (binary units)",
    )
    p.add_argument(
        "--preset",
        choices=sorted(TIMINGS),
        default="paper",
        help="warm-up and timed rounds per size",
    )
    p.add_argument(
        "--warmup",
        type=command_line.whole_number(0),
        default=None,
        help="warm-up operations (default: the preset's)",
    )
    p.add_argument(
        "--rounds",
        type=command_line.whole_number(1),
        default=None,
        help="timed operations per size (default: the preset's time budget)",
    )
    p.add_argument(
        "--threads-per-rank",
        type=command_line.whole_number(1),
        default=None,
        help="CPU threads per rank (default: this host's CPUs / ranks on it)",
    )
    p.add_argument("--out", default=None, help="write the result JSON here (rank 0)")
    return p


def fault() -> str | None:
    return ALLREDUCE_FAULT.read()
