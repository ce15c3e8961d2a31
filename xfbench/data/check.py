"""`xfbench data check --data-dir PATH`: which data sets are present and valid under PATH,
and where to get the missing ones. Nothing is downloaded. Exit 0 when every data set
present is valid (and at least one is), 1 when one is not (named, one line each), 2 for
bad options."""

from __future__ import annotations

import sys
from pathlib import Path

from xfbench import command_line
from xfbench.data.readers import DataError
from xfbench.data.sources import DATASET, WHERE, source_for

# one network per data set, to read it as that network would
NETWORK = {"mnist": "fcn_r", "cifar10": "resnet56", "ptb": "lstm32", "imagenet": "resnet50"}


def check(data_dir: Path) -> list[tuple[str, str, str]]:
    """(data set, "valid" | "missing" | "invalid", detail) for each data set."""
    from xfbench.models import get_spec

    out = []
    for dataset, network in NETWORK.items():
        if not (data_dir / dataset).exists():
            out.append((dataset, "missing", f"put {WHERE[dataset]} in {data_dir / dataset}"))
            continue
        try:
            src = source_for(get_spec(network), data_dir)
        except DataError as e:
            out.append((dataset, "invalid", str(e)))
            continue
        users = ", ".join(n for n, d in DATASET.items() if d == dataset)
        out.append((dataset, "valid", f"{len(src)} samples (for {users})"))
    return out


def main(argv: list[str] | None = None) -> int:
    p = command_line.ArgumentParser(prog="xfbench data", description=__doc__.split("\n\n")[0])
    p.add_argument("action", choices=["check"])
    p.add_argument(
        "--data-dir",
        required=True,
        type=command_line.FOLDER,
        help="the folder holding mnist/, cifar10/, ...",
    )
    args = command_line.parse_command_line(p, argv)
    if isinstance(args, int):
        return args
    data_dir = Path(args.data_dir)
    if not data_dir.is_dir():
        print(f"xfbench data: {data_dir} is not a folder", file=sys.stderr)
        return 2
    results = check(data_dir)
    for dataset, status, detail in results:
        print(f"{dataset:9} {status:8} {detail}")
    if any(status == "invalid" for _, status, _ in results):
        return 1
    return 0 if any(status == "valid" for _, status, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main())
