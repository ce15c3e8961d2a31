"""Measured per-layer time beside each layer's FLOPs and arithmetic intensity.

`xfbench profile NETWORK --framework FRAMEWORK` builds the cell (eager PyTorch by default),
warms it up, times a few plain steps, then profiles a few more (Workload.layer_times) and
prints every top-level layer's forward and backward time, its share of the step, its
achieved FLOP/s and its FLOP/B. `xfbench run --profile-layers` does the same after each
cell's timed rounds and keeps the times in the record (`layer_times`).

The profiler costs time of its own (a few microseconds an operator), so the profiled
step is slower than the timed one, most at smoke sizes: the table gives both.
"""

from __future__ import annotations

import statistics
import time

from xfbench.harness.measure import LAYER_STEPS
from xfbench.models import Spec
from xfbench.roofline.profile import VALUE_BYTES, Row, _human, rows, split


def top_rows(spec: Spec, batch: int, precision: str = "fp32") -> list[Row]:
    """One forward row per top-level spec layer (a block's parts summed), the layers that
    Workload.layer_times names."""
    parts = rows(spec, batch, precision)
    out, i = [], 0
    for layer, x in spec.shapes:
        n = len(split(layer, x))
        group = parts[i : i + n]
        i += n
        out.append(
            Row(
                name=layer.name,
                kind=type(layer).__name__,
                out_shape=tuple(layer.out_shape(x)),
                params=sum(r.params for r in group),
                flops=sum(r.flops for r in group),
                in_bytes=sum(r.in_bytes for r in group),
                weight_bytes=sum(r.weight_bytes for r in group),
                out_bytes=sum(r.out_bytes for r in group),
            )
        )
    return out


def table_rows(spec: Spec, cell, times: list[dict]) -> list[dict]:
    """Each measured layer with its FLOPs (forward; backward twice that), FLOP/B and
    achieved GFLOP/s; the last row, outside the layers, has no FLOPs."""
    precision = cell.precision if cell.precision in VALUE_BYTES else "fp32"
    # times are in the spec's order (names repeat: AlexNet's relu), then the rest
    model = top_rows(spec, cell.batch_size, precision)
    training = cell.task == "train"
    step = sum(t["forward_s"] + (t["backward_s"] or 0.0) for t in times)
    out = []
    for i, t in enumerate(times):
        r = model[i] if i < len(model) else None  # None: the rest of the step
        seconds = t["forward_s"] + (t["backward_s"] or 0.0)
        flops = (3 if training else 1) * r.flops if r else None
        out.append(
            {
                "layer": t["layer"],
                "kind": r.kind if r else "",
                "forward_ms": t["forward_s"] * 1e3 if r else None,
                "backward_ms": t["backward_s"] * 1e3 if r and training else None,
                "total_ms": seconds * 1e3,
                "share": seconds / step if step else None,
                "gflops": flops / seconds / 1e9 if flops and seconds > 0 else None,
                "intensity": r.intensity if r else None,
            }
        )
    return out


HEADERS = [
    "layer",
    "kind",
    "forward ms",
    "backward ms",
    "total ms",
    "share of step",
    "GFLOP/s",
    "FLOP/B",
]


def text_rows(rows: list[dict]) -> list[list[str]]:
    def num(v, f="{:.3g}"):
        return "" if v is None else f.format(v)

    return [
        [
            r["layer"],
            r["kind"],
            num(r["forward_ms"]),
            num(r["backward_ms"]),
            num(r["total_ms"]),
            num(r["share"], "{:.1%}"),
            num(r["gflops"]),
            num(r["intensity"]),
        ]
        for r in rows
    ]


def measure(cell, warmup: int = 2, timed: int = 5) -> tuple[Spec, list[dict], float]:
    """Build a cell, warm it up, time `timed` plain steps (their median) and profile
    LAYER_STEPS more: (spec, layer times, the plain median in s). CannotRun: why not."""
    from xfbench.adapters import get_adapter
    from xfbench.errors import CannotRun
    from xfbench.harness.measure import build

    reason = get_adapter(cell.framework).layer_times_reason(cell)
    if reason:
        raise CannotRun(reason)
    _, spec, work = build(cell)
    try:
        work.prepare()
        for _ in range(1 + warmup):  # compile and warm-up, never profiled
            work.step()
        plain = []
        for _ in range(timed):
            t0 = time.perf_counter()
            work.step()
            plain.append(time.perf_counter() - t0)
        times = work.layer_times(LAYER_STEPS)
    finally:
        work.close()
    return spec, times, statistics.median(plain)


def report(spec: Spec, cell, times: list[dict], *, plain_s: float | None, fmt: str) -> str:
    from tabulate import tabulate

    body = text_rows(table_rows(spec, cell, times))
    if fmt == "csv":
        import csv
        import io

        buffer = io.StringIO()
        csv.writer(buffer).writerows([HEADERS, *body])
        return buffer.getvalue().rstrip("\n")
    profiled = sum(t["forward_s"] + (t["backward_s"] or 0.0) for t in times)
    head = (
        f"{spec.paper_name}, {cell.framework} {cell.mode}, {cell.task}, batch "
        f"{cell.batch_size}, {cell.precision}, {cell.device}, {cell.threads} thread(s): "
        f"profiled step {_human(profiled * 1e3)} ms (median of {LAYER_STEPS})"
    )
    if plain_s:
        head += f", the same step unprofiled {_human(plain_s * 1e3)} ms"
    return head + "\n\n" + tabulate(body, headers=HEADERS, tablefmt="github", disable_numparse=True)
