"""Reading a bundle: every hash checked before anything in it is used (pack.py says what
a bundle holds). A bundle that fails a check is refused whole, in one line saying which
check failed."""

from __future__ import annotations

import json
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

from xfbench.bundle.pack import FORMAT, MAGIC, BundleError, run_id, sha256

COMMENT = re.compile(rf"^{MAGIC} (\d+) sha256=([0-9a-f]{{64}})$")


@dataclass
class Bundle:
    path: Path
    sha256: str  # of the whole file
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


def read(path: Path | str) -> Bundle:
    """A bundle, checked; BundleError naming the file and the check that failed."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise BundleError(f"{path}: cannot read: {e.strerror or e}") from None
    try:
        with zipfile.ZipFile(path) as z:
            comment = z.comment.decode("ascii", "replace")
            names = z.namelist()
            contents = {name: z.read(name) for name in names}
    except (zipfile.BadZipFile, EOFError, OSError, zipfile.LargeZipFile) as e:
        raise BundleError(
            f"{path}: not a whole bundle (truncated or not a ZIP file: {e})"
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
    if len(names) != len(set(names)):
        raise BundleError(f"{path}: refused: a member name appears twice")
    manifest_bytes = contents.pop("manifest.json", None)
    if manifest_bytes is None:
        raise BundleError(f"{path}: refused: no manifest.json")
    if sha256(manifest_bytes) != match.group(2):
        raise BundleError(f"{path}: refused: manifest.json does not match the bundle's hash")
    manifest = json.loads(manifest_bytes)
    listed = manifest.get("members") or {}
    for name in sorted(set(listed) | set(contents)):
        if name not in contents:
            raise BundleError(f"{path}: refused: {name} is listed but missing")
        if name not in listed:
            raise BundleError(f"{path}: refused: {name} was added after packing")
        if sha256(contents[name]) != listed[name].get("sha256"):
            raise BundleError(f"{path}: refused: {name} does not match its hash (altered)")
    bundle = Bundle(path=path, sha256=sha256(data), manifest=manifest, members=contents)
    if run_id(bundle.run_files) != manifest.get("run_id"):
        raise BundleError(f"{path}: refused: the run's files do not give the manifest's run id")
    return bundle
