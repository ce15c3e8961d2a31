"""CpuMeter's contention arithmetic on fake /proc/stat text, and a real busy neighbour."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from xfbench.harness import threads
from xfbench.harness.threads import CpuMeter, allowed_cpus, contention_fields, cpu_ticks


def stat(*cpus: tuple[int, ...]) -> str:
    """/proc/stat text: the aggregate line, then one line per CPU (user nice system idle
    iowait irq softirq steal guest guest_nice), then lines that are not CPUs."""
    total = [sum(col) for col in zip(*cpus)]
    lines = ["cpu  " + " ".join(map(str, total))]
    lines += [f"cpu{i} " + " ".join(map(str, c)) for i, c in enumerate(cpus)]
    return "\n".join(lines + ["intr 12345 0 0", "ctxt 999", "btime 1700000000"]) + "\n"


def test_busy_ticks_are_user_nice_system_irq_softirq_and_steal_of_the_cpus_asked():
    text = stat((1, 2, 3, 100, 50, 4, 5, 6, 7, 0), (1000, 0, 0, 0, 0, 0, 0, 0, 0, 0))
    # idle, iowait and guest (already inside user) are not busy; cpu1 is not asked for
    assert cpu_ticks(text, [0]) == (1 + 2 + 3 + 4 + 5 + 6, 6)
    assert cpu_ticks(text, [0, 1]) == (1021, 6)
    # an old kernel's line without steal
    assert cpu_ticks("cpu0 1 2 3 4 5 6 7\n", [0]) == (1 + 2 + 3 + 6 + 7, 0)
    with pytest.raises(ValueError, match="no line for cpu2"):
        cpu_ticks(text, [2])


def measured(before: str, after: str, cpus, own_cpu: float, wall: float) -> CpuMeter:
    """A meter over a window of `wall` seconds in which this process used `own_cpu`
    seconds and /proc/stat went from `before` to `after` (100 ticks a second)."""
    texts = iter([before, after])
    times = iter([(10.0, 500.0), (10.0 + own_cpu, 500.0 + wall)])
    meter = CpuMeter(read_stat=lambda: next(texts), clock=lambda: next(times), cpus=cpus, hz=100.0)
    with meter:
        pass
    return meter


IDLE = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0)


def test_other_time_is_busy_time_less_our_own_over_the_allowed_cpus():
    # 2 CPUs, 1 s: we used 1 s (100 ticks); cpu0 and cpu1 were busy 100 + 50 ticks,
    # 10 of them stolen by the hypervisor: others took 0.5 s of our 2 CPU-seconds.
    after = stat((80, 0, 20, 0, 0, 0, 0, 0, 0, 0), (30, 0, 5, 0, 0, 3, 2, 10, 0, 0))
    m = measured(stat(IDLE, IDLE), after, [0, 1], own_cpu=1.0, wall=1.0)
    assert m.other_s == pytest.approx(0.5) and m.steal_s == pytest.approx(0.1)
    assert m.other_cpu_share == pytest.approx(0.25) and m.steal_share == pytest.approx(0.05)
    assert m.contended is True
    assert m.threads_used == pytest.approx(1.0)


def test_a_quiet_window_is_not_contended_and_the_share_is_never_negative():
    # The counters lag our own precise CPU time by a tick: other time clamps at 0.
    after = stat((99, 0, 0, 0, 0, 0, 0, 0, 0, 0))
    m = measured(stat(IDLE), after, [0], own_cpu=1.0, wall=1.0)
    assert m.other_s == 0.0 and m.other_cpu_share == 0.0 and m.contended is False


def test_the_bar_allows_for_the_ticks_resolution_in_short_windows():
    # 0.1 s on one CPU: others took 2 ticks (20 %), within the resolution slack (10 %
    # of 10 ticks + 2 ticks): not contended; 4 ticks (40 %) is.
    for others, contended in ((2, False), (4, True)):
        after = stat((10 + others, 0, 0, 0, 0, 0, 0, 0, 0, 0))
        m = measured(stat(IDLE), after, [0], own_cpu=0.1, wall=0.1)
        assert m.other_cpu_share == pytest.approx(others / 10)
        assert m.contended is contended
    # 10 s on one CPU: 12 % is contended, 8 % is not
    for others, contended in ((120, True), (80, False)):
        after = stat((1000 + others, 0, 0, 0, 0, 0, 0, 0, 0, 0))
        m = measured(stat(IDLE), after, [0], own_cpu=10.0, wall=10.0)
        assert m.contended is contended


def test_unreadable_proc_stat_records_none_and_the_reason():
    def missing():
        raise FileNotFoundError(2, "No such file or directory", "/proc/stat")

    meter = CpuMeter(read_stat=missing, cpus=[0], hz=100.0)
    with meter:
        pass
    fields = contention_fields(meter, threads_requested=1, on_cpu=True)
    assert fields["other_cpu_share"] is None and fields["steal_share"] is None
    assert fields["contended"] is None
    assert "/proc/stat unreadable" in fields["contention_unknown"]
    # a CPU that vanished from /proc/stat between enter and exit: also None, not a crash
    m = measured(stat(IDLE, IDLE), stat(IDLE), [0, 1], own_cpu=1.0, wall=1.0)
    assert m.other_s is None and m.contended is None and "cpu1" in m.unknown


def test_thread_shortfall_is_for_cpu_cells_below_the_ratio():
    after = stat((100, 0, 0, 0, 0, 0, 0, 0, 0, 0), (100, 0, 0, 0, 0, 0, 0, 0, 0, 0))
    m = measured(stat(IDLE, IDLE), after, [0, 1], own_cpu=1.2, wall=1.0)
    assert m.threads_used == pytest.approx(1.2)
    assert contention_fields(m, 2, on_cpu=True)["thread_shortfall"] is True  # 1.2 < 1.6
    assert contention_fields(m, 1, on_cpu=True)["thread_shortfall"] is False
    assert contention_fields(m, 2, on_cpu=False)["thread_shortfall"] is None


def test_marks_and_legend():
    both = {"contended": True, "thread_shortfall": True}
    assert threads.marks(both) == threads.CONTENDED_MARK + threads.SHORTFALL_MARK
    assert threads.marks({"contended": None}) == "" and threads.marks({}) == ""
    assert threads.legend([{}, {"contended": False}]) == []
    [line] = threads.legend([{}, {"thread_shortfall": True}])
    assert line.startswith(threads.SHORTFALL_MARK)


@pytest.mark.skipif(not Path("/proc/stat").exists(), reason="needs Linux's /proc/stat")
def test_a_busy_process_on_our_cpus_marks_the_window_contended():
    """A spinning neighbour on the same CPUs as this process: whether it gets a CPU of
    its own or shares ours, it takes far more than CONTENDED_SHARE of them."""
    cpus = allowed_cpus()
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        os.sched_setaffinity(busy.pid, cpus)
        time.sleep(0.2)  # let it start spinning
        with CpuMeter() as meter:
            end = time.perf_counter() + 0.5
            while time.perf_counter() < end:  # our own work, one thread
                pass
    finally:
        busy.kill()
        busy.wait()
    assert meter.unknown is None
    assert meter.contended is True, meter
    assert meter.other_cpu_share > threads.CONTENDED_SHARE
    fields = contention_fields(meter, threads_requested=1, on_cpu=True)
    assert fields["contended"] is True and 0 < fields["other_cpu_share"] <= 1


def test_own_child_processes_count_as_ours_when_asked():
    """A real-data cell's loader workers are processes of its own (a DataLoader's): with
    children=True their CPU time in the window is the cell's, not contention."""
    after = stat((100, 0, 0, 0, 0, 0, 0, 0, 0, 0), (100, 0, 0, 0, 0, 0, 0, 0, 0, 0))
    for children, other in ((False, 1.0), (True, 0.2)):
        texts, times = iter([stat(IDLE, IDLE), after]), iter([(10.0, 0.0), (11.0, 1.0)])
        kids = iter([{7: 5.0}, {7: 5.6, 8: 0.2}])  # one worker went on, one started
        meter = CpuMeter(
            read_stat=texts.__next__,
            clock=times.__next__,
            cpus=[0, 1],
            hz=100.0,
            children=children,
            read_children=kids.__next__,
        )
        with meter:
            pass
        assert meter.other_s == pytest.approx(other)
    assert meter.children_s == pytest.approx(0.8) and meter.threads_used == pytest.approx(1.8)


@pytest.mark.skipif(not Path("/proc/stat").exists(), reason="needs Linux's /proc")
def test_a_spinning_child_is_read_from_proc_as_our_own_work():
    cpus = allowed_cpus()
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        os.sched_setaffinity(busy.pid, cpus)
        time.sleep(0.2)
        assert busy.pid in threads.children_cpu_s()
        with CpuMeter(children=True) as meter:
            time.sleep(0.5)
    finally:
        busy.kill()
        busy.wait()
    # (whether the window is contended depends on the rest of the machine: the
    # arithmetic is the test above's)
    assert meter.children_s > 0.25 and meter.threads_used > 0.5, meter


def test_the_records_describe_the_thresholds_in_force():
    from xfbench.harness import fields

    text = {f.name: f.meaning for f in fields.CONTENTION}
    assert f"{threads.CONTENDED_SHARE * 100:g} %" in text["contended"]
    assert f"{threads.SHORTFALL_RATIO:g} x" in text["thread_shortfall"]
