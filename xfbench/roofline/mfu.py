"""Each training cell's model FLOPs utilisation (MFU), filled once a run's roofs and its
cells are both in (the runner's merge): the model's FLOPs a step (the spec's, the forward
three times) over the step's time, over the peak the run measured for the cell's precision
where it ran (roofs.json: the CPU at the cell's threads, or its GPU). On the CPU TF32 is
fp32. Where no such peak was measured the field is null and the reason says why. The
report's "% of peak" may stand higher: it takes the best peak any suite measured there.

Beside it on a GPU, the MFU that PaLM and llm.c report: the model's FLOPs over the
datasheet's dense peak for the cell's precision (xfbench/published.toml). Its FLOPs are
the spec's but for a transformer, whose are counted a token as llm.c counts them: 6N for
the weights (N parameters: forward and both gradients) and 6LCT for attention's two
products of a causal model (L layers, width C, T positions; half of PaLM's 12LCT, which a
bidirectional model such as BERT keeps). GPT-2 small's three forwards with full attention
are 6 % above 6N + 6LCT."""

from __future__ import annotations

from collections.abc import Iterable

from xfbench.models import get_spec
from xfbench.models import layers as L
from xfbench.published import peak_tflops
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


def model_flops(info: dict) -> tuple[float, str]:
    """(the FLOPs of one training step as the datasheet MFU counts them, the formula)."""
    spec = get_spec(info["network"], info.get("scale", "full"))
    blocks = spec.layer(L.TransformerBlock)
    if not blocks:
        return float(info["flops_per_step"]), "3x the forward (the spec's)"
    n, layers = spec.param_count, len(blocks)
    width, positions = spec.layer(L.TokenEmbedding)[0].dim, info.get("tokens") or spec.tokens
    attention = 6 if blocks[0].causal else 12
    per_token = 6 * n + attention * layers * width * positions
    formula = (f"{per_token:,} FLOPs a token as 6N + {attention}LCT: N {n:,}, L {layers}, "
               f"C {width}, T {positions}{', causal' if attention == 6 else ''}")  # fmt: skip
    return float(per_token * positions * info["batch_size"]), formula


def datasheet_fields(info: dict) -> dict:
    """{"mfu_datasheet", "mfu_datasheet_peak_tflops", "mfu_datasheet_flops"} of one
    training record: null on the CPU and on a GPU whose datasheet is not known."""
    peak = peak_tflops(info.get("device_name"), info.get("precision", "fp32"))
    seconds = info.get("seconds_per_batch")
    if str(info.get("device", "cpu")) == "cpu" or not peak or not seconds:
        return dict.fromkeys(("mfu_datasheet", "mfu_datasheet_peak_tflops", "mfu_datasheet_flops"))
    flops, formula = model_flops(info)
    return {
        "mfu_datasheet": flops / seconds / 1e12 / peak,
        "mfu_datasheet_peak_tflops": peak,
        "mfu_datasheet_flops": formula,
    }


def fill_mfu(infos: Iterable[dict], roofs: dict) -> None:
    """Every record of infos that ran (training records: the network suite chooses them)
    given its MFU against roofs (a run's roofs.json), and against the datasheet's peak."""
    for info in infos:
        if info.get("status") == "ok":
            info.update(mfu_fields(info, roofs))
            info.update(datasheet_fields(info))
