"""`python -m xfbench.exchange`: write, check and export ONNX files of the suite's networks.

  write  MODEL [--scale smoke] [--seed N] [--out FILE]
         the canonical file (initial weights from the seed); default: the cache
  check  FILE --model MODEL [--scale smoke] [--seed N]
         read FILE; when its initializers carry canonical names, check every name and
         shape against the spec; run it in ONNX Runtime and compare its logits with
         the canonical graph's on the canonical weights of the seed
  export --framework NAME --model MODEL [--scale smoke] [--weights FILE] [--out FILE]
         build the network in a framework from the canonical weights (or FILE's),
         export it through the framework's own exporter, and check that ONNX Runtime
         reproduces the framework's logits; the file is moved into place only then

Bad input gives one line on stderr and exit status 2, and writes nothing.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from xfbench import command_line
from xfbench.exchange.files import (
    ExchangeError,
    canonical_file,
    canonical_path,
    load_structure,
    read_weights,
    write_canonical,
)
from xfbench.models import NETWORKS, SCALES, SMOKE_BATCH, get_spec


def _spec(args):
    return get_spec(args.model, args.scale)


def _batch(args) -> int:
    return args.batch_size or (SMOKE_BATCH if args.scale == "smoke" else 2)


def cmd_write(args) -> int:
    spec = _spec(args)
    path = Path(args.out) if args.out else canonical_path(spec, args.seed)
    write_canonical(spec, args.seed, path)
    print(path)
    return 0


def cmd_check(args) -> int:
    from xfbench.exchange.reference import TOL, reference_logits, rel_err, run_onnx
    from xfbench.models import synthetic_batch

    spec, path = _spec(args), Path(args.file)
    model = load_structure(path)
    names = {t.name for t in model.graph.initializer}
    if any(p.name in names for p in spec.params):
        weights = read_weights(path, spec)
        print(
            f"{path}: all {len(spec.params)} parameters of {spec.id} ({spec.scale}) present "
            "with their canonical shapes"
        )
    else:
        weights = read_weights(canonical_file(spec, args.seed), spec)
        print(
            f"{path}: no canonical parameter names (an export?); comparing it with the "
            f"canonical weights of seed {args.seed}"
        )
    batch = _batch(args)
    x, _ = synthetic_batch(spec, batch)
    try:
        out = run_onnx(path, x)
    except Exception as e:
        raise ExchangeError(
            f"{path}: ONNX Runtime cannot run it: {str(e).strip().splitlines()[0]}"
        ) from None
    err = rel_err(out, reference_logits(spec, weights, batch))
    verdict = "same function" if err <= TOL else "DIFFERENT function"
    print(f"{path}: {verdict}: max relative error of the logits {err:.2e} (tolerance {TOL})")
    return 0 if err <= TOL else 1


def cmd_export(args) -> int:
    from xfbench.adapters import get_adapter
    from xfbench.exchange.reference import TOL
    from xfbench.harness.equivalence import framework_export

    spec = _spec(args)
    adapter = get_adapter(args.framework)
    reason = adapter.import_error()
    if reason:
        raise ExchangeError(reason)
    weights = (
        read_weights(args.weights, spec)
        if args.weights
        else read_weights(canonical_file(spec, args.seed), spec)
    )
    out = Path(args.out or f"{spec.id}-{spec.scale}-{args.framework}.onnx")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".export-", dir=out.parent))
    try:
        err = framework_export(
            framework=args.framework,
            spec=spec,
            weights=weights,
            batch=_batch(args),
            path=tmp / out.name,
        )
        if err > TOL:
            print(
                f"{args.framework} {spec.id}: the exported file's logits differ from "
                f"{args.framework}'s by {err:.2e} (tolerance {TOL}); not written",
                file=sys.stderr,
            )
            return 1
        for f in tmp.iterdir():
            f.replace(out.parent / f.name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(
        f"{out}: exported from {args.framework}; ONNX Runtime reproduces its logits "
        f"(max relative error {err:.2e})"
    )
    return 0


def parser() -> command_line.ArgumentParser:
    p = command_line.ArgumentParser(
        prog="python -m xfbench.exchange", description="ONNX files of the suite's networks"
    )
    sub = p.add_subparsers(dest="command", required=True)

    def common(q, model_positional=False):
        if model_positional:
            q.add_argument("model", choices=list(NETWORKS))
        else:
            q.add_argument("--model", required=True, choices=list(NETWORKS))
        q.add_argument("--scale", default="full", choices=SCALES)
        q.add_argument(
            "--seed", type=command_line.whole_number(0), default=0, help="a whole number, 0 or more"
        )
        q.add_argument(
            "--batch-size",
            type=command_line.whole_number(1),
            default=None,
            help="a whole number above 0",
        )

    w = sub.add_parser("write", help="write the canonical file of a network")
    common(w, model_positional=True)
    w.add_argument("--out", help="where to write it (default: the cache)")
    c = sub.add_parser("check", help="check a file against a network's spec and function")
    c.add_argument("file")
    common(c)
    e = sub.add_parser("export", help="export a network from a framework, checked")
    e.add_argument("--framework", required=True)
    e.add_argument("--weights", help="an ONNX file with canonical weights (default: the seed's)")
    e.add_argument("--out", help="the file to write")
    common(e)
    return p


def main(argv: list[str] | None = None) -> int:
    args = command_line.parse_command_line(parser(), argv)
    if isinstance(args, int):
        return args
    try:
        return {"write": cmd_write, "check": cmd_check, "export": cmd_export}[args.command](args)
    except (ExchangeError, KeyError) as e:
        print(f"error: {str(e).strip(chr(34) + chr(39))}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
