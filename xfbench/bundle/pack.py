"""Packing one runner folder into a bundle: `xfbench bundle FOLDER`, `xfbench run --bundle`.

A bundle is a ZIP file (the standard library's zipfile) holding
  run/...                    every file of the runner folder as it was (records, every
                             round, failures, group logs, LoadGen's logs, roofs)
  environment/pip-freeze.txt the installed distributions, NAME==VERSION, sorted
  environment/machine.json   the machine record the run wrote (else one taken at packing)
  models.json                content hashes of the run's model files
  manifest.json              every member above with its SHA-256 and size, the run's name
                             and id, xfbench's version and when it was packed
and, as the archive's comment, the SHA-256 of manifest.json. read.py checks both on
reading: a member altered, added, removed or cut short, or a manifest altered, is refused.
The hashes detect accidents and edits, not a forger who rewrites all of them: a bundle's
own SHA-256 (printed on packing, kept by `xfbench collect`) is what to publish beside it.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import zipfile
from importlib import metadata
from pathlib import Path

import xfbench
from xfbench import machine
from xfbench.exchange.names import canonical_path, digest
from xfbench.models import get_spec

FORMAT = 1
SUFFIX = ".xfbench.zip"
MAGIC = "xfbench-bundle"
# What a runner folder holds that is not the run: the report written into it (report.md,
# .html, .csv and report-*.csv, made again from the records), its plots, the runner's lock,
# and bundles packed beside the records.
NOT_PACKED_NAMES = {".lock"}
NOT_PACKED_FOLDERS = {"plots"}
# The members beside the run's files, named once for packing and for reading (read.py)
PIP_FREEZE, MACHINE, MODELS = (
    "environment/pip-freeze.txt",
    "environment/machine.json",
    "models.json",
)
# A fixed time for every member, so that the same folder packs into the same members.
ZIP_TIME = (1980, 1, 1, 0, 0, 0)


class BundleError(Exception):
    """A folder that cannot be packed, or a bundle that cannot be used; one line saying why."""


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def is_runner_folder(folder: Path) -> bool:
    return (folder / "merged.json").is_file() or (folder / "cells").is_dir()


def run_files(folder: Path) -> dict[str, bytes]:
    """Every file of a runner folder that is the run's, by its path inside the folder
    (symbolic links followed, as the report reads them)."""
    out = {}
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if not path.is_file():
            continue
        if rel.name in NOT_PACKED_NAMES or rel.parts[0] in NOT_PACKED_FOLDERS:
            continue
        if len(rel.parts) == 1 and _is_report(rel.name):
            continue
        if rel.name.endswith((SUFFIX, SUFFIX + ".part")):
            continue
        out[rel.as_posix()] = path.read_bytes()
    return out


def _is_report(name: str) -> bool:
    stem, _, suffix = name.rpartition(".")
    return (stem == "report" and suffix in ("md", "html", "csv")) or (
        stem.startswith("report-") and suffix == "csv"
    )


def has_records(files: dict[str, bytes]) -> bool:
    """Whether a run holds a finished cell: a merged.json, or a file in cells/ or failed/."""
    return "merged.json" in files or any(
        n.startswith(("cells/", "failed/")) and n.endswith(".json") for n in files
    )


def run_id(files: dict[str, bytes]) -> str:
    """The run's identity: a hash of its files' names and contents, merged.json aside where
    the cells' own files are there (the runner writes it again, with a new date, each time
    it is started on the folder, finished or not). The same folder packed twice has the
    same id, and collecting either bundle twice adds nothing."""
    cells = any(n.startswith(("cells/", "failed/")) for n in files)
    lines = "".join(
        f"{sha256(body)} {name}\n"
        for name, body in sorted(files.items())
        if not (cells and name == "merged.json")
    )
    return sha256(lines.encode())


def pip_freeze() -> str:
    """The installed distributions as `pip freeze` lists them (NAME==VERSION), sorted."""
    seen = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name and name.lower() not in seen:
            seen[name.lower()] = f"{name}=={dist.version}"
    return "".join(line + "\n" for _, line in sorted(seen.items()))


def _documents(files: dict[str, bytes]):
    for name, body in files.items():
        if name.endswith(".json"):
            try:
                yield json.loads(body)
            except (ValueError, UnicodeDecodeError):
                continue


def _walk(value):
    """Every dict inside a JSON value."""
    if isinstance(value, dict):
        yield value
        for v in value.values():
            yield from _walk(v)
    elif isinstance(value, list):
        for v in value:
            yield from _walk(v)


def machine_record(files: dict[str, bytes]) -> tuple[dict, str]:
    """The machine record the run wrote (merged.json's, else a cell's), else this
    machine's now."""
    names = ["merged.json"] + sorted(n for n in files if n.startswith("cells/"))
    for name in (n for n in names if n in files):
        try:
            recorded = json.loads(files[name])["machine_info"]["xfbench"]
        except (ValueError, KeyError, TypeError, UnicodeDecodeError):
            continue
        if isinstance(recorded, dict):
            return recorded, f"the run's ({name})"
    return machine.describe(), "taken when the bundle was packed"


