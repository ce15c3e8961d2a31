"""Each training cell's model FLOPs utilisation (MFU), filled once a run's roofs and its
cells are both in (the runner's merge): the model's FLOPs a step (the spec's, the forward
three times) over the step's time, over the peak the run measured for the cell's precision
where it ran (roofs.json: the CPU at the cell's threads, or its GPU). On the CPU TF32 is
fp32. Where no such peak was measured the field is null and the reason says why. The
report's "% of peak" may stand higher: it takes the best peak any suite measured there."""

from __future__ import annotations

from collections.abc import Iterable

from xfbench.roofline.roofs import key


def mfu_fields(info: dict, roofs: dict) -> dict:
    """{"mfu", "mfu_peak_tflops", "mfu_reason"} of one training record."""
    gpu = str(info.get("device", "cpu")) != "cpu"
    where = key(info.get("threads"), info["device"] if gpu else None)
    precision = info.get("precision", "fp32")
    dtype = "fp32" if precision == "tf32" and not gpu else precision
    roof = roofs.get(where) or {}
    peak = roof.get(f"{dtype}_peak_tflops")
    achieved = info.get("achieved_tflops")
    if not isinstance(peak, (int, float)) or peak <= 0:
        why = roof.get("error") or (
            f"no {dtype} peak measured at {where}" if roof else f"no roofs measured at {where}"
        )
        return {"mfu": None, "mfu_peak_tflops": None, "mfu_reason": why}
    if not isinstance(achieved, (int, float)):
        return {"mfu": None, "mfu_peak_tflops": peak, "mfu_reason": "no achieved TFLOP/s"}
    return {"mfu": achieved / peak, "mfu_peak_tflops": peak, "mfu_reason": None}


def fill_mfu(infos: Iterable[dict], roofs: dict) -> None:
    """Every training record of infos given its MFU against roofs (a run's roofs.json)."""
    for info in infos:
        if info.get("kind") == "train" and info.get("status") == "ok":
            info.update(mfu_fields(info, roofs))
