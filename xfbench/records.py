"""What xfbench writes: the kinds of record, their fields, and the version of this schema.

Every record carries `kind` and `schema_version`. A record is the `extra_info` of one
pytest-benchmark entry, of a kind a suite declares with its fields (plugin.Suite's `kind`
and `fields`: `declare_kind`), or a failure record (kind failure: a cell that gave no
number, in a runner folder's failed/ or under the top-level "xfbench" key of a JSON file).
Writers stamp records with `header(kind)`; readers ask `kind_of(record)`, which also reads
files written before records were typed (schema_version 0: the kind is inferred from the
fields, as the report always did) and refuses a record of an unknown kind or a newer
version. Readers import the suites first (plugin.declared()): a kind is known once declared.

docs/records.md is rendered from FIELDS (every suite's, once declared) and the results
database's schema after them, by `python -m xfbench.bundle.database > docs/records.md`; a
test keeps them the same.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

SCHEMA_VERSION = 1
# Older names of a kind, still read (declare_kind).
ALIASES: dict[str, str] = {}
FAILURE_STATUSES = ("failed", "timeout", "killed", "oom", "skipped")


class RecordError(ValueError):
    """A record this version of xfbench cannot read; the message is one line."""


@dataclass(frozen=True)
class Field:
    name: str
    type: str
    meaning: str
    # "" = in every record of the kind; else when it is written (a test holds both)
    when: str = ""
    # the keys of an object, or of each item of a list, where they are declared
    of: tuple[Field, ...] = ()


def keys(fields: tuple[Field, ...]) -> set[str]:
    return {f.name for f in fields}


def replaced(fields: tuple[Field, ...], *changed: Field) -> tuple[Field, ...]:
    """fields with those of the same names as changed replaced, in their order (by name,
    never by position: a field added to fields keeps its place)."""
    by_name = {f.name: f for f in changed}
    unknown = set(by_name) - keys(fields)
    if unknown:
        raise ValueError(f"no field named {', '.join(sorted(unknown))} to replace")
    return tuple(by_name.get(f.name, f) for f in fields)


def header(kind: str) -> dict:
    """The fields that say what a record is; every writer puts them first."""
    if kind not in known_kinds():
        raise ValueError(f"unknown record kind {kind!r}")
    return {"kind": kind, "schema_version": SCHEMA_VERSION}


def kind_of(record: dict) -> str | None:
    """The kind of a record (None: not an xfbench record). RecordError for a kind this
    version does not know or a schema_version newer than SCHEMA_VERSION."""
    version = record.get("schema_version", 0)
    if not isinstance(version, int) or isinstance(version, bool) or version < 0:
        raise RecordError(f"schema_version {version!r} is not a version number")
    if version > SCHEMA_VERSION:
        raise RecordError(
            f"written by a newer xfbench (record schema {version}; this one "
            f"reads up to {SCHEMA_VERSION}): update xfbench to read it"
        )
    kind = record.get("kind")
    if kind is not None:
        kind = ALIASES.get(kind, kind)
        if kind not in known_kinds():
            raise RecordError(f"unknown record kind {kind!r} (known: {', '.join(known_kinds())})")
        return kind
    if version:
        raise RecordError(f"a schema {version} record without a kind")
    return _inferred(record)


def _inferred(record: dict) -> str | None:
    """The kind of a record written before records carried one: a failure, else the first
    declared kind that recognises it (declare_kind's `older`)."""
    if record.get("status") in FAILURE_STATUSES and isinstance(record.get("cell"), dict):
        return "failure"
    return next((kind for kind, is_one in OLDER.items() if is_one(record)), None)


# Set by the runner's pytest plugin (runner/plugin.py) on each entry it saw measured.
PID = Field("pid", "int", "id of the process that measured the entry", when="the runner's plugin")


# A failure record: a cell that gave no number, of any suite.
FAILURE = (
    Field(
        "cell", "object", "the cell's fields (with its own kind, where its suite's cells carry one)"
    ),
    Field("status", "str", "failed, timeout, killed, oom or skipped"),
    Field("reason", "str", "one line"),
    Field("output_tail", "str", "the last lines of the cell's output, when it ran"),
)

# Every kind's fields: failure's here; every other kind's declared by the suite whose cells
# write it (plugin.Suite's `kind` and `fields`, the network suite's in xfbench/networks/plugin.py),
# known once its plugin is imported (plugin.declared()).
FIELDS: dict[str, tuple[Field, ...]] = {"failure": FAILURE}
# How to recognise a record of a kind in files written before records carried their kind.
OLDER: dict[str, Callable[[dict], bool]] = {}


def declare_kind(
    kind: str,
    fields: tuple[Field, ...],
    older: Callable[[dict], bool] | None = None,
    aliases: tuple[str, ...] = (),
) -> None:
    """A suite's own record kind: written with header(kind), read by kind_of, its fields
    FIELDS[kind]; `older` recognises one written before records carried their kind (a
    kind that existed then), `aliases` are its older names. A kind of its own name twice
    is refused (one line)."""
    if FIELDS.get(kind, fields) != fields:
        raise ValueError(f"record kind {kind!r} is declared already")
    FIELDS[kind] = fields
    if older:
        OLDER[kind] = older
    ALIASES.update(dict.fromkeys(aliases, kind))


def known_kinds() -> tuple[str, ...]:
    """Every declared kind in the order declared, failure last."""
    return (*(k for k in FIELDS if k != "failure"), "failure")


def render_markdown() -> str:
    lines = [
        "# Records",
        "",
        "Generated from the fields each suite declares (`fields.py` in its package; the failure",
        "record's in `xfbench/records.py`) and `xfbench/bundle/database.py` by",
        "`python -m xfbench.bundle.database > docs/records.md`; a test fails when they differ.",
        "",
        f"Every record carries `kind` (one of {', '.join(f'`{k}`' for k in known_kinds())}) and",
        f"`schema_version` (now {SCHEMA_VERSION}). A record of any kind but failure is the",
        "`extra_info` of one pytest-benchmark entry; a failure",
        "record is a cell that gave no number, in a runner folder's `failed/` or under the",
        "top-level `xfbench` key of a JSON file. `xfbench report` reads records by their",
        "`kind`, reads files written before records carried one (version 0), and stops",
        "with one line at an unknown kind or a newer version.",
        "",
        "A record holds no field but these; `written` says which are in every record of",
        "its kind and when the others are (a test writes each kind and holds it to this).",
        "",
    ]
    done = set()
    for kind in known_kinds():
        fields = FIELDS[kind]
        if id(fields) in done:
            continue
        same = [k for k in known_kinds() if FIELDS[k] is fields]
        done.add(id(fields))
        lines += [
            f"## {' and '.join(f'`{k}`' for k in same)}",
            "",
            "| field | type | written | meaning |",
            "|---|---|---|---|",
        ]
        lines += _rows(fields, "")
        lines.append("")
    return "\n".join(lines)


def _rows(fields: tuple[Field, ...], prefix: str) -> list[str]:
    out = []
    for f in fields:
        type_ = f.type.replace("|", "\\|")  # a bare | would split the table's cell
        out.append(f"| `{prefix}{f.name}` | {type_} | {f.when or 'always'} | {f.meaning} |")
        # a list's items are named name[].key, an object's name.key
        out += _rows(f.of, f"{prefix}{f.name}{'[]' if f.type == 'list' else ''}.")
    return out


# -- reading a record's values: what a file holds may be anything ---------------------------
def failed_cell(record: dict) -> tuple[dict, str, object]:
    """A failure record's cell (under "cell", or the record itself, as the runner's plugin
    keeps it), its status (a failure's: "failed" where it says "ok" or nothing) and its
    reason as written."""
    cell = record.get("cell") if isinstance(record.get("cell"), dict) else record
    status = str(record.get("status") or "failed")
    return cell, "failed" if status == "ok" else status, record.get("reason")


def number(value) -> float | None:
    """A finite number, else None (a bool is not a number here)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def count(value) -> int | None:
    """A whole number from 0 below 2**62, else None."""
    found = number(value)
    return (
        int(found)
        if found is not None and found >= 0 and found == int(found) and found < 2**62
        else None
    )


def one_line(text) -> str:
    """A reason as one line, whatever was written."""
    return " ".join(str(text or "no reason recorded").split())
