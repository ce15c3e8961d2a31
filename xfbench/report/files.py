"""Every report file is written whole or not at all: into a temporary file beside it,
then renamed over it, so a full disk or a crash leaves the old file (or none), never an
empty or half-written one."""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path


def plain(text: str) -> str:
    """A name read from JSON as part of a file name: letters, digits, _ . - kept, the rest
    an underscore, at most 100 characters."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)[:100]


@contextlib.contextmanager
def replacing(path: Path):
    """Yields a temporary path beside path (same suffix, for writers that go by it); on
    success it replaces path, on any error it is removed."""
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp{path.suffix}")
    try:
        yield tmp
        os.replace(tmp, path)
    except OSError as e:  # named by the file it was for, not the temporary one
        raise OSError(e.errno, e.strerror or str(e), str(path)) from None
    finally:
        tmp.unlink(missing_ok=True)


def write_text(path: Path, text: str) -> Path:
    with replacing(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return path
