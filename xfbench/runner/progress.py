"""The progress bar of a sweep: current cell, cells done, failed and left, time remaining."""

from __future__ import annotations

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


class SweepProgress:
    """A rich progress bar on stderr (stdout stays for the table and the JSON path);
    silent when quiet."""

    def __init__(self, total: int, quiet: bool = False):
        self.quiet = quiet
        self.total = total
        self.progress = None
        if not quiet:
            self.progress = Progress(
                SpinnerColumn(),
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("failed {task.fields[failed]}, left {task.fields[left]}"),
                TimeElapsedColumn(),
                TextColumn("eta"),
                TimeRemainingColumn(),
                console=Console(stderr=True),
                transient=False,
            )
            self.task = self.progress.add_task("starting", total=total, failed=0, left=total)

    def __enter__(self):
        if self.progress:
            self.progress.start()
        return self

    def __exit__(self, *exc):
        if self.progress:
            self.progress.stop()

    def update(self, current: str | None, done: int, failed: int) -> None:
        if self.progress:
            self.progress.update(
                self.task,
                completed=done,
                failed=failed,
                left=self.total - done,
                description=current or "starting",
            )

    def log(self, line: str) -> None:
        if self.progress:
            self.progress.console.print(line)
