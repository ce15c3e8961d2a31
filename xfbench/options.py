"""The command-line options of the suites, declared once: the common ones here, each
suite's own with the suite (plugin.Suite's `options`, with `takes`, the common options its
sweep takes, and `notes`, what a common option means in it); and the machinery of every
option, `xfbench run`'s own included (runner.arguments declares those).

From these come pytest's options (plugin.pytest_addoption), which `--suite` of the runner
each option applies to, the options a child pytest is given so that it expands the same
cells (runner.group), and, with the runner's own, `xfbench run`'s parser and
docs/running.md's options table (runner.arguments). Adding an option is one entry; reading
and checking its value is the code that uses it. Read them once the suites are declared
(plugin.declared()).

Values stay strings (or booleans for flags) until the code that uses them checks them
(with xfbench/command_line.py's checks), so that pytest and `xfbench run` check every value
in one place and answer a bad one in one line (xfbench.errors.UsageError). Each option also
declares the kind of value it takes (`kind`, a name in command_line.KINDS), which `xfbench
run` checks where it parses its command line: a number, a count, a folder, a word.
"""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True, kw_only=True)
class Option:
    name: str  # without the leading --
    values: str  # what it takes: one line, also its help
    default: str  # what it means when not given
    pytest: bool = True  # an option of pytest xfbench/suites/...
    # the `xfbench run --suite`s it applies to: ALL, TAKEN (its own suite's and those that
    # take it, Suite.takes) or () none
    run: tuple[str, ...] = ()
    # a setting each child process of a sweep measures its cells with, as the user gave it
    # (the cells themselves reach the child as records: runner.group)
    child: bool = False
    selection: bool = False  # read by harness.selection.parse
    flag: bool = False  # takes no value
    run_values: str = ""  # where `xfbench run` reads it otherwise (a list, not one count)
    group: str = "cells"
    metavar: str | None = None
    # the kind of value it takes, a name in command_line.KINDS, checked where `xfbench run`
    # parses it (a "word": a name the code checks against what it knows, never empty)
    kind: str = "word"

    @property
    def dest(self) -> str:
        return self.name.replace("-", "_")

    def applies(self, suite: str) -> bool:
        """Whether `xfbench run --suite suite` takes it."""
        return self.run == ALL or (self.run == TAKEN and suite in TAKERS.get(self.name, ()))

    def takes(self, run: bool = False) -> str:
        """What it takes, with what it takes in the suites that note it."""
        text = self.run_values if run and self.run_values else self.values
        return text + "".join(f"; {s}: {n.takes}" for s, n in NOTES.get(self.name, ()) if n.takes)

    def means_by_default(self) -> str:
        return self.default + "".join(
            f"; {s}: {n.default}" for s, n in NOTES.get(self.name, ()) if n.default
        )

    def help(self, run: bool = False) -> str:
        # argparse formats help with %: a literal % is %%
        text = self.takes(run).replace("`", "")
        return f"{text} (default: {self.means_by_default()})".replace("%", "%%")


@dataclass(frozen=True)
class Note:
    """What a common option takes, and means when not given, in one suite (Suite.notes)."""

    takes: str = ""
    default: str = ""


ALL = ("*",)  # every suite of `xfbench run`, those added later included
TAKEN = ("taken",)  # the suites of `xfbench run` that take it
COMMON: tuple[Option, ...] = (
    Option(
        name="framework",
        values="frameworks, comma-separated: `torch`, `tensorflow`, `jax`, `onnxruntime` "
        "(and `null`, the harness's own cost)",
        default="every installed framework (a training sweep leaves ONNX Runtime out)",
        run=ALL,
        selection=True,
    ),
    Option(
        name="model",
        values="networks, comma-separated: `fcn5`, `fcn8`, `fcn_r`, `alexnet`, `alexnet_r`, "
        "`resnet50`, `resnet56`, `lstm32`, `lstm64`, `bert_base`, `gpt2`",
        default="the preset's: Shi's nine and the two transformers (`table7`, "
        "`procurement`: the nine)",
        run=TAKEN,
        selection=True,
    ),
    Option(
        name="mode",
        values="execution modes, comma-separated: PyTorch `eager`, `compile`, `cudagraph`; "
        "TensorFlow `eager`, `function`, `xla`; JAX `jit`; ONNX Runtime `cpu`, `cuda`, "
        "`tensorrt`, `fused` (the transformers)",
        default="the preset's choice, else every mode that runs on the device",
        run=TAKEN,
        selection=True,
    ),
    Option(
        name="precision",
        values="`fp32` (TF32 off), `tf32`, `bf16`, `fp16`, `fp64` (CPU only), `int8` "
        "(inference, where a framework has a CPU path), comma-separated",
        default="fp32",
        run=TAKEN,
        selection=True,
    ),
    Option(
        name="device",
        values="devices, comma-separated: `cpu`, `cuda:N` (or `gpu:N`), `tpu:N`",
        default="cpu and every GPU present",
        run=ALL,
        selection=True,
    ),
    Option(
        name="threads",
        values="CPU threads of this pytest process, one count (a suite of several processes "
        "a cell: per worker or rank)",
        run_values="thread counts, comma-separated, e.g. 1,2,4; each count a process of "
        "its own (a suite of several processes a cell: one count, per worker or rank)",
        default="every CPU this process may use; xfbench run: 1, 2, 4, ... up to them",
        run=ALL,
        selection=True,
        kind="whole numbers",
    ),
    Option(
        name="preset",
        values="one of `paper` (Table 7 sizes, 10 s of timed steps a cell), `quick` "
        "(Table 7 sizes, 1 s), `table7` (Table 7's CPU columns), `procurement` (table7 with 10 "
        "timed rounds, for the scores), `reference` (every network trained and inferred, 6 "
        "timed rounds: the checked-in reference's), `smoke` (tiny, for tests)",
        default="paper",
        run=ALL,
        child=True,
        selection=True,
    ),
    Option(
        name="batch-size",
        values="one mini-batch size, a whole number above 0",
        default="the preset's: Table 7's, or the smoke batch",
        run=TAKEN,
        selection=True,
        kind="whole numbers",
    ),
    Option(
        name="workers",
        values="worker counts, comma-separated, e.g. 1,2,4",
        default="1,2 on the CPU; 1, 2, 4, ... up to the GPUs present on cuda",
        run=TAKEN,
        kind="whole numbers",
    ),
    Option(
        name="rounds",
        values="timed rounds a cell, a whole number above 0, instead of the preset's (fewer "
        "rounds: a wider interval, which the record says; xfbench run --minutes sets it "
        "for each process group)",
        default="the preset's",
        run=TAKEN,
        child=True,
        selection=True,
        kind="count",
    ),
    Option(
        name="weights",
        values="one of `seed` (drawn in memory) or `onnx` (read back from the canonical ONNX "
        "files, written to $XFBENCH_CACHE first when missing); the same numbers",
        default="seed",
        run=TAKEN,
        child=True,
    ),
    Option(
        name="skip-missing-devices",
        values="record the cells of a --device this machine lacks as skipped",
        default="such a device is an error listing those present",
        flag=True,
        run=TAKEN,
        child=True,
        selection=True,
    ),
    Option(
        name="cell-timeout",
        values="seconds one cell may take, a number above 0 (pytest: a group run in a child "
        "process, and each multi-process cell's workers)",
        default="the preset's: smoke 120, quick 900, table7 900, procurement 1800, reference "
        "900, paper 3600",
        run=ALL,
        group="sweep",
        metavar="SECONDS",
        kind="seconds",
    ),
)


