"""Reading a bundle: every hash checked before anything in it is used (pack.py says what
a bundle holds). A bundle that fails a check is refused whole, in one line saying which
check failed."""

from __future__ import annotations

import io
import json
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

from xfbench.bundle.pack import (
    FORMAT,
    MACHINE,
    MAGIC,
    MODELS,
    PIP_FREEZE,
    BundleError,
    has_records,
    run_id,
    sha256,
)

COMMENT = re.compile(rf"^{MAGIC} (\d+) sha256=([0-9a-f]{{64}})$")
REQUIRED = (PIP_FREEZE, MACHINE, MODELS)


@dataclass
class Bundle:
    path: Path
    sha256: str  # of the whole file
    size: int  # its bytes
    manifest: dict
    members: dict[str, bytes]  # every member but the manifest, checked

    @property
    def run_files(self) -> dict[str, bytes]:
        """The runner folder's files, by their path inside it."""
        return {k[len("run/") :]: v for k, v in self.members.items() if k.startswith("run/")}

    @property
    def run_name(self) -> str:
        return str(self.manifest["run"])

    @property
    def run_id(self) -> str:
        return str(self.manifest["run_id"])

    def text(self, name: str) -> str:
        return self.members[name].decode("utf-8")


def read(path: Path | str) -> Bundle:
    """A bundle, checked; BundleError naming the file and the check that failed."""
    path = Path(path)
    try:
        data = path.read_bytes()  # once: the hash and the members come from the same bytes
    except OSError as e:
        raise BundleError(f"{path}: cannot read: {e.strerror or e}") from None
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            comment = z.comment.decode("ascii", "replace")
            infos = z.infolist()
            contents = {i.filename: z.read(i) for i in infos if not i.is_dir()}
    except (zipfile.BadZipFile, EOFError, zipfile.LargeZipFile) as e:
        raise BundleError(
            f"{path}: not a whole bundle (cut short, damaged or not a ZIP: {e})"
        ) from None
    except Exception as e:  # a damaged member: zlib or CRC errors of any kind
        raise BundleError(f"{path}: a member is damaged ({type(e).__name__}: {e})") from None
    match = COMMENT.match(comment)
    if not match:
        raise BundleError(f"{path}: not an xfbench bundle (its comment does not start {MAGIC!r})")
    if int(match.group(1)) != FORMAT:
        raise BundleError(
            f"{path}: bundle format {match.group(1)}; this xfbench reads format {FORMAT}"
        )
    if any(i.is_dir() for i in infos):
        raise BundleError(f"{path}: refused: it holds folder entries (repacked after packing)")
    if len(infos) != len(contents):
        raise BundleError(f"{path}: refused: a member name appears twice")
    manifest_bytes = contents.pop("manifest.json", None)
    if manifest_bytes is None:
        raise BundleError(f"{path}: refused: no manifest.json")
    if sha256(manifest_bytes) != match.group(2):
        raise BundleError(f"{path}: refused: manifest.json does not match the bundle's hash")
    manifest = _manifest(path, manifest_bytes)
    _check_members(path, manifest["members"], contents)
    bundle = Bundle(
        path=path, sha256=sha256(data), size=len(data), manifest=manifest, members=contents
    )
    _check_run(bundle)
    return bundle


def _check_members(path: Path, listed: dict, contents: dict[str, bytes]) -> None:
    """Every member the manifest lists is there, with its hash, and no other."""
    for name in sorted(set(listed) | set(contents)):
        if name not in contents:
            raise BundleError(f"{path}: refused: {name} is listed but missing")
        if name not in listed:
            raise BundleError(f"{path}: refused: {name} was added after packing")
        if sha256(contents[name]) != listed[name].get("sha256"):
            raise BundleError(f"{path}: refused: {name} does not match its hash (altered)")


def _check_run(bundle: Bundle) -> None:
    """The run inside: its files give the manifest's run id, the required members are
    there as UTF-8 text, and it holds a finished cell."""
    path, contents = bundle.path, bundle.members
    if run_id(bundle.run_files) != bundle.manifest["run_id"]:
        raise BundleError(f"{path}: refused: the run's files do not give the manifest's run id")
    missing = [name for name in REQUIRED if name not in contents]
    if missing:
        raise BundleError(f"{path}: refused: no {', '.join(missing)}")
    try:
        for name in REQUIRED:
            bundle.text(name)
    except UnicodeDecodeError:
        raise BundleError(f"{path}: refused: {name} is not UTF-8 text") from None
    if not has_records(bundle.run_files):
        raise BundleError(f"{path}: refused: its run holds no finished cell")


def _manifest(path: Path, body: bytes) -> dict:
    """The manifest, or BundleError when it is not the object pack.py writes."""
    try:
        manifest = json.loads(body)
    except (ValueError, UnicodeDecodeError) as e:
        raise BundleError(f"{path}: refused: manifest.json is not JSON ({e})") from None
    members = manifest.get("members") if isinstance(manifest, dict) else None
    if (
        not isinstance(members, dict)
        or not all(isinstance(v, dict) for v in members.values())
        or not isinstance(manifest.get("run"), str)
        or not isinstance(manifest.get("run_id"), str)
    ):
        raise BundleError(f"{path}: refused: manifest.json lacks its run, run_id or members")
    return manifest
