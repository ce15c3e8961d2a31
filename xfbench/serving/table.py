"""The serving tables: one row per cell (the terminal summary), and one per network with
the scenarios side by side (reports)."""

from __future__ import annotations

from xfbench.serving.scenarios import BY_NAME, SCENARIO_TABLE, SCENARIOS


def _num(value, spec: str = ".4g") -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return ""
    return format(value, spec)


def headline(r: dict) -> tuple[str, str]:
    """(what the scenario's number is, the number) of one serving record; a Server search
    that met the bound at no rate gives "none"."""
    scenario = BY_NAME.get(r.get("scenario"))
    if scenario is None:
        return "", ""
    value = _num(r.get(scenario.field))
    return scenario.unit, value or ("none" if scenario.name == "Server" else "")


def validity(r: dict) -> str:
    """LoadGen's verdict: VALID, or INVALID with the first unmet condition."""
    if r.get("status", "ok") != "ok":
        return f"{r.get('status')}: {r.get('reason', '')}"[:60]
    if r.get("valid"):
        return "VALID"
    unmet = [
        name
        for name, key in (
            ("latency bound", "perf_constraints_met"),
            ("min duration", "min_duration_met"),
            ("min queries", "min_queries_met"),
            ("early stopping", "early_stopping_met"),
        )
        if r.get(key) is False
    ]
    if r.get("scenario") == "Server" and r.get("server_qps") is None:
        unmet = ["no rate met the bound"]
    return "INVALID" + (f" ({', '.join(unmet)})" if unmet else "")


def int8_drift(r: dict) -> str:
    if r.get("precision") != "int8" or r.get("int8_logits_rel_err") is None:
        return ""
    return f"{r['int8_logits_rel_err']:.2g} rel, top-1 {r.get('int8_top1_agreement', 0):.0%}"


def serving_table(records: list[dict]) -> str:
    """One row per serving cell, in scenario order."""
    from tabulate import tabulate

    order = {s: i for i, s in enumerate(SCENARIOS)}
    rows = [
        _summary_row(r)
        for r in sorted(
            records,
            key=lambda r: (
                str(r.get("network")),
                str(r.get("framework")),
                str(r.get("mode")),
                str(r.get("precision")),
                r.get("threads") or 0,
                order.get(r.get("scenario"), 9),
            ),
        )
    ]
    headers = (
        "network",
        "framework",
        "mode",
        "precision",
        "device",
        "threads",
        "scenario",
        "result",
        "p50 ms",
        "p99 ms",
        "bound ms",
        "LoadGen",
        "int8 vs fp32",
        "",
    )
    return tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True)


def _summary_row(r: dict) -> list:
    what, value = headline(r) if r.get("status", "ok") == "ok" else ("", "")
    return [
        *(r.get(k) for k in ("network", "framework", "mode", "precision", "device", "threads")),
        r.get("scenario"),
        f"{value} {what}".strip(),
        _num(r.get("p50_ms")),
        _num(r.get("p99_ms")),
        _num(r.get("latency_bound_ms"), "g"),
        validity(r),
        int8_drift(r),
        "†" if r.get("contended") else "",
    ]


def network_tables(records: list[dict]) -> dict[str, tuple[list[str], list[list[str]]]]:
    """Per network, the report's table as (headers, rows): one row per (framework, mode,
    precision, device, threads), with SingleStream p90, MultiStream p99, Server QPS under
    the bound and Offline samples/s side by side, each marked ✗ where LoadGen called its run
    invalid (or no rate met the bound)."""
    by_network: dict[str, dict[tuple, dict[str, dict]]] = {}
    for r in records:
        row = tuple(str(r.get(k)) for k in ("framework", "mode", "precision", "device", "threads"))
        by_network.setdefault(str(r.get("network")), {}).setdefault(row, {})[r.get("scenario")] = r
    out = {}
    for network, rows in sorted(by_network.items()):
        table = []
        for key, cells in sorted(rows.items()):
            line = list(key)
            for scenario in SCENARIO_TABLE:
                r = cells.get(scenario.name)
                if r is None:
                    line.append("")
                elif r.get("status", "ok") != "ok":
                    line.append(str(r.get("status")))
                else:
                    value = headline(r)[1]
                    line.append(value + ("" if r.get("valid") else " ✗"))
            line.append(next((int8_drift(r) for r in cells.values() if int8_drift(r)), ""))
            table.append(line)
        bounds = sorted(
            {
                r["latency_bound_ms"]
                for c in rows.values()
                for r in c.values()
                if isinstance(r.get("latency_bound_ms"), (int, float))
            }
        )
        bound = f" (p99 ≤ {', '.join(f'{b:g}' for b in bounds)} ms)" if bounds else ""
        headers = [
            "framework",
            "mode",
            "precision",
            "device",
            "threads",
            *(f"{s.name} {s.unit}" + (bound if s.name == "Server" else "") for s in SCENARIO_TABLE),
            "int8 vs fp32",
        ]
        out[network] = (headers, table)
    return out
