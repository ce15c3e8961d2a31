"""`xfbench profile NETWORK`: every layer of a network, from its spec, with its FLOPs, the
bytes it moves and its arithmetic intensity (roofline/profile.py), and with --framework
each layer's measured time in that framework (roofline/layers.py). `--task generate`: a
language model's decode step at each batch against this machine's measured bandwidth and
peak, and the batch where it stops being bandwidth-bound (roofline/decode.py).
"""

from __future__ import annotations

import sys

from xfbench import command_line
from xfbench.errors import UsageError
from xfbench.harness.selection import fit_positions, normalize_device, token_lengths
from xfbench.models import DECODERS, NETWORKS, SCALES, Spec, get_spec
from xfbench.roofline.profile import VALUE_BYTES, plot, table


def parser() -> command_line.ArgumentParser:
    p = command_line.ArgumentParser(prog="xfbench profile", description=__doc__.split("\n\n")[0])
    word = command_line.WORD
    p.add_argument("network", type=word, help=f"one of {', '.join(NETWORKS)}")
    p.add_argument(
        "--task",
        default="infer",
        type=word,
        help="infer (forward), train, or generate (gpt2's decode step; default: infer)",
    )
    p.add_argument(
        "--batch-size",
        type=command_line.whole_number(1),
        help="default: Table 7's batch (generate: 1, 2, 4, ... 512)",
    )
    p.add_argument("--precision", default="fp32", type=word, help=", ".join(VALUE_BYTES))
    p.add_argument(
        "--scale", default="full", type=word, help=f"{' or '.join(SCALES)} (default: full)"
    )
    p.add_argument("--format", default="md", type=word, help="md or csv (default: md)")
    p.add_argument(
        "--plot",
        metavar="FILE",
        type=command_line.OUTPUT_FILE,
        help="also write the per-layer plot (PNG)",
    )
    _generate_options(p)
    _measured_options(p)
    return p


def _generate_options(p: command_line.ArgumentParser) -> None:
    """--task generate's options: the token lengths and the roofs, given or measured."""
    word = command_line.WORD
    g = p.add_argument_group("--task generate")
    g.add_argument(
        "--lengths",
        default="128/128",
        metavar="ISL/OSL",
        type=word,
        help="prompt/new tokens (default: 128/128)",
    )
    g.add_argument(
        "--bandwidth",
        metavar="GBPS",
        type=command_line.number_kind("a number of GB/s"),
        help="memory bandwidth in GB/s (default: measured now, STREAM at --threads)",
    )
    g.add_argument(
        "--peak",
        metavar="TFLOPS",
        type=command_line.number_kind("a number of TFLOP/s"),
        help="peak at --precision in TFLOP/s (default: measured now, fp32 GEMM at --threads)",
    )


def _measured_options(p: command_line.ArgumentParser) -> None:
    """--framework's options: where and how the network runs to time each layer."""
    word = command_line.WORD
    m = p.add_argument_group(
        "measured per-layer time (run the network, profile each layer's forward and backward)"
    )
    m.add_argument(
        "--framework",
        type=word,
        help="run it in this framework and time every layer (torch; the others say why not)",
    )
    m.add_argument(
        "--mode", type=word, help="the framework's mode (default: eager, else its first)"
    )
    m.add_argument("--device", default="cpu", type=word, help="cpu or cuda:N (default: cpu)")
    m.add_argument(
        "--threads",
        type=command_line.whole_number(1),
        help="CPU threads (default: every CPU this process may use)",
    )


def main(argv: list[str] | None = None) -> int:
    args = command_line.parse_command_line(parser(), argv)
    if isinstance(args, int):
        return args
    try:
        # a decoder of DECODERS has a decode step's roofline only (--task generate)
        known = [*NETWORKS, *(DECODERS if args.task == "generate" else ())]
        if args.network not in known:
            raise UsageError(f"unknown network {args.network!r}; valid: {', '.join(known)}")
        for name, value, valid in (
            ("--task", args.task, ("infer", "train", "generate")),
            ("--precision", args.precision, tuple(VALUE_BYTES)),
            ("--scale", args.scale, SCALES),
            ("--format", args.format, ("md", "csv")),
        ):
            if value not in valid:
                raise UsageError(f"unknown {name} {value!r}; valid: {', '.join(valid)}")
        # checked whatever the task, so that a wrong one is refused, never silently unused
        if args.mode and not args.framework:
            raise UsageError("--mode is the mode of --framework: give --framework too")
        args.device = normalize_device(args.device)
        token_lengths(args.lengths)
        command_line.output_path("--plot", args.plot)
    except UsageError as e:
        print(f"xfbench profile: {e}", file=sys.stderr)
        return 2
    spec = get_spec(args.network, args.scale)
    if args.task == "generate":
        return _decode(args, spec)
    batch = args.batch_size or spec.batch_size
    if args.framework:
        return _measured(args, spec, batch)
    print(table(spec, batch, precision=args.precision, task=args.task, fmt=args.format))
    if args.plot:
        plot(spec, batch, precision=args.precision, task=args.task, path=args.plot)
        print(f"plot: {args.plot}", file=sys.stderr)
    return 0


