"""Every package of the checkout is installed by `pip install .`: a package left out of
pyproject.toml works from the checkout and breaks only when installed elsewhere."""
from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_top_level_package_is_in_pyproject():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["packages"]["find"]["include"]
    packages = sorted(p.parent.name for p in ROOT.glob("*/__init__.py"))
    missing = [p for p in packages if not any(fnmatch.fnmatch(p, pat) for pat in patterns)]
    assert not missing, f"packages not installed by pyproject.toml: {missing}"
