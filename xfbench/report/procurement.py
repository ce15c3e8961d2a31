"""Prices and power per machine, and what they buy: samples per second per dollar and
per watt, and the cost (and energy) of a million samples.

The prices file is TOML or JSON (see data/prices.example.toml):
    [machines."<machine label, or just its host name>"]
    price_usd = 30000           # purchase price
    price_per_hour_usd = 2.5    # rental (cloud) price
    price_date = "2026-11-01"   # when the price was quoted: required with a price
    price_source = "vendor quote #123"  # where it came from: required with a price
    watts = 700                 # typed power: shown as typed, never as measured
Every number is optional; figures that need a missing one are left out. Energy measured
during the cells (the records' joules_per_sample) needs no file.
"""

from __future__ import annotations

import json
import math
import tomllib
from pathlib import Path

FIELDS = ("price_usd", "price_per_hour_usd", "watts")
TEXT_FIELDS = ("price_date", "price_source")


class PricesError(Exception):
    """A prices file that cannot be used; the message names it."""


def load_prices(path: str | Path) -> dict[str, dict]:
    """{machine key: {field: value}} from a TOML or JSON prices file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise PricesError(f"{path}: cannot read: {e}") from None
    try:
        doc = json.loads(text) if path.suffix.lower() == ".json" else tomllib.loads(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as e:
        raise PricesError(
            f"{path}: not valid {'JSON' if path.suffix.lower() == '.json' else 'TOML'}: {e}"
        ) from None
    machines = doc.get("machines") if isinstance(doc, dict) else None
    if not isinstance(machines, dict):
        raise PricesError(f"{path}: expected a 'machines' table mapping machine labels to prices")
    out = {}
    for key, entry in machines.items():
        if not isinstance(entry, dict):
            raise PricesError(f"{path}: machines.{key!r} must be a table of {', '.join(FIELDS)}")
        unknown = set(entry) - set(FIELDS) - set(TEXT_FIELDS)
        if unknown:
            raise PricesError(
                f"{path}: machines.{key!r}: unknown field(s) {', '.join(sorted(unknown))}; "
                f"known: {', '.join(FIELDS + TEXT_FIELDS)}"
            )
        text = {k: entry.pop(k) for k in TEXT_FIELDS if k in entry}
        for name, value in text.items():
            if not isinstance(value, str) or not value.strip():
                raise PricesError(f"{path}: machines.{key!r}.{name} must be a non-empty string")
        priced = {"price_usd", "price_per_hour_usd"} & set(entry)
        if priced and len(text) < len(TEXT_FIELDS):
            raise PricesError(
                f"{path}: machines.{key!r}: a price needs price_date and price_source "
                "(when it was quoted and where from), so a reader can judge it"
            )
        for name, value in entry.items():
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not math.isfinite(value)
                or value <= 0
            ):
                raise PricesError(
                    f"{path}: machines.{key!r}.{name} must be a positive number, got {value!r}"
                )
        out[str(key)] = {**{k: float(v) for k, v in entry.items()}, **text}
    return out


def figures(samples_per_s: float, prices: dict[str, float]) -> dict[str, float | None]:
    """What a throughput is worth at given prices (None where a price is unknown)."""
    price, hourly, watts = (prices.get(k) for k in FIELDS)
    return {
        "samples_per_s_per_usd": samples_per_s / price if price else None,
        "samples_per_s_per_watt_typed": samples_per_s / watts if watts else None,
        # hours for a million samples, times the hourly price
        "usd_per_million_samples": hourly * 1e6 / samples_per_s / 3600 if hourly else None,
        # joules for a million samples, in kWh
        "kwh_per_million_samples_typed": watts * 1e6 / samples_per_s / 3.6e6 if watts else None,
    }
