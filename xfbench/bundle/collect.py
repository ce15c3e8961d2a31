"""`xfbench collect`: see cli.py."""

from __future__ import annotations

import sys

from xfbench.bundle.cli import collect_main as main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
