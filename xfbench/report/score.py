"""`xfbench score RESULTS`: one number for a machine against a reference result set.

The score is a weighted geometric mean, over the cells both measured, of the reference's
median time over this machine's (above 1: faster than the reference). Each network
weighs the same, however many cells it has (its cells' log ratios are averaged first),
so a network measured at more thread counts does not count for more. The reference is a
runner folder checked in under results/reference/ (the one sharing the most cells with
RESULTS, unless --reference names one); the output names it, the cells compared, the
weights, and how many of RESULTS' cells failed, since a machine that fails cells must not
score well by leaving out its slow ones.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from pathlib import Path

from xfbench import options

# In a checkout: results/reference/ beside the package.
REFERENCES = Path(__file__).resolve().parents[2] / "results" / "reference"
WEIGHTS = "each network equal (its cells' log ratios averaged first)"


@dataclass(kw_only=True)
class Score:
    value: float | None  # None when no cell is shared
    cells: int  # cells compared
    networks: int
    failed: int  # of RESULTS' cells
    total: int
    reference: str
    energy: float | None = None  # the same mean over samples per kJ, where both measured it
    energy_cells: int = 0


def _cells(run) -> dict:
    from xfbench.report.model import block_key, row_key

    out = {}
    for r in run.results:
        if r.ok and r.median > 0:
            col = ("acc", r.device) if r.accelerator else ("cpu", r.threads)
            out[(block_key(r), row_key(r), col)] = r
    return out


def score(results, reference) -> Score:
    """results and reference: report.load Runs."""
    mine, ref = _cells(results), _cells(reference)
    by_network: dict[str, list[float]] = {}
    for k, r in mine.items():
        if k in ref:
            by_network.setdefault(k[0][1], []).append(math.log(ref[k].median / r.median))
    value, cells = _mean(by_network)
    # samples per kJ, measured in both runs (never a typed wattage)
    by_network_energy: dict[str, list[float]] = {}
    for k, r in mine.items():
        a, b = r.info.get("samples_per_kj"), ref[k].info.get("samples_per_kj") if k in ref else None
        if isinstance(a, int | float) and isinstance(b, int | float) and a > 0 and b > 0:
            by_network_energy.setdefault(k[0][1], []).append(math.log(a / b))
    energy, energy_cells = _mean(by_network_energy)
    failed = sum(1 for f in results.results if not f.ok)
    return Score(
        value=value,
        cells=cells,
        networks=len(by_network),
        failed=failed,
        total=len(results.results),
        reference=reference.name,
        energy=energy,
        energy_cells=energy_cells,
    )


def _mean(by_network: dict[str, list[float]]) -> tuple[float | None, int]:
    """exp of the mean over networks of each network's mean log ratio, and the cells."""
    means = [sum(v) / len(v) for v in by_network.values()]
    value = math.exp(sum(means) / len(means)) if means else None
    return value, sum(len(v) for v in by_network.values())


def references() -> list[Path]:
    return sorted(p for p in REFERENCES.iterdir() if p.is_dir()) if REFERENCES.is_dir() else []


def load_run(path):
    from xfbench.report.load import load

    return load(path)


def describe(s: Score, price: dict | None = None) -> str:
    """The score line, with its method: what is averaged, over what, weighted how; then
    the energy score where both runs measured energy, and the score per $1,000 of a
    purchase price from a prices file (with its date and source)."""
    lines = [
        f"score {s.value:.3g} against {s.reference} (above 1: faster): geometric mean of "
        f"the reference's seconds over these, {s.cells} cells of {s.networks} networks, "
        f"weights: {WEIGHTS}; {s.failed} of {s.total} cells of RESULTS failed"
    ]
    if s.energy is not None:
        lines.append(
            f"energy score {s.energy:.3g} (above 1: more samples per kJ): the same mean of "
            f"samples per kJ over the reference's, {s.energy_cells} cells measured in both"
        )
    else:
        lines.append("energy score: none (energy was not measured in both runs)")
    if price and price.get("price_usd"):
        lines.append(
            f"score per $1,000: {s.value / price['price_usd'] * 1000:.3g} (price "
            f"${price['price_usd']:,.0f}, {price.get('price_date')}, {price.get('price_source')})"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from xfbench.report.load import LoadError, load

    p = options.ArgumentParser(
        prog="xfbench score",
        description="One number for RESULTS against a reference result set: the weighted "
        "geometric mean of the reference's seconds over these.",
    )
    p.add_argument("results", help="a runner folder or pytest-benchmark JSON file")
    p.add_argument(
        "--reference",
        help="a reference runner folder (default: the one under results/reference/ that "
        "shares the most cells with RESULTS)",
    )
    p.add_argument(
        "--prices",
        help="a prices file (as xfbench report --prices) giving RESULTS' machine a "
        "purchase price: adds the score per $1,000",
    )
    args = options.parse_command_line(p, argv)
    if isinstance(args, int):
        return args
    try:
        run = load(args.results)
        candidates = [Path(args.reference)] if args.reference else references()
        if not candidates:
            print(
                f"xfbench score: no reference: give --reference, or check one in under {REFERENCES}",
                file=sys.stderr,
            )
            return 2
        scores = [score(run, load(c)) for c in candidates]
    except LoadError as e:
        print(f"xfbench score: {e}", file=sys.stderr)
        return 1
    best = max(scores, key=lambda s: s.cells)
    if best.value is None:
        print(
            f"xfbench score: {args.results} shares no cell with {best.reference}", file=sys.stderr
        )
        return 1
    price = None
    if args.prices:
        from xfbench.report.model import build
        from xfbench.report.procurement import PricesError, load_prices

        try:
            [machine] = build([run], prices=load_prices(args.prices)).machines
        except PricesError as e:
            print(f"xfbench score: {e}", file=sys.stderr)
            return 1
        if not machine.prices:
            print(f"xfbench score: {args.prices} has no entry for {machine.label}", file=sys.stderr)
            return 1
        price = machine.prices
    print(describe(best, price))
    return 0
