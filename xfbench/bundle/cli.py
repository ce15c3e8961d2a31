"""`xfbench bundle FOLDER... [--out PATH]`: pack runner folders into checked bundles
(pack.py); `xfbench collect BUNDLE... [--db FILE]`: merge bundles into one database
(database.py). A bundle refused (altered, cut short) is named in one line, the others are
collected, and the exit status is 1."""

from __future__ import annotations

import sys
from pathlib import Path

from xfbench import command_line
from xfbench.bundle import database
from xfbench.bundle.pack import SUFFIX, BundleError, pack
from xfbench.bundle.read import read
from xfbench.errors import UsageError

DEFAULT_DB = Path("results") / "xfbench.sqlite"


def main(argv: list[str] | None = None) -> int:
    p = command_line.ArgumentParser(
        prog="xfbench bundle",
        description="Pack runner folders into bundles: one file each holding the run's "
        "records, every round, LoadGen's logs, the environment (pip freeze, the machine "
        "record) and its model files' hashes, checked on reading (docs/records.md).",
    )
    p.add_argument(
        "folders", nargs="+", metavar="FOLDER", type=command_line.FOLDER, help="runner folders"
    )
    p.add_argument(
        "--out",
        type=command_line.OUTPUT_FILE,
        help=f"the bundle's path, for one FOLDER (default: FOLDER{SUFFIX} beside it)",
    )
    args = command_line.parse_command_line(p, argv)
    if isinstance(args, int):
        return args
    if args.out and len(args.folders) > 1:
        print("xfbench bundle: --out takes one FOLDER", file=sys.stderr)
        return 2
    try:
        command_line.output_path("--out", args.out)
    except UsageError as e:
        print(f"xfbench bundle: {e}", file=sys.stderr)
        return 2
    status = 0
    for folder in args.folders:
        try:
            path, digest = pack(folder, args.out)
        except (BundleError, OSError) as e:
            print(f"xfbench bundle: {e}", file=sys.stderr)
            status = 1
            continue
        print(f"{path}  sha256 {digest}")
    return status


def _collect_parser() -> command_line.ArgumentParser:
    p = command_line.ArgumentParser(
        prog="xfbench collect",
        description="Merge bundles into one SQLite database that xfbench report, score and "
        "compare read as they read folders (FILE, or FILE:PATTERN for some of its runs). "
        "Collecting a bundle again changes nothing.",
    )
    p.add_argument(
        "bundles",
        nargs="+",
        metavar="BUNDLE",
        type=command_line.FILE,
        help="bundles (xfbench bundle)",
    )
    p.add_argument(
        "--db",
        default=str(DEFAULT_DB),
        type=command_line.OUTPUT_FILE,
        help=f"the database (default: {DEFAULT_DB})",
    )
    return p


def collect_main(argv: list[str] | None = None) -> int:
    args = command_line.parse_command_line(_collect_parser(), argv)
    if isinstance(args, int):
        return args
    try:
        command_line.output_path("--db", args.db)
        db = database.connect(args.db, write=True)
    except UsageError as e:
        print(f"xfbench collect: {e}", file=sys.stderr)
        return 2
    except (BundleError, OSError) as e:
        print(f"xfbench collect: {args.db}: {e}", file=sys.stderr)
        return 1
    status, outcomes = 0, []
    try:
        for path in args.bundles:
            try:
                outcomes.append(database.add(db, read(path)))
            except BundleError as e:  # the others still go in: each is its own transaction
                print(f"xfbench collect: {e}", file=sys.stderr)
                status = 1
            except database.sqlite3.Error as e:
                print(f"xfbench collect: {path}: not collected: {e}", file=sys.stderr)
                status = 1
        (runs,) = db.execute("SELECT count(*) FROM runs").fetchone()
        (cells,) = db.execute("SELECT count(*) FROM cells").fetchone()
    except database.sqlite3.Error as e:
        print(f"xfbench collect: {args.db}: {e}", file=sys.stderr)
        return 1
    finally:
        db.close()
    said = ", ".join(f"{outcomes.count(o)} {o}" for o in database.OUTCOMES if o in outcomes)
    print(f"{args.db}: {said or 'nothing collected'}; {runs} runs, {cells} cells in all")
    return status


if __name__ == "__main__":
    sys.exit(main())
