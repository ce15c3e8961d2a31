"""The CPU's layout (sockets, NUMA nodes, L3 domains, SMT siblings) from Linux's sysfs, and
how to share the allowed CPUs out among several copies of a cell (`xfbench run --copies`).

Every reading takes the sysfs root as an argument, so a test can describe a machine it is
not running on (two sockets, say). Where sysfs cannot be read (not Linux), each CPU is its
own core in one socket, one NUMA node and one L3 domain.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

SYSTEM = Path("/sys/devices/system")


def parse_list(text: str) -> list[int]:
    """A kernel CPU list ("0-3,8,10-11") as numbers."""
    out: list[int] = []
    for part in text.strip().split(","):
        if not part:
            continue
        low, _, high = part.partition("-")
        out += range(int(low), int(high or low) + 1)
    return out


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


@dataclass(frozen=True)
class Cpu:
    number: int
    socket: int
    core: tuple[int, int]  # (socket, core id): SMT siblings share it
    numa: int
    l3: int  # the lowest CPU sharing its last-level cache
    sibling: int  # 0 for the first CPU of its core, 1 for its SMT sibling, ...


def cpus(root: Path = SYSTEM, allowed: list[int] | None = None) -> list[Cpu]:
    """The allowed CPUs (default: this process's) with their place in the machine."""
    allowed = sorted(os.sched_getaffinity(0) if allowed is None else allowed)
    numa_of = {}
    for node in sorted((root / "node").glob("node[0-9]*")):
        for c in parse_list(_read(node / "cpulist") or ""):
            numa_of[c] = int(node.name[4:])
    out = []
    for c in allowed:
        base = root / "cpu" / f"cpu{c}"
        socket = _read(base / "topology" / "physical_package_id")
        core = _read(base / "topology" / "core_id")
        siblings = parse_list(_read(base / "topology" / "thread_siblings_list") or str(c))
        l3 = parse_list(_read(base / "cache" / "index3" / "shared_cpu_list") or "")
        sock = int(socket) if socket and socket.lstrip("-").isdigit() else 0
        out.append(
            Cpu(
                number=c,
                socket=sock,
                core=(sock, int(core) if core and core.isdigit() else c),
                numa=numa_of.get(c, 0),
                l3=min(l3) if l3 else -1 - sock,  # unknown: one per socket
                sibling=sorted(siblings).index(c) if c in siblings else 0,
            )
        )
    return out


def _groups(values: dict[int, object]) -> list[list[int]]:
    by: dict[object, list[int]] = {}
    for c, v in sorted(values.items()):
        by.setdefault(v, []).append(c)
    return list(by.values())


def describe(root: Path = SYSTEM, allowed: list[int] | None = None) -> dict:
    """The machine record's layout of the allowed CPUs."""
    cs = cpus(root, allowed)
    cores = _groups({c.number: c.core for c in cs})
    return {
        "sockets": len({c.socket for c in cs}),
        "numa_nodes": _groups({c.number: c.numa for c in cs}),
        "l3_domains": _groups({c.number: c.l3 for c in cs}),
        "physical_cores": len(cores),
        "smt_siblings": [g for g in cores if len(g) > 1],
    }


def copy_cpus(
    copies: int | None, threads: int, root: Path = SYSTEM, allowed: list[int] | None = None
) -> list[list[int]]:
    """CPU sets for copies of a cell of `threads` threads each, none shared: one CPU per
    physical core before any SMT sibling, each set inside one NUMA node and L3 domain
    where it fits. copies None ("auto"): as many sets as there are groups of `threads`
    physical cores (at least one). ValueError when the CPUs are too few."""
    cs = cpus(root, allowed)
    if threads < 1:
        raise ValueError("threads must be at least 1")
    first = [c for c in cs if c.sibling == 0]
    rest = [c for c in cs if c.sibling > 0]
    # Whole sets inside one domain first, then whatever is left, in machine order.
    domains: dict[tuple[int, int], list[Cpu]] = {}
    for c in sorted(first, key=lambda c: (c.numa, c.l3, c.core)):
        domains.setdefault((c.numa, c.l3), []).append(c)
    sets, left = [], []
    for members in domains.values():
        whole = len(members) // threads * threads
        sets += [members[i : i + threads] for i in range(0, whole, threads)]
        left += members[whole:]
    pool = left + sorted(rest, key=lambda c: (c.numa, c.l3, c.core))
    want = max(1, len(first) // threads) if copies is None else copies
    while len(sets) < want and len(pool) >= threads:
        sets.append(pool[:threads])
        pool = pool[threads:]
    if len(sets) < want:
        raise ValueError(
            f"{want} copies of {threads} thread{'s' * (threads != 1)} need "
            f"{want * threads} CPUs; this process may use {len(cs)}"
        )
    return [sorted(c.number for c in s) for s in sets[:want]]
