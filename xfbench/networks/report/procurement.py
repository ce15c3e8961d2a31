"""What money buys, from Table 7's cells: each network's fastest cell per priced machine
with its money and energy figures (report.model builds them: `buys`), and the answer first,
per network: the fastest machine, the most per dollar, the most per kJ measured."""

from __future__ import annotations

from xfbench.networks.report.keys import col_label, row_label
from xfbench.networks.report.model import table7_content
from xfbench.report.api import (
    Report,
    Table,
    Text,
    as_text,
    network_title,
    number_text,
)


def _measured_energy(d) -> tuple[str, str]:
    """(J per sample, samples per kJ) from the cell's own record, with its method, or
    "not measured" and the record's reason."""
    info = d.result.info
    jps, spk = info.get("joules_per_sample"), info.get("samples_per_kj")
    if isinstance(jps, int | float) and isinstance(spk, int | float):
        method = info.get("energy_method", "?")
        return f"{jps:.3g} ({method})", f"{spk:.4g} ({method})"
    return "not measured", "not measured"


PROCUREMENT_HEADERS = [
    "network",
    "machine",
    "fastest cell",
    "samples/s",
    "price (date, source)",
    "samples/s per $",
    "$ per million samples",
    "J per sample (measured)",
    "samples per kJ (measured)",
]

TYPED_HEADERS = ["samples/s per W (typed power)", "kWh per million samples (typed power)"]

PROCUREMENT_CAPTION = (
    "Each network's fastest cell on each machine that has an entry in the prices file. $ "
    "per million samples uses the hourly price. Energy is the cell's own, measured over its "
    "timed rounds by the method named (harness/energy.py); 'not measured' where the machine "
    "gave no counter (the record says why)."
)


def procurement_table(report: Report) -> Table | None:
    if not table7_content(report).buys:
        return None
    typed = any("watts" in b.machine.prices for b in table7_content(report).buys)
    return Table(
        "Procurement",
        PROCUREMENT_HEADERS + (TYPED_HEADERS if typed else []),
        [_buy_row(b, typed) for b in table7_content(report).buys],
        caption=PROCUREMENT_CAPTION
        + (
            " The typed-power columns divide by the watts typed into the prices file: "
            "they are not measurements."
            if typed
            else ""
        ),
        anchor="procurement",
        text_cols=5,
    )


def _buy_row(b, typed: bool) -> list[Text]:
    f, p = b.figures, b.machine.prices
    jps, spk = _measured_energy(b.best)
    prices = (
        f"${p['price_usd']:,.0f}" if "price_usd" in p else "",
        f"${p['price_per_hour_usd']:g}/h" if "price_per_hour_usd" in p else "",
    )
    price = ", ".join(x for x in prices if x)
    if price:
        price += f" ({p.get('price_date')}, {p.get('price_source')})"
    typed_cells = [
        as_text(number_text(f["samples_per_s_per_watt_typed"], ".3g")),
        as_text(number_text(f["kwh_per_million_samples_typed"], ".3g")),
    ]
    return [
        as_text(f"{network_title(b.block[1])} {b.block[0]}, batch {b.block[2]}"),
        as_text(b.machine.label),
        as_text(f"{row_label(b.best.row)} on {col_label(b.best.col)}"),
        as_text(number_text(b.best.samples_per_s, ".4g")),
        as_text(price or "-"),
        as_text(number_text(f["samples_per_s_per_usd"], ".3g")),
        as_text(number_text(f["usd_per_million_samples"], ".3g")),
        as_text(jps),
        as_text(spk),
    ] + (typed_cells if typed else [])


def procurement_summary(report: Report) -> Table | None:
    """The answer first, when prices are given: per network, the fastest machine, the most
    samples/s per dollar, and the most samples per kJ measured."""
    if not table7_content(report).buys:
        return None
    by_block: dict = {}
    for b in table7_content(report).buys:
        by_block.setdefault(b.block, []).append(b)
    rows = []
    for block, buys in by_block.items():
        fastest = max(buys, key=lambda b: b.best.samples_per_s)
        per_usd = [b for b in buys if b.figures["samples_per_s_per_usd"]]
        cheapest = max(per_usd, key=lambda b: b.figures["samples_per_s_per_usd"], default=None)
        measured = [
            b for b in buys if isinstance(b.best.result.info.get("samples_per_kj"), int | float)
        ]
        frugal = max(measured, key=lambda b: b.best.result.info["samples_per_kj"], default=None)
        rows.append(
            [
                as_text(f"{network_title(block[1])} {block[0]}, batch {block[2]}"),
                as_text(f"{fastest.machine.label} ({fastest.best.samples_per_s:.4g} samples/s)"),
                as_text(
                    f"{cheapest.machine.label} "
                    f"({cheapest.figures['samples_per_s_per_usd']:.3g} samples/s per $)"
                    if cheapest
                    else "no purchase price given"
                ),
                as_text(
                    f"{frugal.machine.label} ({frugal.best.result.info['samples_per_kj']:.4g} "
                    f"samples per kJ, {frugal.best.result.info.get('energy_method')})"
                    if frugal
                    else "not measured on any machine"
                ),
            ]
        )
    return Table(
        "Procurement summary",
        ["network", "fastest machine", "most per $", "most per kJ (measured)"],
        rows,
        caption="From the procurement table below: each network's fastest cell per machine.",
        anchor="procurement-summary",
        text_cols=4,
    )
