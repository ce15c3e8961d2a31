"""One measurement: build, compile (timed apart), warm up, time, record.

The timed call is the workload's step, which returns only once the device has
finished; pytest-benchmark's pedantic mode times each call separately, so the
median of the rounds is the seconds per mini-batch quoted everywhere.
"""

from __future__ import annotations

import math
import re
import statistics
import time
from dataclasses import dataclass
from typing import Any

from xfbench import environment, machine, records
from xfbench.adapters import Cell, get_adapter
from xfbench.data.readers import DataError, one_line
from xfbench.errors import CannotRun
from xfbench.harness import copies, memory, stats
from xfbench.harness.energy import EnergyMeter
from xfbench.harness.memory import peak_rss_bytes, reset_peak_rss
from xfbench.harness.presets import Preset
from xfbench.harness.threads import CpuMeter, allowed_cpus, contention_fields
from xfbench.models import Spec, get_spec, initial_weights

# Where a cell's initial weights come from: drawn from the seed in memory, or read
# back from the canonical ONNX file (written to the cache first when missing).
# Both give the same numbers; the ONNX route proves the exchange file is what ran.
WEIGHT_SOURCES = ("seed", "onnx")


# --data real: a cell is input-bound when, at the median, waiting for the next batch takes
# more than this share of the whole step (wait, copy to the device, and compute).
INPUT_BOUND_SHARE = 0.10
RESIDENT_ROUNDS = 5  # steps timed again on the last batch held on the device
# --profile-layers: profiled steps per cell, after its timed rounds (the median is kept)
LAYER_STEPS = 3


@dataclass(frozen=True)
class RealData:
    """Where --data real reads from, and the loader's worker count."""

    folder: str
    workers: int


class InputTimer:
    """The timed step of a real-data cell: ask the pipeline for the next batch (the wait),
    hand it to the workload, step. Each part's time is kept per step."""

    def __init__(self, work, pipeline, folder: str = ""):
        self.work, self.pipeline, self.folder = work, pipeline, folder
        self.waits: list[float] = []
        self.steps: list[float] = []

    def next_batch(self):
        """The pipeline's next batch; any failure inside it is one line (DataError)."""
        try:
            return next(self.pipeline)
        except DataError as e:  # from a worker process: its traceback is in the message
            raise DataError(one_line(str(e))) from None
        except Exception as e:  # the pipeline's own (tf.data's decode_jpeg, ...)
            # the first line, less TensorFlow's {{function_node ...}} prefixes
            first = re.sub(r"\{\{[^}]*\}\}\s*", "", (str(e).strip().splitlines() or [""])[0])
            raise DataError(
                f"{self.folder}: the input pipeline failed ({type(e).__name__}: {first})"
            ) from None

    def close(self) -> None:
        """Stop the pipeline's workers now, not when the garbage collector gets to them:
        the next cell in this process must not share its CPUs with them."""
        close = getattr(self.pipeline, "close", None)
        self.pipeline = None
        if close:
            close()

    def __call__(self) -> None:
        t0 = time.perf_counter()
        x, y = self.next_batch()
        t1 = time.perf_counter()
        self.work.feed(x, y)
        self.work.step()
        t2 = time.perf_counter()
        self.waits.append(t1 - t0)
        self.steps.append(t2 - t1)


def initial(spec: Spec, seed: int = 0, source: str = "seed"):
    """The canonical initial weights of spec, from the seed or from its ONNX file."""
    if source == "onnx":
        from xfbench.exchange import canonical_weights

        return canonical_weights(spec, seed)
    if source != "seed":
        raise ValueError(f"unknown weight source {source!r}; valid: {', '.join(WEIGHT_SOURCES)}")
    return initial_weights(spec, seed)


def build(cell: Cell, seed: int = 0, weights: str = "seed"):
    """The adapter, spec and built workload of a cell; raises CannotRun with the reason."""
    adapter = get_adapter(cell.framework)
    reason = adapter.import_error() or adapter.check(cell)
    if reason:
        raise CannotRun(reason)
    spec = get_spec(cell.network, cell.scale, cell.tokens)
    memory.check_fits(
        spec=spec,
        task=cell.task,
        batch=cell.batch_size,
        precision=cell.precision,
        device=cell.device,
        scores_kept=adapter.attention_scores_kept(cell),
    )
    workload = adapter.build(spec, cell, initial(spec, seed, weights))
    return adapter, spec, workload


