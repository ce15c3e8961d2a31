"""Message sizes: parsing, the default sweep, and the cap that memory puts on it.

Units are binary, as nccl-tests' -b/-e options read them: 1KB = 1 KiB = 1024 bytes.
"""

from __future__ import annotations

import re

from xfbench.allreduce import ITEM_BYTES
from xfbench.errors import UsageError
from xfbench.harness.selection import comma_list

UNITS = {
    "": 1,
    "B": 1,
    "K": 2**10,
    "KB": 2**10,
    "KIB": 2**10,
    "M": 2**20,
    "MB": 2**20,
    "MIB": 2**20,
    "G": 2**30,
    "GB": 2**30,
    "GIB": 2**30,
}
DEFAULT = (2**10, 2**30)  # 1 KB to 1 GB, doubling
SMOKE = (2**10, 2**20)  # 1 KB to 1 MB
MEMORY_SHARE = 8  # one buffer takes at most 1/8 of the memory per rank


def parse_size(text: str) -> int:
    m = re.fullmatch(r"\s*(\d+)\s*([A-Za-z]*)\s*", text)
    if not m or m.group(2).upper() not in UNITS:
        raise UsageError(f"bad message size {text!r}; write e.g. 1024, 1KB, 4MB or 1GB")
    n = int(m.group(1)) * UNITS[m.group(2).upper()]
    if n < ITEM_BYTES or n % ITEM_BYTES:
        raise UsageError(
            f"message size {text!r} is not a whole number of fp32 values "
            f"(a positive multiple of {ITEM_BYTES} bytes)"
        )
    return n


def doubling(lo: int, hi: int) -> list[int]:
    out = []
    n = lo
    while n <= hi:
        out.append(n)
        n *= 2
    return out


def parse_sizes(text: str) -> list[int]:
    """'1KB,4MB,1GB' (a list) or '1KB:1GB' (from one to the other, doubling); both may mix."""
    out: list[int] = []
    for part in comma_list(text):
        if ":" in part:
            ends = part.split(":")
            if len(ends) != 2:
                raise UsageError(f"bad size range {part!r}; write FROM:TO, e.g. 1KB:1GB")
            lo, hi = parse_size(ends[0]), parse_size(ends[1])
            if lo > hi:
                raise UsageError(f"size range {part!r} runs backwards")
            out.extend(doubling(lo, hi))
        else:
            out.append(parse_size(part))
    if not out:
        raise UsageError(f"no message size in {text!r}; write e.g. 1KB:1GB or 1KB,4MB")
    return sorted(set(out))


def label(nbytes: int) -> str:
    for unit, factor in (("GB", 2**30), ("MB", 2**20), ("KB", 2**10)):
        if nbytes >= factor and nbytes % factor == 0:
            return f"{nbytes // factor}{unit}"
    return f"{nbytes}B"


def cap(per_rank_bytes: int, world_size: int, ranks_per_memory: int | None = None) -> int:
    """The largest buffer one rank may use: 1/8 of the memory its share of the machine has.

    per_rank_bytes: available host memory (CPU; all ranks share it) or one GPU's memory.
    ranks_per_memory: how many ranks share that memory (CPU: the world size on this host).
    """
    share = ranks_per_memory if ranks_per_memory is not None else world_size
    return per_rank_bytes // (MEMORY_SHARE * max(share, 1))


def memory_cap(device: str, world_size: int, one_gpu_holds_all: bool = False) -> int:
    """Cap for the given device kind ('cpu' or 'cuda'), read without importing a framework.
    one_gpu_holds_all: the pattern gathers every rank's buffer on one GPU (JAX's baseline)."""
    if device == "cpu":
        import psutil

        return cap(psutil.virtual_memory().available, world_size)
    from xfbench import machine

    gpus = machine.gpus()
    if not gpus:
        return 0
    return cap(
        min(g["memory_bytes"] for g in gpus),
        world_size,
        ranks_per_memory=world_size if one_gpu_holds_all else 1,
    )
