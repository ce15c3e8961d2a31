"""Table 7's training cells beside the published training anchors of their network
(xfbench/published.toml: ResNet-50 images/s, a transformer's tokens/s) on a GPU of the
anchor's model, at its precision, full size (report/anchors.py lists them); and the GPU
window's summary of ResNet-50's training cells beside them."""

from __future__ import annotations

from tabulate import tabulate

from xfbench.networks.report.cells import cells_of, machine_cells
from xfbench.published import Anchor, gpu_for
from xfbench.report.api import Machine, Report, Run, published_matches
from xfbench.roofline.mfu import datasheet_fields

# Its kinds of anchor (xfbench/published.toml): the network each is for, its unit, and
# what a table calls its measurement.
TRAINING = {
    "resnet50_train": ("resnet50", "images/s", "ResNet-50 training"),
    "gpt2_train": ("gpt2", "tokens/s", "GPT-2 124M training"),
    "bert_base_train": ("bert_base", "tokens/s", "BERT-base training"),
}
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
            "utilisation": utilisation(r.info),
        }
        for r in machine_cells(m).results.values()
        if r.ok
        and r.accelerator
        and r.task == "train"
        and r.network == network
        and r.scale == "full"
        and r.precision == anchor.precision
        and gpu_for(r.device_name) == anchor.gpu
    ]


def utilisation(info: dict) -> str:
    """MFU both ways: over the datasheet's dense peak, as PaLM and llm.c report it (its
    FLOPs counted as it says), and over the peak the run measured, where it has one."""
    sheet = datasheet_fields(info)
    if sheet["mfu_datasheet"] is None:
        return ""
    text = (f"MFU {sheet['mfu_datasheet']:.1%} of the datasheet's "
            f"{sheet['mfu_datasheet_peak_tflops']:g} TFLOP/s at {sheet['mfu_datasheet_flops']}")  # fmt: skip
    if isinstance(info.get("mfu"), float):
        text += f", {info['mfu']:.1%} of the {info['mfu_peak_tflops']:.4g} the run measured"
    return text


def resnet50_training(run: Run, report: Report) -> str:
    """The acceptance summary's section (Hooks.acceptance, FromSweeps): every ResNet-50 training
    cell of the sweeps, with the published figure the report's anchors match to it (on an
    H100; none elsewhere)."""
    cells = [r for r in cells_of(run) if r.ok and r.task == "train" and r.network == "resnet50"]
    if not cells:
        return ""
    published = {
        (m.device_name, m.what, m.anchor.precision, m.ours_setting): m
        for m in published_matches(report)
        if m.anchor.kind == "resnet50_train"
    }
    rows = []
    for r in cells:
        what = f"{r.framework} {r.mode}"
        m = published.get((r.device_name, what, r.precision, f"batch {r.batch_size}"))
        rows.append(
            [r.device_name, what, r.precision, r.batch_size, r.info.get("layout", ""),
             f"{r.batch_size / r.median:.0f}", m.anchor.published if m else "", m.ratio if m else ""]
        )  # fmt: skip
    headers = [
        "device",
        "ours by",
        "precision",
        "batch",
        "layout",
        "images/s",
        "published",
        "ours / published",
    ]
    return "## ResNet-50 training\n\n" + tabulate(
        sorted(rows, key=str), headers=headers, tablefmt="github", disable_numparse=True
    )
