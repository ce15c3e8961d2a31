"""CPU threads: set before any framework starts, then verified from CPU time.

Environment variables are read by OpenMP, MKL and OpenBLAS when their pools
start, so pin() must run before the first framework import. The affinity mask
is the one setting every runtime obeys; ONNX Runtime and TensorFlow also need
their own knobs, which the adapters set in configure_threads().
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import threadpoolctl

THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "NPROC",
)


def allowed_cpus() -> list[int]:
    """The CPUs this process may run on."""
    return sorted(os.sched_getaffinity(0))


def _core_of(cpu: int) -> tuple[int, int]:
    topo = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology")
    try:
        return (
            int((topo / "physical_package_id").read_text()),
            int((topo / "core_id").read_text()),
        )
    except (OSError, ValueError):
        return (0, cpu)


def choose_cpus(n: int) -> list[int]:
    """n CPUs, one per physical core first, so N threads get N cores, not N hyperthreads."""
    cpus = allowed_cpus()
    if n > len(cpus):
        raise ValueError(f"{n} threads asked for, but this process may use only {len(cpus)} CPUs")
    first, siblings, seen = [], [], set()
    for cpu in cpus:
        core = _core_of(cpu)
        (siblings if core in seen else first).append(cpu)
        seen.add(core)
    return sorted((first + siblings)[:n])


def pin(n: int) -> list[int]:
    """Restrict this process (its threads now and those it will start) to n CPUs and tell
    every threading library to use n threads. Call before importing a framework."""
    cpus = choose_cpus(n)
    for var in THREAD_VARIABLES:
        os.environ[var] = str(n)
    # Affinity is per thread: the threads already running (NumPy's OpenBLAS pool starts when
    # NumPy is imported, before any option is read) are pinned one by one; new threads
    # inherit the mask from the thread that starts them.
    for tid in Path("/proc/self/task").iterdir():
        try:
            os.sched_setaffinity(int(tid.name), cpus)
        except (ProcessLookupError, ValueError):
            pass  # the thread ended meanwhile
    # BLAS and OpenMP pools already loaded read their variables too early: resize them.
    threadpoolctl.threadpool_limits(limits=n)
    return cpus


# -- contention: what other processes took of our CPUs while we were timed ------------
#
# /proc/stat counts, per CPU, the time spent in each state since boot, in USER_HZ ticks
# (os.sysconf("SC_CLK_TCK"), 100 a second: 10 ms). The busy time of the CPUs we may run
# on, less our own CPU time, is the time something else ran there (other processes,
# interrupts, and steal: the hypervisor giving the CPU to another guest).
#
# Resolution. Each counter is whole ticks, and the kernel charges a whole tick to
# whatever runs when the tick fires, so over a short window the busy time is off by
# about a tick per CPU either way (more for a process that sleeps often, as a cell
# waiting on a GPU does). The bar for "contended" therefore adds CONTENTION_SLACK_TICKS
# per CPU to the share: a 0.1 s smoke cell on one CPU is flagged only when others took
# more than 10 ms + 20 ms of its 100 ms; a 10 s cell at about 10 %.

# Busy states of a /proc/stat cpu line, by position after the name: user nice system
# idle iowait irq softirq steal guest guest_nice. guest time is already inside user.
_BUSY = (0, 1, 2, 5, 6, 7)
_STEAL = 7
# Contended: other work took more than this share of the allowed CPUs' time. 10 % is
# the run-to-run noise of a quiet machine (docs/measurement.md, "Noise"): beyond it,
# what others took is as large as the differences the tables are read for.
CONTENDED_SHARE = 0.10
CONTENTION_SLACK_TICKS = 2  # per allowed CPU: the counters' resolution (see above)
# Thread shortfall: a CPU cell kept fewer than this share of its requested threads busy
# (a framework that ignored the setting, a serial section, or CPUs taken by others).
SHORTFALL_RATIO = 0.8

CONTENDED_MARK = "\u2020"  # dagger
SHORTFALL_MARK = "\u2021"  # double dagger
WIDE_MARK = "\u00a7"  # section sign


def read_proc_stat() -> str:
    return Path("/proc/stat").read_text()


def clocks() -> tuple[float, float]:
    """(CPU time of this process, wall time), in seconds."""
    return time.process_time(), time.perf_counter()


def _child_pids(pid: int) -> list[int]:
    """The live child processes of pid (each thread's children file, Linux 3.5 and
    later; else the processes whose parent is pid, read from /proc/*/stat)."""
    tasks = Path(f"/proc/{pid}/task")
    try:
        return [int(c) for t in tasks.iterdir() for c in (t / "children").read_text().split()]
    except (OSError, ValueError):
        pass
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if int(_stat_fields(int(d.name))[1]) == pid:
                    out.append(int(d.name))
            except (OSError, ValueError, IndexError):
                pass  # ended meanwhile
    return out


def _stat_fields(pid: int) -> list[str]:
    """/proc/PID/stat from its third field (state) on: the name may hold spaces."""
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rindex(")") + 2 :].split()


def children_cpu_s(hz: float | None = None) -> dict[int, float]:
    """CPU seconds (user + system) so far of each live descendant process of this one.
    A real-data cell's loader workers (a PyTorch DataLoader's processes) are such
    descendants: their CPU time is the cell's own, not another process's."""
    hz = hz or float(os.sysconf("SC_CLK_TCK"))
    out, todo = {}, _child_pids(os.getpid())
    while todo:
        pid = todo.pop()
        try:
            fields = _stat_fields(pid)
            out[pid] = (int(fields[11]) + int(fields[12])) / hz  # utime, stime
            todo += _child_pids(pid)
        except (OSError, ValueError, IndexError):
            pass  # ended meanwhile
    return out


def cpu_ticks(text: str, cpus: list[int]) -> tuple[int, int]:
    """(busy ticks including steal, steal ticks) summed over cpus, from /proc/stat text.
    ValueError when a CPU has no line or a line cannot be read."""
    lines = {}
    for line in text.splitlines():
        name, _, rest = line.partition(" ")
        if name.startswith("cpu") and name[3:].isdigit():
            lines[int(name[3:])] = rest.split()
    busy = steal = 0
    for cpu in cpus:
        if cpu not in lines:
            raise ValueError(f"/proc/stat has no line for cpu{cpu}")
        fields = [int(x) for x in lines[cpu]]
        # Kernels before 2.6.11 have no steal field: count it as 0.
        fields += [0] * (8 - len(fields))
        busy += sum(fields[i] for i in _BUSY)
        steal += fields[_STEAL]
    return busy, steal


@dataclass
class CpuMeter:
    """CPU time over wall time of this process (how many threads were really busy), and
    the time other work took on the CPUs this process may use (see above).

    With children=True (a real-data cell) the CPU time its descendant processes spent in
    the window counts as its own (children_s, inside cpu): they are its input pipeline's
    workers, not contention. read_stat returns the text of /proc/stat, clock (CPU time,
    wall time) and read_children (pid -> CPU seconds): tests pass fakes. cpus defaults to
    the affinity mask at enter, hz to USER_HZ."""

    read_stat: Callable[[], str] = read_proc_stat
    clock: Callable[[], tuple[float, float]] = clocks
    cpus: list[int] | None = None
    hz: float | None = None
    children: bool = False
    read_children: Callable[[], dict[int, float]] = children_cpu_s
    children_s: float = 0.0  # of cpu: the descendants' share (children=True)
    cpu0: float = 0.0
    wall0: float = 0.0
    cpu: float = 0.0
    wall: float = 0.0
    other_s: float | None = None  # seconds others took on our CPUs, steal included
    steal_s: float | None = None
    unknown: str | None = None  # why other_s is None
    _ticks0: tuple[int, int] | None = field(default=None, repr=False)
    _children0: dict[int, float] = field(default_factory=dict, repr=False)

    def _children(self) -> dict[int, float]:
        if not self.children:
            return {}
        try:
            return self.read_children()
        except (OSError, ValueError):
            return {}  # no /proc: the workers' time shows as others'

    def _ticks(self) -> tuple[int, int] | None:
        try:
            return cpu_ticks(self.read_stat(), self.cpus)
        except (OSError, ValueError) as e:
            self.unknown = f"/proc/stat unreadable: {e}"
            return None

    def __enter__(self):
        try:
            if self.cpus is None:
                self.cpus = allowed_cpus()
            if self.hz is None:
                self.hz = float(os.sysconf("SC_CLK_TCK"))
        except (AttributeError, OSError, ValueError) as e:  # not Linux
            self.unknown = f"no CPU affinity or clock ticks here: {e}"
        self._ticks0 = None if self.unknown else self._ticks()
        self._children0 = self._children()
        self.cpu0, self.wall0 = self.clock()
        return self

    def __exit__(self, *exc):
        cpu1, wall1 = self.clock()
        # a worker that ended inside the window takes its time with it (shown as others')
        after = self._children()
        self.children_s = sum(max(0.0, s - self._children0.get(p, 0.0)) for p, s in after.items())
        self.cpu, self.wall = cpu1 - self.cpu0 + self.children_s, wall1 - self.wall0
        if self._ticks0 is None:
            return
        ticks1 = self._ticks()
        if ticks1 is None:
            return
        busy = (ticks1[0] - self._ticks0[0]) / self.hz
        self.steal_s = max(0.0, (ticks1[1] - self._ticks0[1]) / self.hz)
        self.other_s = max(0.0, busy - self.cpu)

    @property
    def threads_used(self) -> float:
        return self.cpu / self.wall if self.wall > 0 else 0.0

    def _share(self, seconds: float | None) -> float | None:
        if seconds is None or self.wall <= 0 or not self.cpus:
            return None
        return min(1.0, seconds / (self.wall * len(self.cpus)))

    @property
    def other_cpu_share(self) -> float | None:
        """Share of the allowed CPUs' time that other work took, 0..1."""
        return self._share(self.other_s)

    @property
    def steal_share(self) -> float | None:
        return self._share(self.steal_s)

    @property
    def contended(self) -> bool | None:
        """Others took more than CONTENDED_SHARE of our CPUs, beyond the counters'
        resolution; None when not measured."""
        if self.other_s is None or not self.cpus:
            return None
        n = len(self.cpus)
        bar = CONTENDED_SHARE * self.wall * n + CONTENTION_SLACK_TICKS * n / self.hz
        return self.other_s > bar


def thread_shortfall(threads_used: float, threads_requested: int) -> bool:
    return threads_used < SHORTFALL_RATIO * threads_requested


def contention_fields(meter: CpuMeter, threads_requested: int, on_cpu: bool) -> dict:
    """The record's contention fields. thread_shortfall is for CPU cells only: a GPU
    cell's host threads mostly wait on the device, whatever was requested."""
    other, steal = meter.other_cpu_share, meter.steal_share
    return {
        "other_cpu_share": None if other is None else round(other, 3),
        "steal_share": None if steal is None else round(steal, 3),
        "contended": meter.contended,
        "contention_unknown": meter.unknown,
        "thread_shortfall": (
            thread_shortfall(meter.threads_used, threads_requested) if on_cpu else None
        ),
    }


def marks(record: dict) -> str:
    """The marks to put beside a record's number: contended, thread shortfall, and an
    interval wider than its target."""
    return (
        (CONTENDED_MARK if record.get("contended") else "")
        + (SHORTFALL_MARK if record.get("thread_shortfall") else "")
        + (WIDE_MARK if record.get("ci_target_met") is False else "")
    )


def legend(records) -> list[str]:
    """One line per mark that appears among records, saying what it means."""
    records = list(records)
    lines = []
    if any(r.get("contended") for r in records):
        lines.append(
            f"{CONTENDED_MARK} contended: other processes took more than "
            f"{CONTENDED_SHARE:.0%} of the cell's CPUs while it was timed (other_cpu_share)"
        )
    if any(r.get("thread_shortfall") for r in records):
        lines.append(
            f"{SHORTFALL_MARK} thread shortfall: fewer than {SHORTFALL_RATIO:g} x the "
            "requested threads were busy (threads_used)"
        )
    wide = [r for r in records if r.get("ci_target_met") is False]
    if wide:
        targets = sorted(
            {r.get("ci_target") for r in wide if isinstance(r.get("ci_target"), float)}
        )
        lines.append(
            f"{WIDE_MARK} wide: the median's interval is wider than "
            + (f"±{targets[0]:.0%}" if len(targets) == 1 else "its target")
            + " (ci_half_width over ci_target): more rounds, or a quieter machine, to trust it"
        )
    return lines
