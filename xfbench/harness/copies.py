"""One copy of a cell among several run at once (`xfbench run --copies`).

The runner starts the copies as separate pytest processes, each pinned to its own CPUs,
and tells each which it is (XFBENCH_COPY, "INDEX/COUNT") and where they meet
(XFBENCH_COPY_DIR). Their timed rounds must overlap for the aggregate throughput to mean
anything, so each copy waits for the others before timing a cell, and after its rounds
keeps stepping (untimed) until every copy has finished its own: no copy is timed on a
machine that another copy has already left idle. A copy that waits in vain (another
crashed) goes on alone after WAIT_S and says so (`copies_together` false).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from xfbench import environment
from xfbench.errors import UsageError

WAIT_S = 300.0  # the longest a copy waits for the others (at most a third of --cell-timeout)
POLL_S = 0.005


@dataclass(frozen=True)
class Copy:
    index: int
    count: int
    folder: Path  # where the copies leave their marks
    wait_s: float = WAIT_S  # how long a copy waits for the others before going on alone

    @classmethod
    def from_env(cls) -> Copy | None:
        text = environment.COPY.read()
        if text is None:
            return None
        index, count, wait = (text.split("/") + [str(WAIT_S)])[:3]
        folder = environment.COPY_DIR.read()
        try:
            wait_s = float(wait)
        except ValueError:
            wait_s = -1.0
        if (
            not (index.isdigit() and count.isdigit() and int(index) < int(count))
            or not folder
            or not 0 < wait_s < float("inf")
        ):
            raise UsageError(
                f"XFBENCH_COPY={text!r} is not INDEX/COUNT[/WAIT_S] with XFBENCH_COPY_DIR set "
                "(the runner sets both for --copies)"
            )
        return cls(int(index), int(count), Path(folder), wait_s)

    def _arrived(self, name: str, phase: str) -> int:
        return sum(1 for _ in self.folder.glob(f"{name}.{phase}.*"))

    def meet(
        self, name: str, phase: str, limit_s: float, step: Callable[[], None] | None = None
    ) -> bool:
        """Mark this copy as at `phase` of cell `name`, then wait (stepping, when given a
        step) until every copy is there or limit_s has passed; True when all came."""
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / f"{name}.{phase}.{self.index}").touch()
        deadline = time.monotonic() + limit_s
        while self._arrived(name, phase) < self.count:
            if time.monotonic() > deadline:
                return False
            if step is not None:
                step()
            else:
                time.sleep(POLL_S)
        return True
