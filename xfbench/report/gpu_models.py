"""GPU models side by side, the buyer's view: each workload that two GPU models both ran,
the second's speed over the first's with its interval, beside what their datasheets
predict (xfbench/published.toml): the ratio of memory bandwidth for a workload bound by
memory (a decode step, which reads every weight once), of the peak at its type for one
bound by arithmetic (training, a prefill, a GEMM). A ratio whose interval leaves out its
prediction gets a note: such a workload is not bound by what the two GPUs differ in, or
something else differs (clocks, the host, the software).

A suite gives its workloads through its report module's `gpu_workloads(machine)`
(report/suites.py): Table 7's cells, GEMM's products, generation's decode steps. Several
runs of one model (its reference's windows) are pooled: the median of their times, the
interval spanning theirs.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace

from xfbench.report import suites
from xfbench.report.model import Report
from xfbench.report.table import Table, as_text


@dataclass(frozen=True, kw_only=True)
class Workload:
    device_name: str
    what: str  # one line naming it
    precision: str  # its arithmetic's type (the compute prediction's peak)
    bound: str  # "memory" or "compute": which datasheet ratio predicts it
    seconds: float
    low: float | None = None  # its interval, where its record has one
    high: float | None = None
    # what the cell's own profile shows holds it (its costliest kernel and that kernel's
    # share), where it was profiled
    profile: str = ""
    # the kind of published GPU-over-GPU ratio it stands beside (published.toml's
    # gpu_ratio: "decode", "training"), "" for none
    published_as: str = ""


def by_model(report: Report) -> dict[str, dict[str, list[Workload]]]:
    """{GPU model: {workload: its measurements}} over every machine of the report."""
    found: dict[str, dict[str, list[Workload]]] = {}
    for m in report.machines:
        mine: list[Workload] = []
        for suite in suites.declared():
            if suite.hooks.gpu_workloads:
                mine += suite.hooks.gpu_workloads(m)
        for w in mine:
            found.setdefault(w.device_name, {}).setdefault(w.what, []).append(w)
    return found


def pooled(runs: list[Workload]) -> Workload:
    lows = [w.low for w in runs if w.low is not None]
    highs = [w.high for w in runs if w.high is not None]
    known = len(lows) == len(highs) == len(runs)
    first = runs[0]
    return Workload(
        device_name=first.device_name, what=first.what, precision=first.precision,
        bound=first.bound, seconds=statistics.median(w.seconds for w in runs),
        low=min(lows) if known else None, high=max(highs) if known else None,
        profile=next((w.profile for w in runs if w.profile), ""),
        published_as=first.published_as,
    )  # fmt: skip


def predicted(a: str, b: str, w: Workload) -> float | None:
    """What the datasheets predict of b's speed over a's for this workload (None: a
    datasheet is not known)."""
    from xfbench.published import gpu_for

    sa, sb = gpu_for(a), gpu_for(b)
    if not (sa and sb):
        return None
    if w.bound == "memory":
        return sb.memory_gbps / sa.memory_gbps
    pa, pb = sa.peaks_tflops.get(w.precision), sb.peaks_tflops.get(w.precision)
    return pb / pa if pa and pb else None


def published_ratios(a: str, b: str, w: Workload) -> tuple:
    """The published ratios of b's model over a's that this workload stands beside."""
    from xfbench.published import gpu_ratios

    return gpu_ratios(a, b, w.published_as) if w.published_as else ()


def note(
    ratio: tuple, expect: float | None, bound: str, *, memory: float | None, profiles: str = ""
) -> str:
    """Why a ratio leaves out its prediction, where its interval does (memory: the two
    models' bandwidth ratio), with what the cells' own profiles show where they have one."""
    _, low, high = ratio
    if expect is None or low is None or low <= expect <= high:
        return ""
    if bound == "memory":
        if high < expect:
            return "below the prediction: not bound by memory bandwidth alone; " + (
                profiles or "no profile of its step says what holds it"
            )
        return "above the prediction: more differs than the datasheets say"
    if high < expect:
        return "below the prediction: not bound by arithmetic alone"
    if memory and memory > expect:
        return "above the prediction: partly bound by memory bandwidth, which differs more"
    return "above the prediction: more differs than the datasheets say"


def gpu_models_table(report: Report) -> Table | None:
    """The second GPU model (and any later) against the first, workload by workload."""
    models = by_model(report)
    if len(models) < 2:
        return None
    names = list(models)
    a, rows, shown = names[0], [], {}
    for b in names[1:]:
        for what in sorted(set(models[a]) & set(models[b])):
            wa, wb = pooled(models[a][what]), pooled(models[b][what])
            shown.update({(r.name, r.value): r for r in published_ratios(a, b, wa)})
            ratio = (
                wa.seconds / wb.seconds,
                wa.low / wb.high if wa.low and wb.high else None,
                wa.high / wb.low if wa.high and wb.low else None,
            )
            expect = predicted(a, b, wa)
            memory = predicted(a, b, replace(wa, bound="memory"))
            ci = f" ({ratio[1]:.3g}-{ratio[2]:.3g})" if ratio[1] else " (no interval)"
            profiles = "; ".join(f"{m}: {w.profile}" for m, w in ((a, wa), (b, wb)) if w.profile)
            rows.append([
                as_text(f"{b} / {a}"), as_text(what), as_text(f"{wa.seconds * 1e3:.4g}"),
                as_text(f"{wb.seconds * 1e3:.4g}"), as_text(f"{ratio[0]:.3g}x{ci}"),
                as_text(f"{expect:.3g}x ({wa.bound})" if expect else ""),
                as_text(", ".join(f"{r.value:.3g}x" for r in published_ratios(a, b, wa))),
                as_text(note(ratio, expect, wa.bound, memory=memory, profiles=profiles)),
            ])  # fmt: skip
    if not rows:
        return None
    return Table(
        "GPU models side by side: what the hardware predicts",
        [
            "models",
            "workload",
            "first, ms",
            "second, ms",
            "second's speed",
            "predicted",
            "published",
            "note",
        ],  # fmt: skip
        rows,
        anchor="gpu-models",
        text_cols=2,
        caption="Each workload both GPU models ran: the second's speed over the first's (the "
        "first's time over the second's), its interval from the two times' intervals (several "
        "runs of a model pooled: the median of their times, the interval spanning theirs), "
        "beside the datasheets' ratio of what bounds it: memory bandwidth for a decode step, "
        "the peak at its type for training, a prefill or a matrix product. A ratio whose "
        "interval leaves out its prediction is noted, with what each model's profile of "
        "the cell shows where it has one: its costliest kernel, and that kernel's share of "
        "the step's kernel time. Published: the same two models' ratio in MLPerf's results "
        "for the same kind of workload, 8 GPUs each, on larger models (published.toml names "
        "the result files): "
        + "; ".join(f"{r.value:.3g}x, {r.name}" for r in shown.values())
        + ".",
    )
