"""Prices and power per machine, and what they buy: samples per second per dollar and
per watt, and the cost (and energy) of a million samples.

The prices file is TOML or JSON (see data/prices.example.toml):
    [machines."<machine label, or just its host name>"]
    price_usd = 30000           # purchase price
    price_per_hour_usd = 2.5    # rental (cloud) price
    watts = 700                 # power drawn while training
Every field is optional; figures that need a missing one are left out.
"""

from __future__ import annotations

import json
import math
import tomllib
from pathlib import Path

FIELDS = ("price_usd", "price_per_hour_usd", "watts")


class PricesError(Exception):
    """A prices file that cannot be used; the message names it."""


def load_prices(path: str | Path) -> dict[str, dict[str, float]]:
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
        unknown = set(entry) - set(FIELDS)
        if unknown:
            raise PricesError(
                f"{path}: machines.{key!r}: unknown field(s) {', '.join(sorted(unknown))}; "
                f"known: {', '.join(FIELDS)}"
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
        out[str(key)] = {k: float(v) for k, v in entry.items()}
    return out


def figures(samples_per_s: float, prices: dict[str, float]) -> dict[str, float | None]:
    """What a throughput is worth at given prices (None where a price is unknown)."""
    price, hourly, watts = (prices.get(k) for k in FIELDS)
    return {
        "samples_per_s_per_usd": samples_per_s / price if price else None,
        "samples_per_s_per_watt": samples_per_s / watts if watts else None,
        # hours for a million samples, times the hourly price
        "usd_per_million_samples": hourly * 1e6 / samples_per_s / 3600 if hourly else None,
        # joules for a million samples, in kWh
        "kwh_per_million_samples": watts * 1e6 / samples_per_s / 3.6e6 if watts else None,
    }
