"""Published numbers beside ours where the device matches (data/anchors.toml).

An anchor is one published measurement: ResNet-50 training images/s, or a transformer's
training tokens/s, on one GPU at a precision, or one square GEMM's TFLOP/s. The report lists, for every one of our cells on a
GPU whose name contains the anchor's device, our number, the published one and their
ratio, with the publisher's setting and source: a ratio far below 1 on the same GPU says to
suspect our adapter first. Nothing is shown where no device matches (a CPU-only run).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from xfbench.report.model import Report
from xfbench.report.tables import Table, _t

DATA = Path(__file__).parent / "data" / "anchors.toml"
# Training anchors: the network each is for, its unit and what the table calls it.
TRAINING = {
    "resnet50_train": ("resnet50", "images/s", "ResNet-50 training"),
    "gpt2_train": ("gpt2", "tokens/s", "GPT-2 124M training"),
    "bert_base_train": ("bert_base", "tokens/s", "BERT-base training"),
}
KINDS = (*TRAINING, "gemm")


@dataclass(frozen=True)
class Anchor:
    kind: str  # one of KINDS
    device: str  # substring of the GPU's name
    precision: str  # fp32, tf32, bf16, fp16
    value: float  # published (the low end of a range)
    high: float | None  # the high end of a published range, or None
    unit: str
    setting: str
    source: str
    n: int | None = None  # GEMM size

    @property
    def published(self) -> str:
        return f"{self.value:g}" + (f"-{self.high:g}" if self.high else "") + f" {self.unit}"


@lru_cache(maxsize=1)
def _data() -> dict:
    """anchors.toml, read once: the anchors and the datasheets."""
    return tomllib.loads(DATA.read_text(encoding="utf-8"))


@lru_cache(maxsize=1)
def anchors() -> tuple[Anchor, ...]:
    doc = _data()
    out = []
    for a in doc.get("anchor", []):
        if a["kind"] not in KINDS:
            raise ValueError(f"{DATA}: unknown anchor kind {a['kind']!r}; valid: {KINDS}")
        out.append(
            Anchor(
                kind=a["kind"],
                device=a["device"],
                precision=a["precision"],
                value=float(a["value"]),
                high=float(a["high"]) if "high" in a else None,
                unit=a["unit"],
                setting=a["setting"],
                source=a["source"],
                n=a.get("n"),
            )
        )
    return tuple(out)


@dataclass(frozen=True)
class Datasheet:
    device: str  # how NVML's name of the GPU ends
    name: str
    memory_gbps: float
    peaks_tflops: dict  # dense, per precision
    source: str


@lru_cache(maxsize=1)
def datasheets() -> tuple[Datasheet, ...]:
    doc = _data()
    return tuple(
        Datasheet(
            device=d["device"],
            name=d["name"],
            memory_gbps=float(d["memory_gbps"]),
            peaks_tflops={p: float(d[p]) for p in ("fp32", "tf32", "bf16", "fp16") if p in d},
            source=d["source"],
        )
        for d in doc.get("datasheet", [])
    )


def datasheet_for(device_name: str) -> Datasheet | None:
    """The datasheet of a GPU by NVML's name (its end), None for one not listed."""
    for d in datasheets():
        if device_name.strip().endswith(d.device):
            return d
    return None


@dataclass
class Match:
    anchor: Anchor
    machine: str
    device_name: str
    what: str  # our framework / mode, or GEMM implementation
    ours: float  # in the anchor's unit
    ours_setting: str  # our batch or size, so a reader sees how the two differ

    @property
    def ratio(self) -> str:
        """Ours over the published value (over each end of a published range)."""
        low = self.ours / self.anchor.value
        if self.anchor.high:
            return f"{self.ours / self.anchor.high:.2f}-{low:.2f}x"
        return f"{low:.2f}x"


def matches(report: Report) -> list[Match]:
    found = []
    for a in anchors():
        for m in report.machines:
            if a.kind in TRAINING:
                network, unit, _ = TRAINING[a.kind]
                for r in m.results.values():
                    if (
                        r.ok
                        and r.accelerator
                        and r.task == "train"
                        and r.network == network
                        and r.scale == "full"
                        and r.precision == a.precision
                        and a.device in r.device_name
                    ):
                        per_sample = (r.tokens or 0) if unit == "tokens/s" else 1
                        found.append(
                            Match(
                                anchor=a,
                                machine=m.short,
                                device_name=r.device_name,
                                what=f"{r.framework} {r.mode}",
                                ours=r.batch_size * per_sample / r.median,
                                ours_setting=f"batch {r.batch_size}"
                                + (f" x {r.tokens} tokens" if r.tokens else ""),
                            )
                        )
            else:
                for g in m.gemm:
                    if (
                        g["device"] != "cpu"
                        and g["dtype"] == a.precision
                        and g["size"] == a.n
                        and a.device in g["device_name"]
                    ):
                        found.append(
                            Match(
                                anchor=a,
                                machine=m.short,
                                device_name=g["device_name"],
                                what=g["implementation"],
                                ours=g["tflops"],
                                ours_setting=f"n {g['size']:g}",
                            )
                        )
    return found


def anchors_table(report: Report) -> Table | None:
    found = matches(report)
    if not found:
        return None
    several = len(report.machines) > 1
    rows = [
        ([_t(f.machine)] if several else [])
        + [
            _t(f.device_name),
            _t(
                f"{TRAINING[f.anchor.kind][2] if f.anchor.kind in TRAINING else 'GEMM'}, "
                f"{f.anchor.precision}"
            ),
            _t(f.what),
            _t(f"{f.ours:.4g} {f.anchor.unit} ({f.ours_setting})"),
            _t(f.anchor.published),
            _t(f.ratio),
            _t(f"{f.anchor.setting}. Source: {f.anchor.source}"),
        ]
        for f in found
    ]
    return Table(
        "Beside published numbers",
        (["machine"] if several else [])
        + [
            "device",
            "measurement",
            "ours by",
            "ours",
            "published",
            "ours / published",
            "published setting and source",
        ],
        rows,
        caption="Published measurements on the same GPU model (data/anchors.toml). Their "
        "settings differ from our cells (batch size, data pipeline, tuning): read a ratio "
        "far below 1 as a reason to check our adapter, not as a verdict.",
        anchor="anchors",
        text_cols=4 if several else 3,
    )