# What the suites declare (declare): their own options, in the order the suites are
# declared; the suites of `xfbench run` taking each option; their notes on common options;
# and what each suite of `xfbench run` is, for --suite.
OWN: list[Option] = []
TAKERS: dict[str, list[str]] = {}
NOTES: dict[str, list[tuple[str, Note]]] = {}
SWEEPS: dict[str, str] = {}
DEFAULT: list[str] = []  # the suite `xfbench run` sweeps when --suite is not given


def declare(
    suite: str,
    own: tuple[Option, ...] = (),
    takes: tuple[str, ...] = (),
    notes: dict[str, Note] | None = None,
    sweep: str = "",
    default: bool = False,
) -> None:
    """A suite's options: its own (shown under its name), the options its `xfbench run`
    sweep takes, its notes on common ones, and `sweep`, what it runs (one phrase; "": it is
    no suite of `xfbench run`)."""
    for o in own:
        if o.name in by_name():
            raise ValueError(f"option --{o.name} is declared already")
        OWN.append(replace(o, group=suite))
    for name in (*takes, *(o.name for o in own if o.run == TAKEN)):
        if suite not in TAKERS.setdefault(name, []):
            TAKERS[name].append(suite)
    for name, note in (notes or {}).items():
        NOTES.setdefault(name, []).append((suite, note))
    if sweep:
        SWEEPS[suite] = sweep
    if default:
        if DEFAULT and DEFAULT[0] != suite:
            raise ValueError(f"suite {suite}: the default suite is declared already: {DEFAULT[0]}")
        DEFAULT[:] = [suite]


def default_sweep() -> str:
    """The suite `xfbench run` sweeps when --suite is not given: the one declared so (the
    order suites are imported in aside), else the first declared."""
    return DEFAULT[0] if DEFAULT else next(iter(SWEEPS))


def every() -> tuple[Option, ...]:
    """Every option of the suites: the common options of the cells, the suites' own, then
    the common options of the sweep (`xfbench run` adds its own: runner.arguments)."""
    cells = tuple(o for o in COMMON if o.group == "cells")
    rest = tuple(o for o in COMMON if o.group != "cells")
    return (*cells, *OWN, *rest)


def by_name() -> dict[str, Option]:
    return {o.name: o for o in (*COMMON, *OWN)}


def selection_options() -> tuple[str, ...]:
    """The dests harness.selection.parse reads: the common ones, and those a suite declares."""
    return tuple(o.dest for o in (*COMMON, *OWN) if o.selection)


def pytest_options() -> tuple[Option, ...]:
    return tuple(o for o in every() if o.pytest)


def child_options() -> tuple[str, ...]:
    return tuple(o.name for o in every() if o.child)


def add_pytest_options(parser, chosen: tuple[Option, ...] | None = None) -> None:
    """pytest's options: every declared one, or those chosen (a suite outside xfbench)."""
    group = parser.getgroup("xfbench", "xfbench cell selection")
    for o in pytest_options() if chosen is None else tuple(o for o in chosen if o.pytest):
        if o.flag:
            group.addoption(f"--{o.name}", action="store_true", default=False, help=o.help())
        else:
            group.addoption(
                f"--{o.name}", action="store", default=None, metavar=o.metavar, help=o.help()
            )
