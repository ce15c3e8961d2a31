"""Compare GEMM results with published numbers: `python -m xfbench.gemm.compare RESULTS.json ...`

Prints one compact table of the GEMM records in pytest-benchmark JSON files:
TFLOP/s, share of datasheet peak, share of the best implementation, CuPy over
torch.matmul, and the published cuBLAS figure for that square size on that GPU (from
xfbench/published.toml) beside ours. With --min-ratio R it exits 1 when
CuPy reaches less than R times torch.matmul's TFLOP/s on any (shape, dtype,
device) that both ran (--dtype narrows the rows and the check).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tabulate import tabulate

from xfbench import command_line
from xfbench.errors import UsageError
from xfbench.gemm.best import fill_share_of_best
from xfbench.published import published_figure

COLUMNS = (
    "device",
    "shape",
    "dtype",
    "impl",
    "TFLOP/s",
    "% peak",
    "% best",
    "cupy/torch",
    "published",
    "rel. error",
)


def load(paths: list[str]) -> list[dict]:
    records = []
    for path in paths:
        data = json.loads(Path(path).read_text())
        records += [
            b["extra_info"]
            for b in data.get("benchmarks", [])
            if b.get("extra_info", {}).get("suite") == "gemm"
        ]
    return records


def _pct(x) -> str:
    return "" if x is None else f"{100 * x:.1f}"


def cupy_over_torch(records: list[dict]) -> dict[tuple, float]:
    """(m, n, k, dtype, device) -> CuPy's TFLOP/s over torch.matmul's."""
    by = {
        (r["impl"], r["m"], r["n"], r["k"], r["dtype"], r["device"]): r["tflops"]
        for r in records
        if r.get("status") == "ok"
    }
    return {
        key[1:]: tflops / by[("torch", *key[1:])]
        for key, tflops in by.items()
        if key[0] == "cupy" and by.get(("torch", *key[1:]))
    }


def table(records: list[dict]) -> str:
    ratios = cupy_over_torch(records)
    rows = []
    for r in sorted(
        records,
        key=lambda r: (
            r["device"],
            r["m"] * r["n"] * r["k"],
            r["shape"],
            r["dtype"],
            -(r.get("tflops") or 0),
        ),
    ):
        key = (r["m"], r["n"], r["k"], r["dtype"], r["device"])
        square = r["m"] if r["m"] == r["n"] == r["k"] else None
        anchor = (
            published_figure("gemm", r.get("device_name"), r["dtype"], n=square) if square else None
        )
        published = anchor.value if anchor else None
        ok = r.get("status") == "ok"
        name = r.get("device_name") or ""
        rows.append(
            [
                r["device"] if name in ("", "cpu") else f"{r['device']} {name}",
                r["shape"],
                r["dtype"],
                r["impl"],
                f"{r['tflops']:.4g}" if ok else r.get("status", ""),
                _pct(r.get("peak_share")),
                _pct(r.get("share_of_best")),
                f"{ratios[key]:.3f}" if r["impl"] == "cupy" and key in ratios else "",
                "" if published is None else f"{published:g}",
                f"{r['check_error']:.1e}" if "check_error" in r else "",
            ]
        )
    return tabulate(rows, headers=COLUMNS, tablefmt="github", disable_numparse=True)


def main(argv: list[str] | None = None) -> int:
    p = command_line.ArgumentParser(
        prog="python -m xfbench.gemm.compare", description=__doc__.splitlines()[0]
    )
    p.add_argument(
        "results", nargs="+", help="pytest-benchmark JSON files from suites/test_gemm.py"
    )
    p.add_argument("--dtype", action="append", help="only this dtype (repeatable)")
    p.add_argument(
        "--min-ratio",
        default=None,
        help="exit 1 when CuPy's TFLOP/s is below this share of torch.matmul's",
    )
    args = command_line.parse_command_line(p, argv)
    if isinstance(args, int):
        return args
    try:
        if args.min_ratio is not None:
            args.min_ratio = command_line.number("--min-ratio", args.min_ratio, what="a share")
    except UsageError as e:
        print(f"{p.prog}: {e}", file=sys.stderr)
        return 2
    try:
        records = load(args.results)
    except (OSError, ValueError) as e:
        print(f"xfbench.gemm.compare: cannot read results: {e}", file=sys.stderr)
        return 2
    if args.dtype:
        records = [r for r in records if r["dtype"] in args.dtype]
    if not records:
        print("xfbench.gemm.compare: no GEMM results in those files", file=sys.stderr)
        return 2
    fill_share_of_best(records)
    print(table(records))
    if args.min_ratio is None:
        return 0
    return _check_ratios(records, args.min_ratio)


def _check_ratios(records: list[dict], min_ratio: float) -> int:
    """--min-ratio: each cupy/torch ratio said ok or FAIL; 1 when one is low or none exist."""
    ratios = cupy_over_torch(records)
    if not ratios:
        print(
            "xfbench.gemm.compare: no (shape, dtype, device) where both cupy and torch ran",
            file=sys.stderr,
        )
        return 1
    low = {k: v for k, v in ratios.items() if v < min_ratio}
    for (m, n, k, dtype, device), v in sorted(ratios.items()):
        verdict = "FAIL" if (m, n, k, dtype, device) in low else "ok"
        print(
            f"{verdict}: cupy/torch = {v:.3f} at {m}x{n}x{k} {dtype} on {device} "
            f"(needed >= {min_ratio})"
        )
    return 1 if low else 0


if __name__ == "__main__":
    sys.exit(main())
