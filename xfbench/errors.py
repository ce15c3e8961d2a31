"""The two kinds of "cannot" every xfbench command and suite shares.

UsageError: a bad option, argument or environment value. Its message is one line for
the user; commands print it and exit 2, pytest ends with its usage error (4), before
anything runs.

CannotRun: this cell cannot run here (a framework not installed, a device absent, a
precision without a fast path). The cell is skipped with the message as its reason,
never silently run some other way.
"""

from __future__ import annotations


class UsageError(ValueError):
    """A bad option or input value; the message is one line for the user."""


class CannotRun(Exception):
    """This cell cannot run here; the message says why (the cell is skipped with it)."""


def one_line(error: BaseException | str, fallback: str = "bad option") -> str:
    """The first line of an error's message: what a user is shown."""
    return (str(error).strip().splitlines() or [fallback])[0]
