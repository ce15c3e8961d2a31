"""The "verified identical" marks, read from the equivalence suite's results.

Schema read (everything about it lives in this one function, so a change in
what the equivalence suite writes is a change here only):
  - a benchmark entry whose extra_info has
      "equivalence": {"framework": str, "network": str, "verified": bool,
                      "max_rel_err": float (optional), "task": "train"|"infer" (optional),
                      "reference": str (optional, the framework compared against)}
  - or the same objects listed under the top-level "xfbench": {"equivalence": [...]}.
A mark without "task" applies to both tasks.
"""

from __future__ import annotations

from typing import Any


def equivalence_records(doc: dict) -> list[dict[str, Any]]:
    """The equivalence checks in one pytest-benchmark document, normalised to
    {"framework", "network", "task" (or None), "verified", "max_rel_err", "reference"}."""
    found: list[Any] = []
    for entry in doc.get("benchmarks") or []:
        extra = entry.get("extra_info") if isinstance(entry, dict) else None
        if isinstance(extra, dict) and isinstance(extra.get("equivalence"), dict):
            found.append(extra["equivalence"])
    top = doc.get("xfbench")
    if isinstance(top, dict) and isinstance(top.get("equivalence"), list):
        found += top["equivalence"]
    out = []
    for rec in found:
        if not isinstance(rec, dict) or "framework" not in rec or "network" not in rec:
            continue
        err = rec.get("max_rel_err")
        out.append(
            {
                "framework": str(rec["framework"]),
                "network": str(rec["network"]),
                # the equivalence suite names the task "check" ("infer" or "train")
                "task": rec.get("task", rec.get("check")),
                "verified": rec.get("verified") is True,
                "max_rel_err": float(err) if isinstance(err, (int, float)) else None,
                "reference": rec.get("reference"),
            }
        )
    return out


def mark(records: list[dict], framework: str, network: str, task: str) -> dict | None:
    """The check that applies to a (framework, network, task) row: a failed check wins
    over a passed one, so a row is marked verified only if every check of it passed."""
    hits = [
        r
        for r in records
        if r["framework"] == framework and r["network"] == network and r["task"] in (None, task)
    ]
    if not hits:
        return None
    failed = [r for r in hits if not r["verified"]]
    return failed[0] if failed else max(hits, key=lambda r: r["max_rel_err"] or 0.0)