def _measured(args, spec: Spec, batch: int) -> int:
    """--framework: the cell built, run and profiled per layer (roofline/layers.py)."""
    from xfbench.errors import CannotRun
    from xfbench.frameworks import FRAMEWORKS
    from xfbench.harness import memory, threads
    from xfbench.roofline import layers

    def fail(message: str, status: int = 2) -> int:
        print(f"xfbench profile: {message}", file=sys.stderr)
        return status

    if args.framework not in FRAMEWORKS:
        return fail(f"unknown --framework {args.framework!r}; valid: {', '.join(FRAMEWORKS)}")
    n = args.threads or len(threads.allowed_cpus())
    try:
        threads.pin(n)  # before the framework is imported, as a sweep's child does
    except ValueError as e:
        return fail(str(e))
    memory.keep_freed_memory()  # and the same allocator settings, or its times are not a cell's
    from xfbench.adapters import get_adapter

    adapter = get_adapter(args.framework)
    reason = adapter.import_error()
    if reason:
        return fail(reason, 1)
    mode = args.mode or ("eager" if "eager" in adapter.modes else (adapter.modes or ("",))[0])
    if mode not in adapter.modes:
        valid = ", ".join(adapter.modes) or "none"
        return fail(f"unknown --mode {mode!r} for {args.framework}; valid: {valid}")
    cell = _profiled_cell(args, spec, batch=batch, mode=mode, threads=n)
    reason = adapter.layer_times_reason(cell)
    if reason:
        return fail(f"cannot measure {cell.id}: {reason}", 1)
    adapter.configure_threads(n)
    try:
        _, times, plain = layers.measure(cell)
    except CannotRun as e:
        return fail(f"cannot measure {cell.id}: {e}", 1)
    print(layers.report(spec, cell, times, plain_s=plain, fmt=args.format))
    return 0


def _profiled_cell(args, spec: Spec, *, batch: int, mode: str, threads: int):
    """The cell --framework profiles: the network run on resident data, as a sweep's is."""
    from xfbench.adapters import Cell

    return Cell(
        network=spec.id,
        framework=args.framework,
        mode=mode,
        precision=args.precision,
        device=args.device,
        threads=threads,
        batch_size=batch,
        task=args.task,
        data="resident",
        scale=spec.scale,
        tokens=None,
    )


def _decode(args, spec: Spec) -> int:
    """--task generate: the decode roofline at this machine's roofs (or those given)."""
    from xfbench.models import layers as L
    from xfbench.roofline import decode

    try:
        # a decoder: a causal language model, which predicts the next token
        decoders = tuple(n for n in (*NETWORKS, *DECODERS) if get_spec(n).objective == "next_token")
        if spec.id not in decoders:
            raise UsageError(f"--task generate: {spec.id} does not generate; valid: {decoders}")
        pairs = token_lengths(args.lengths)
        if len(pairs) != 1:
            raise UsageError("--lengths: one ISL/OSL pair")
        [pair] = pairs
        positions = spec.layer(L.TokenEmbedding)[0].positions
        fit_positions(pairs, spec.id, positions, spec.scale)
        given = {
            name: command_line.number(f"--{name}", value) if value is not None else None
            for name, value in (("bandwidth", args.bandwidth), ("peak", args.peak))
        }
    except UsageError as e:
        print(f"xfbench profile: {e}", file=sys.stderr)
        return 2
    found = _roofs(args, given)
    if found is None:
        return 1
    bandwidth, peak = found
    batches = [args.batch_size] if args.batch_size else [2**i for i in range(10)]
    print(
        decode.table(
            spec,
            batches=batches,
            lengths=pair,
            bandwidth_gbps=bandwidth,
            peak_tflops=peak,
            precision=args.precision,
            fmt=args.format,
        )
    )
    return 0


def _roofs(args, given: dict) -> tuple[float, float] | None:
    """The bandwidth and peak: those given, the others measured now at --threads (None,
    said why, when the measurement stopped at its wall-clock limit)."""
    from xfbench.harness import threads
    from xfbench.roofline import roofs

    bandwidth, peak = given["bandwidth"], given["peak"]
    if bandwidth is None or peak is None:
        n = args.threads or len(threads.allowed_cpus())
        measured = roofs.measure(n)
        bandwidth = bandwidth or measured["memory_bandwidth_gbps"]
        own = measured.get(f"{args.precision}_peak_tflops")
        peak = peak or (own if isinstance(own, (int, float)) else measured["fp32_peak_tflops"])
        if bandwidth is None or peak is None:  # stopped at its wall-clock limit
            why = "; ".join(f"{k} {v}" for k, v in measured.get("stopped", {}).items())
            print(f"xfbench profile: roofs not measured ({why}): give --bandwidth and --peak",
                  file=sys.stderr)  # fmt: skip
            return None
        print(f"roofs measured now at {n} thread(s): {roofs.METHOD}", file=sys.stderr)
        if given["peak"] is None and not isinstance(own, (int, float)):
            print(f"xfbench profile: no {args.precision} peak measured here: the fp32 peak "
                  "stands in for it (--peak gives one)", file=sys.stderr)  # fmt: skip
    return bandwidth, peak
