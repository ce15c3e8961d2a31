"""Table 7's training cells beside the published training anchors of their network
(xfbench/published.toml: ResNet-50 images/s, a transformer's tokens/s) on a GPU of the
anchor's model, at its precision, full size (report/anchors.py lists them)."""

from __future__ import annotations

from xfbench.published import TRAINING, Anchor, gpu_for
from xfbench.report.api import Machine

# what a table calls each kind's measurement
ANCHORS = {kind: title for kind, (_, _, title) in TRAINING.items()}


def anchor_matches(m: Machine, anchor: Anchor) -> list[dict]:
    """Our training cells on a GPU of the anchor's model, in the anchor's unit."""
    network, unit, _ = TRAINING[anchor.kind]
    return [
        {
            "device_name": r.device_name,
            "what": f"{r.framework} {r.mode}",
            "ours": r.batch_size * ((r.tokens or 0) if unit == "tokens/s" else 1) / r.median,
            "ours_setting": f"batch {r.batch_size}" + (f" x {r.tokens} tokens" if r.tokens else ""),
        }
        for r in m.results.values()
        if r.ok
        and r.accelerator
        and r.task == "train"
        and r.network == network
        and r.scale == "full"
        and r.precision == anchor.precision
        and gpu_for(r.device_name) == anchor.gpu
    ]