def _real_data_check(cell: Cell, real: RealData | None) -> None:
    """CannotRun where a --data real cell has no data set, or no --data-dir."""
    if cell.data != "real":
        return
    from xfbench.data.sources import DATASET

    if cell.network not in DATASET:
        from xfbench.models import TRANSFORMERS

        why = (
            "no text data set is built for the transformers yet (docs/models.md)"
            if cell.network in TRANSFORMERS
            else "the paper ran it on synthetic data"
        )
        raise CannotRun(f"{cell.network} has no real data set ({why})")
    if real is None:
        raise CannotRun("--data real needs --data-dir")


def _warm_up(step, *, compile_s: float, preset: Preset, ci_target, real_data: bool):
    """The untimed steps after the first (a real-data cell at least one: it starts the
    loader's workers), and the rounds they size: (rounds, what chose them)."""
    pilot = []  # each warm-up step's time: the spread that sizes adaptive rounds
    for _ in range(max(preset.warmup, 1 if real_data else 0)):
        t0 = time.perf_counter()
        step()
        pilot.append(time.perf_counter() - t0)
    warm_step = sum(pilot) / len(pilot) if pilot else compile_s
    return preset.rounds(warm_step, pilot, ci_target)


def measure(
    benchmark,
    cell: Cell,
    *,
    preset: Preset,
    threads_config: dict[str, Any],
    weights: str = "seed",
    ci_target: float | None = None,
    real: RealData | None = None,
    profile_layers: bool = False,
) -> dict:
    """Run one cell under pytest-benchmark and return the record stored in extra_info.
    With --data real, each timed step takes the next batch from the framework's own input
    pipeline (the wait is part of the step, and also recorded apart); raises
    data.readers.DataError, one line, for a data set that cannot be used."""
    _real_data_check(cell, real)
    copy = copies.Copy.from_env()  # one of several copies run at once (--copies)
    name = f"{cell.task}-{cell.id}"
    own_peak = reset_peak_rss()
    t0 = time.perf_counter()
    adapter, spec, work = build(cell, weights=weights)
    build_s = time.perf_counter() - t0
    timer = None
    try:
        if cell.data == "real":
            from xfbench.data.sources import source_for

            source = source_for(spec, real.folder)
            pipeline = work.input_batches(source, 0, real.workers)
            timer = InputTimer(work, pipeline, f"{real.folder}/{source.dataset}")
            work.feed(*timer.next_batch())  # the first batch, for the compile step
        work.reset_peak_memory()
        t0 = time.perf_counter()
        work.prepare()
        work.step()
        compile_s = time.perf_counter() - t0
        compiled = work.compile_facts()  # raises when a compiled mode fell back

        step = environment.slowed(cell.framework, timer or work.step)  # real data: waits too
        rounds, chosen_by = _warm_up(
            step, compile_s=compile_s, preset=preset, ci_target=ci_target, real_data=bool(timer)
        )
        if timer:
            timer.waits.clear()
            timer.steps.clear()
        together = copy.meet(name, "start", copy.wait_s) if copy else None
        window = time.time()
        # a real-data cell's loader worker processes are its own work, not contention
        with CpuMeter(children=timer is not None) as meter, EnergyMeter(cell.device) as energy:
            benchmark.pedantic(step, rounds=rounds, iterations=1, warmup_rounds=0)
        window = [window, time.time()]
        compiled.update(work.replay_facts())  # raises where the mode's claim does not hold
        if copy:  # the load stays on until every copy has finished its rounds
            copy.meet(name, "end", max(30.0, 3 * (window[1] - window[0])), step=work.step)
        record = _record(
            benchmark,
            cell,
            spec=spec,
            work=work,
            adapter=adapter,
            preset=preset,
            rounds=rounds,
            build_s=build_s,
            compile_s=compile_s,
            meter=meter,
            threads_config=threads_config,
            own_peak=own_peak,
        )
        record["weights_source"] = weights
        record.update(energy.fields(rounds, cell.batch_size))
        if timer:
            record.update(
                _real_data_fields(
                    timer=timer, work=work, cell=cell, source=source, real=real, record=record
                )
            )
        record.update(compiled)
        record.update(_confidence(benchmark, ci_target, chosen_by))
        if profile_layers:  # after the timed rounds (and every copy's), never inside them
            record.update(_layer_times(adapter, work, cell))
        if copy:
            record.update(copy_index=copy.index, copy_window_s=window, copies_together=together)
        benchmark.extra_info.update(record)
        return record
    finally:
        if timer:
            timer.close()
        work.close()


