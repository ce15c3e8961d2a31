"""One table of a report as plain rows of text, the primitive every section builds and
both renderers (Markdown, HTML) read. It imports no section, so any section may use it.

A cell is a Text: the string, whether it is the best of its column, and the number of the
footnote that explains it (failed cells)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass
class Text:
    text: str
    best: bool = False
    note: int | None = None


@dataclass
class Table:
    title: str
    headers: list[str]
    rows: list[list[Text]]
    caption: str = ""
    anchor: str = ""
    sub: list[Table] = field(default_factory=list)
    text_cols: int = 1  # leading columns of text (left-aligned in HTML)
    groups: list[tuple[str, int]] = field(default_factory=list)  # HTML: (header, span) above
    short_headers: list[str] = field(default_factory=list)  # HTML: headers under groups


def as_text(value) -> Text:
    return value if isinstance(value, Text) else Text(str(value))


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


def number_text(value, fmt: str, none: str = "") -> str:
    if (
        value is None
        or isinstance(value, bool)
        or (isinstance(value, float) and not math.isfinite(value))
    ):
        return none
    if not isinstance(value, (int, float)):
        return str(value)  # a file with a string where a number belongs: show it as written
    return format(value, fmt)
