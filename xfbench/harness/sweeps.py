"""What `xfbench run`'s list options mean, for every suite's sweep: thread counts (a process
of each), worker and rank counts, and the devices of the multi-worker suites. Each checks its
value and answers a bad one in one line (UsageError) before anything runs."""

from __future__ import annotations

import math

from xfbench import machine
from xfbench.errors import UsageError
from xfbench.harness.selection import comma_list, normalize_device, option_list
from xfbench.harness.threads import allowed_cpus


def default_threads(cpus: int) -> list[int]:
    """1, 2, 4, ... up to cpus, and cpus itself when it is not a power of two."""
    counts, n = [], 1
    while n <= cpus:
        counts.append(n)
        n *= 2
    return counts + ([cpus] if counts[-1] != cpus else [])


def thread_counts(value: str | None) -> list[int]:
    """--threads as a sweep's list: each count a process of its own (default 1, 2, 4, ...)."""
    cpus = len(allowed_cpus())
    if value is None:
        return default_threads(cpus)
    counts = []
    for part in option_list("threads", value):
        if not part.isdigit() or int(part) < 1:
            raise UsageError(f"--threads takes positive counts like 1,2,4, not {part!r}")
        if int(part) > cpus:
            raise UsageError(f"--threads {part} is more than the {cpus} CPUs this process may use")
        counts.append(int(part))
    return sorted(set(counts))


def counts(option: str, value: str | None) -> list[int] | None:
    """A list of positive whole numbers, or None when not given."""
    if not value:
        return None
    out = []
    for part in comma_list(value):
        if not part.isdigit() or int(part) < 1:
            raise UsageError(f"{option} takes positive counts like 1,2,4, not {part!r}")
        out.append(int(part))
    if not out:
        raise UsageError(f"{option} takes positive counts like 1,2,4")
    return sorted(set(out))


def frameworks(framework: str | None, known: tuple[str, ...], suite: str, named) -> list[str]:
    """The frameworks of a suite that runs only some: those named (each must be one of
    them), else the installed ones among them."""
    if comma_list(framework):
        for f in named:
            if f not in known:
                raise UsageError(f"--suite {suite} runs {', '.join(known)}; not {f!r}")
        return list(named)
    found = [f for f in named if f in known]
    if not found:
        raise UsageError(f"--suite {suite} needs one of {', '.join(known)} installed")
    return found


def worker_devices(device: str | None, suite: str) -> list[str]:
    """cpu and cuda (a cell's workers take GPUs 0..N-1); default: cpu, and cuda when a GPU
    is present."""
    gpus = machine.gpu_count()
    if not comma_list(device):
        return ["cpu"] + (["cuda"] if gpus else [])
    out = []
    for d in map(normalize_device, comma_list(device)):
        if d == "cpu":
            out.append("cpu")
        elif d.startswith("cuda:"):
            if not gpus:
                raise UsageError(f"device {d} is not present: this machine has no NVIDIA GPU")
            if int(d.partition(":")[2]) >= gpus:
                raise UsageError(
                    f"device {d} is not present: this machine has {gpus} GPU(s), "
                    f"cuda:0 to cuda:{gpus - 1}"
                )
            out.append("cuda")
        else:
            raise UsageError(f"--suite {suite} runs on cpu and cuda, not {d}")
    return list(dict.fromkeys(out))


def worker_counts(
    value: str | None, device: str, option: str = "--workers", every_gpu: bool = False
) -> list[int]:
    """Default: 1 and 2 on the CPU; 1, 2, 4, ... up to the GPUs present on cuda (and,
    with every_gpu, the number of GPUs itself when it is not a power of two)."""
    gpus = machine.gpu_count()
    asked = counts(option, value)
    if device == "cpu":
        return asked or [1, 2]
    if asked:
        if asked[-1] > gpus:
            raise UsageError(
                f"{option} {asked[-1]} on cuda needs {asked[-1]} GPUs; this machine has {gpus}"
            )
        return asked
    if not gpus:
        return [1]
    powers = [2**i for i in range(int(math.log2(gpus)) + 1)]
    return sorted(set(powers + ([gpus] if every_gpu else [])))


def threads_per_worker(value: str | None) -> int | None:
    """--threads of a multi-worker suite: one count, per worker or rank; None when not given."""
    if not value:
        return None
    cpus = len(allowed_cpus())
    if not value.strip().isdigit() or int(value) < 1:
        raise UsageError(f"--threads takes one positive count per worker here, not {value!r}")
    if int(value) > cpus:
        raise UsageError(f"--threads {value} is more than the {cpus} CPUs this process may use")
    return int(value)


def fits_cpus(option: str, counts: list[int], threads: int | None) -> None:
    """On the CPU every worker (or rank) needs CPUs of its own: refuse a count that cannot
    run here now, rather than start a child per cell only to skip each one."""
    cpus = len(allowed_cpus())
    need = max(counts) * (threads or 1)
    if need > cpus:
        raise UsageError(
            f"{option} {max(counts)} with {threads or 1} thread(s) each needs "
            f"{need} CPUs; this process may use {cpus}"
        )


def at_thread_counts(selections: dict, expand) -> list:
    """The cells of a sweep over thread counts ({count: its Selection}): expand(selection)
    at each count for the CPU, and an accelerator's cells once, with the most host threads
    (their time is the device's), in framework and device order."""
    counts = sorted(selections)
    first = selections[counts[0]]
    return [
        c
        for fw in first.frameworks
        for dev in first.devices
        for n in (counts if dev == "cpu" else counts[-1:])
        for c in expand(selections[n])
        if c.framework == fw and c.device == dev
    ]


def described(sel, counts: list[int]) -> dict:
    """The selection fields every thread-count sweep stores with its cells (a resume
    recognises its folder by them)."""
    return {
        "frameworks": list(sel.frameworks),
        "networks": list(sel.networks),
        "modes": list(sel.modes) if sel.modes else None,
        "precisions": list(sel.precisions),
        "devices": list(sel.devices),
        "threads": counts,
        "preset": sel.preset.name,
        "batch_size": sel.batch_size,
    }
