"""What a lent GPU machine brings back, and the run's results packed to fit it.

The device tool returns at most FILES files from its output folder, each at most
FILE_BYTES, at most DEPTH folders down, named in letters, digits, '.', '_' and '-' only;
anything else stays behind. `xfbench acceptance --pack DIR` therefore keeps DIR to three
files, each replaced whole after every step (so that a run cut off at its time limit still
returns every step that finished): summary.md, the summary so far; acceptance.tar.gz,
everything the run wrote under --out; and whatever the calling script adds (gpu/window.sh
adds its console log). An archive over FILE_BYTES leaves out its largest files, named in
the summary, rather than not coming back at all.
"""

from __future__ import annotations

import io
import os
import re
import tarfile
from pathlib import Path

FILES = 8
FILE_BYTES = 16 * 2**20
TOTAL_BYTES = 64 * 2**20
DEPTH = 2  # folders below the output folder
NAME = re.compile(r"[A-Za-z0-9._-]+")
ARCHIVE = "acceptance.tar.gz"
SUMMARY = "summary.md"
LEFT_OUT = "left-out.txt"  # inside the archive: what did not fit


def violations(folder: Path) -> list[str]:
    """Each way the folder breaks the device tool's rule for what comes back (none: [])."""
    found = []
    files = [p for p in sorted(folder.rglob("*")) if p.is_file() or p.is_symlink()]
    if len(files) > FILES:
        found.append(f"{len(files)} files, more than {FILES}")
    total = 0
    for path in files:
        rel = path.relative_to(folder)
        if path.is_symlink():
            found.append(f"{rel}: a link")
            continue
        size = path.stat().st_size
        total += size
        if size > FILE_BYTES:
            found.append(f"{rel}: {size} bytes, more than {FILE_BYTES}")
        if len(rel.parts) - 1 > DEPTH:
            found.append(f"{rel}: more than {DEPTH} folders down")
        bad = [part for part in rel.parts if not NAME.fullmatch(part)]
        if bad:
            found.append(
                f"{rel}: {bad[0]!r} has characters other than letters, digits, '.', '_', '-'"
            )
    if total > TOTAL_BYTES:
        found.append(f"{total} bytes in all, more than {TOTAL_BYTES}")
    return found


def _archive(out: Path, leave_out: set[Path]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for path in sorted(out.rglob("*")):
            if path.is_file() and path not in leave_out:
                tar.add(path, arcname=str(Path(out.name) / path.relative_to(out)))
        if leave_out:
            note = "\n".join(str(p.relative_to(out)) for p in sorted(leave_out)).encode() + b"\n"
            info = tarfile.TarInfo(str(Path(out.name) / LEFT_OUT))
            info.size = len(note)
            tar.addfile(info, io.BytesIO(note))
    return buffer.getvalue()


def pack(out: Path, into: Path, summary: str) -> list[Path]:
    """Write into/summary.md and into/acceptance.tar.gz (everything under out), each
    replaced whole; returns the files the archive left out to stay within FILE_BYTES,
    largest first."""
    into.mkdir(parents=True, exist_ok=True)
    files = sorted((p for p in out.rglob("*") if p.is_file()), key=lambda p: -p.stat().st_size)
    left: list[Path] = []
    data = _archive(out, set())
    while len(data) > FILE_BYTES and len(left) < len(files):
        left.append(files[len(left)])
        data = _archive(out, set(left))
    if left:
        summary += "\n\nLeft out of the archive to keep it within the size that comes back: "
        summary += ", ".join(str(p.relative_to(out)) for p in left)
    for name, content in ((SUMMARY, summary.encode() + b"\n"), (ARCHIVE, data)):
        tmp = into / f".{name}.part"
        tmp.write_bytes(content)
        os.replace(tmp, into / name)  # whole or not at all, whenever the run is cut off
    return left