def _real_data_fields(timer: InputTimer, work, cell: Cell, source, real: RealData, record):
    """What a real-data cell adds: the wait for data and the compute per step, throughput
    end to end and with the batch resident (the last batch, stepped again on the device),
    and whether the input bound the step."""
    resident = []
    for _ in range(RESIDENT_ROUNDS):
        t0 = time.perf_counter()
        work.step()
        resident.append(time.perf_counter() - t0)
    total = [w + s for w, s in zip(timer.waits, timer.steps, strict=True)]
    wait, whole = statistics.median(timer.waits), statistics.median(total)
    resident_s = statistics.median(resident)
    per_epoch = len(source) // cell.batch_size
    asked = getattr(work, "input_workers", None)  # where the pipeline runs other than asked
    return {
        "data_set": source.dataset,
        "data_dir": str(real.folder),
        "data_samples": len(source),
        "loader_workers": real.workers if asked is None else asked,
        "data_wait_s": wait,
        "data_wait_share": wait / whole if whole > 0 else None,
        "step_compute_s": statistics.median(timer.steps),
        "samples_per_s_end_to_end": cell.batch_size / whole if whole > 0 else None,
        "samples_per_s_resident": cell.batch_size / resident_s if resident_s > 0 else None,
        "input_bound": whole > 0 and wait / whole > INPUT_BOUND_SHARE,
        "input_bound_share": INPUT_BOUND_SHARE,
        # an epoch's time where the timed rounds covered one whole epoch
        "epoch_s": sum(total[:per_epoch]) if 0 < per_epoch <= len(total) else None,
    }


def _layer_times(adapter, work, cell: Cell) -> dict:
    """--profile-layers: the layers' times (roofline/layers.py), or why not."""
    reason = adapter.layer_times_reason(cell)
    if reason is None:
        try:
            return {"layer_times": work.layer_times(LAYER_STEPS)}
        except CannotRun as e:
            reason = str(e)
    return {"layer_times_reason": reason}


def _confidence(benchmark, target: float | None, chosen_by: str) -> dict:
    """The median's confidence interval from the timed rounds (harness.stats), and how
    the number of rounds was chosen."""
    data = benchmark.stats.stats.data if benchmark.stats else []
    if not data:
        return {}
    low, high, coverage = stats.median_ci(data)
    width = stats.half_width(data)
    target = target or stats.TARGET
    return {
        "ci_low_s": low,
        "ci_high_s": high,
        "ci_level": round(coverage, 4),
        "ci_method": stats.METHOD,
        "ci_half_width": width,
        "ci_target": target,
        "ci_target_met": width <= target,
        "rounds_chosen_by": chosen_by,
    }


def _record(
    benchmark,
    cell,
    *,
    spec: Spec,
    work,
    adapter,
    preset,
    rounds,
    build_s,
    compile_s,
    meter: CpuMeter,
    threads_config,
    own_peak,
) -> dict:
    stats = benchmark.stats.stats if benchmark.stats else None
    median = stats.median if stats else meter.wall / rounds
    flops = spec.flops(cell.task, cell.batch_size)
    device_peak = work.peak_device_memory()
    record = {
        **records.header(cell.task),
        **cell.as_dict(),
        "preset": preset.name,
        "status": "ok",
        "seconds_per_batch": median,
        "samples_per_s": cell.batch_size / median if median > 0 else math.nan,
        "tokens_per_s": (
            cell.batch_size * spec.tokens / median if spec.tokens and median > 0 else None
        ),
        "flops_per_step": flops,
        "achieved_tflops": flops / median / 1e12 if median > 0 else math.nan,
        "param_count": spec.param_count,
        "build_s": build_s,
        "compile_s": compile_s,
        "warmup_steps": preset.warmup,
        "rounds": rounds,
        "peak_host_rss_bytes": peak_rss_bytes(),
        "peak_host_rss_scope": "cell" if own_peak else "process",
        "malloc": memory.SETTING,
        "peak_device_bytes": device_peak,
        "threads_requested": cell.threads,
        "threads_used": round(meter.threads_used, 2),
        **contention_fields(meter, cell.threads, on_cpu=cell.device == "cpu"),
        "threads_config": {"cpus_allowed": len(allowed_cpus()), **threads_config},
        "versions": adapter.versions(),
        "cpu_model": machine.cpu_model(),
        "cpu_isa": machine.cpu()["isa"],
    }
    record.update(work.info)
    return record