def model_hashes(files: dict[str, bytes]) -> dict:
    """What defines the networks the run measured: each spec's digest (the hash of its
    layers that names its ONNX file), the SHA-256 of the model code, and of each canonical
    ONNX file of those networks in this machine's cache (null where none was written)."""
    pairs = set()
    for doc in _documents(files):
        for d in _walk(doc):
            if isinstance(d.get("network"), str) and d.get("scale") in ("full", "smoke"):
                tokens = d.get("tokens") if isinstance(d.get("tokens"), int) else None
                pairs.add((d["network"], d["scale"], tokens))
    specs, onnx = {}, {}
    for network, scale, tokens in sorted(pairs, key=str):
        try:
            spec = get_spec(network, scale, tokens)
        except (KeyError, ValueError):
            continue
        key = f"{network}-{scale}" + (f"-{tokens}" if tokens else "")
        specs[key] = digest(spec)
        path = canonical_path(spec)
        for p in (path, path.with_name(path.name + ".data")):
            if p.name not in onnx:
                onnx[p.name] = _file_sha256(p) if p.is_file() else None
    code = Path(xfbench.__file__).parent / "models"
    return {
        "spec_digests": specs,
        "model_code": {p.name: sha256(p.read_bytes()) for p in sorted(code.glob("*.py"))},
        "onnx_files": onnx,
    }


def _file_sha256(path: Path) -> str:
    with open(path, "rb") as f:  # in chunks: an ONNX weights file can be gigabytes
        return hashlib.file_digest(f, "sha256").hexdigest()


def bundle_members(folder: Path) -> tuple[dict[str, bytes], dict]:
    """The members of a folder's bundle, and its manifest (without the members' list)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise BundleError(f"{folder}: no such folder")
    if not is_runner_folder(folder):
        raise BundleError(f"{folder}: not a runner folder (no merged.json, no cells/)")
    files = run_files(folder)
    if not has_records(files):
        raise BundleError(f"{folder}: no finished cell in it yet (no merged.json, cells/ empty)")
    recorded, where = machine_record(files)
    members = {f"run/{name}": body for name, body in files.items()}
    members[PIP_FREEZE] = pip_freeze().encode()
    members[MACHINE] = json.dumps(recorded, indent=1, sort_keys=True).encode()
    members[MODELS] = json.dumps(model_hashes(files), indent=1, sort_keys=True).encode()
    manifest = {
        "format": FORMAT,
        "run": folder.resolve().name,
        "run_id": run_id(files),
        "xfbench": xfbench.__version__,
        "packed_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine_record": where,
        "environment": "the installed distributions when the bundle was packed (xfbench "
        "run --bundle: at the end of the run)",
    }
    return members, manifest


def pack(folder: Path | str, out: Path | str | None = None) -> tuple[Path, str]:
    """Write a folder's bundle (default: FOLDER.xfbench.zip beside it); its path and its
    SHA-256."""
    folder = Path(folder)
    members, manifest = bundle_members(folder)
    manifest["members"] = {
        name: {"sha256": sha256(body), "bytes": len(body)} for name, body in sorted(members.items())
    }
    manifest_bytes = json.dumps(manifest, indent=1, sort_keys=True).encode()
    out = Path(out) if out else folder.resolve().parent / f"{folder.resolve().name}{SUFFIX}"
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".part")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.comment = f"{MAGIC} {FORMAT} sha256={sha256(manifest_bytes)}".encode()
        for name, body in [("manifest.json", manifest_bytes), *sorted(members.items())]:
            z.writestr(zipfile.ZipInfo(name, ZIP_TIME), body, zipfile.ZIP_DEFLATED)
    os.replace(tmp, out)  # a bundle is whole or absent
    return out, sha256(out.read_bytes())
