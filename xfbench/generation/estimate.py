"""About how long a generation cell takes (`xfbench run --dry-run`): its generations (the
compiling one, the checked one, the warm-ups, the timed ones), each a prefill at the
assumed FLOP rate and decode steps that read every weight at ASSUMED_GBPS_PER_THREAD, and
its check in float64 at a quarter of the FLOP rate (xfbench/harness/estimate.py)."""

from __future__ import annotations

from xfbench.harness.estimate import ASSUMED_GBPS_PER_THREAD, BUILD_S, rate
from xfbench.harness.presets import Preset


def seconds(cell, preset: Preset) -> float:
    one, check = one_generation(cell, cell.batch_size)
    return BUILD_S + check + (2 + preset.warmup + preset.min_rounds) * one


def one_generation(cell, batch: int) -> tuple[float, float]:
    """(one generation of batch sequences, its float64 check), seconds."""
    from xfbench.models import get_spec

    spec = get_spec(cell.network, cell.scale)
    flop_rate = rate(cell)
    tokens = batch * (cell.prompt_tokens + cell.new_tokens)
    flops = 2 * spec.param_count * tokens
    read = 4 * spec.param_count / (ASSUMED_GBPS_PER_THREAD * 1e9 * max(1, cell.threads))
    decode = max(2 * spec.param_count * batch / flop_rate, read)
    one = 2 * spec.param_count * batch * cell.prompt_tokens / flop_rate
    one += (cell.new_tokens - 1) * decode
    return one, 4 * flops / flop_rate
