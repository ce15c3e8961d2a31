"""The GEMM suite's pytest plumbing: options, cells, the fixture, and the
end-of-session share-of-best (in the JSON and the terminal table).

Options (beside the common --precision, --device, --threads and --preset):
  --gemm-impl   implementations, comma-separated: cupy, torch, jax, tensorflow,
                onnxruntime, numpy. Default: the frameworks named by --framework
                (their own matmuls, without the cupy/numpy baselines), or every
                implementation when --framework is not given. Implementations
                that are not installed, or cannot run on a device, skip with the reason.
  --gemm-sizes  N (square), MxNxK, layers[:BATCH]; default: the preset's list.
--model names networks, so with it (and neither GEMM option) no GEMM cell is selected.
--precision defaults to every GEMM type here (fp32, tf32, bf16, fp16, fp8).
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from xfbench import options, records
from xfbench.errors import CannotRun, UsageError
from xfbench.gemm import DTYPES, FRAMEWORK_IMPL, IMPLS, get_impl, gpu_steps
from xfbench.gemm import fields as record_fields
from xfbench.gemm.best import fill_share_of_best
from xfbench.gemm.measure import KIND, GemmCell, WrongProduct, measure
from xfbench.gemm.shapes import Shape, parse_sizes, preset_shapes
from xfbench.gemm.table import gemm_table
from xfbench.harness.presets import Preset
from xfbench.harness.selection import comma_list, parse
from xfbench.plugin import GpuPart, Suite, SuiteOptions, Summary, declare, failed_row
from xfbench.plugin import named as plugin_named

CONFIGURED = pytest.StashKey[dict]()


@dataclass(frozen=True, kw_only=True)
class GemmSelection:
    impls: tuple[str, ...]
    shapes: tuple[Shape, ...]
    dtypes: tuple[str, ...]
    devices: tuple[str, ...]
    threads: int
    preset: Preset

    def cells(self) -> list[GemmCell]:
        return [
            GemmCell(impl=impl, shape=shape, dtype=dtype, device=device, threads=self.threads)
            for impl in self.impls
            for device in self.devices
            for dtype in self.dtypes
            for shape in self.shapes
        ]


def select(
    gemm_impl=None,
    gemm_sizes=None,
    framework=None,
    precision=None,
    device=None,
    threads=None,
    preset=None,
    model=None,
    skip_missing_devices=False,
    suite_named: bool = False,
) -> GemmSelection:
    """Validate raw option strings into a GemmSelection (UsageError on bad input)."""
    # The common options, validated exactly as the network suites validate them.
    sel = parse(
        framework="null",
        precision=precision,
        device=device,
        threads=threads,
        preset=preset,
        skip_missing_devices=skip_missing_devices,
    )
    asked = bool(comma_list(gemm_impl) or gemm_sizes or suite_named)  # not a network suite
    impls = _impls(gemm_impl, framework, model, gemm_sizes)
    try:
        shapes = parse_sizes(gemm_sizes) if gemm_sizes else preset_shapes(sel.preset.name)
    except UsageError as e:
        raise UsageError(str(e)) from None
    dtypes = list(sel.precisions) if comma_list(precision) else list(DTYPES)
    unknown = [d for d in dtypes if d not in DTYPES]
    if unknown and asked:
        # fp64 and int8 are network precisions, not GEMM types here: an error when the GEMM
        # suite was asked for (its file or its options named), else left to the network
        # suites of the same session
        raise UsageError(f"unknown GEMM precision {', '.join(unknown)}; valid: {', '.join(DTYPES)}")
    dtypes = [d for d in dtypes if d in DTYPES]
    return GemmSelection(
        impls=tuple(impls),
        shapes=tuple(shapes),
        dtypes=tuple(dtypes),
        devices=sel.devices,
        threads=sel.threads,
        preset=sel.preset,
    )


def _impls(gemm_impl, framework, model, gemm_sizes) -> list[str]:
    """--gemm-impl's implementations, else those of --framework's frameworks, else all; none
    where --model names networks and no GEMM option was given (a network suite's session)."""
    impls = comma_list(gemm_impl)
    for name in impls:
        if name not in IMPLS:
            raise UsageError(f"unknown GEMM implementation {name!r}; valid: {', '.join(IMPLS)}")
    if impls or (comma_list(model) and not gemm_sizes):
        return impls
    named = comma_list(framework)
    if not named:
        return list(IMPLS)
    return list(dict.fromkeys(FRAMEWORK_IMPL[f] for f in named if f in FRAMEWORK_IMPL))


def _select(config) -> GemmSelection:
    config.stash[CONFIGURED] = {}
    names = (
        "gemm_impl",
        "gemm_sizes",
        "framework",
        "precision",
        "device",
        "threads",
        "preset",
        "model",
    )
    return select(
        **{name: config.getoption(name) for name in names},
        skip_missing_devices=config.getoption("skip_missing_devices", False),
        suite_named=plugin_named(config, "test_gemm.py"),
    )


# Its own options (xfbench/options.py says what each field is).
OPTIONS = (
    options.Option(
        name="gemm-impl",
        values="GEMM suite: implementations, comma-separated: `cupy`, `torch`, `jax`, "
        "`tensorflow`, `onnxruntime`, `numpy`",
        default="those of --framework, else all",
    ),
    options.Option(
        name="gemm-sizes",
        values="GEMM suite: sizes, comma-separated: `N` (square), `MxNxK` (C is MxN), "
        "`layers[:BATCH]`",
        default="the preset's sizes",
    ),
)


SUITE: Suite = declare(
    Suite(
        name="GEMM",
        param="gemm_cell",
        cells=lambda metafunc: SUITE.selection(metafunc.config).cells(),
        select=_select,
        summary=Summary(
            title="xfbench GEMM: TFLOP/s (median), share of datasheet peak and of the best "
            "implementation",
            table=lambda records: summary(records),
        ),
        options=SuiteOptions(
            own=OPTIONS,
            notes={"precision": options.Note(takes="`fp8` too", default="every GEMM type")},
            precisions=("fp8",),  # through torch._scaled_mm only
        ),
        gpu=GpuPart(
            steps=gpu_steps.steps,
            parts=gpu_steps.PARTS,
            probes={"cupy": lambda: get_impl("cupy")},  # its own implementation: raw cuBLAS
        ),
        kinds=(KIND,),
        tasks=(KIND,),
        report="xfbench.gemm.report",
    )
)
records.declare_kind(KIND, record_fields.GEMM, record_fields.older)


def pytest_addoption(parser):
    options.add_pytest_options(parser, OPTIONS)


@pytest.fixture
def run_gemm(request, benchmark):
    """Measure one GEMM cell: skip with the reason when it cannot run here."""
    config = request.config
    sel = SUITE.selection(config)

    def run(cell: GemmCell) -> dict:
        impl = get_impl(cell.impl)
        reason = impl.import_error()
        if reason:
            pytest.skip(reason)
        configured = config.stash[CONFIGURED]
        if cell.impl not in configured:
            configured[cell.impl] = impl.configure_threads(cell.threads)
        benchmark.group = f"gemm {cell.shape.label} {cell.dtype} {cell.device}"
        try:
            record = measure(benchmark, cell, sel.preset, configured[cell.impl])
        except CannotRun as e:
            pytest.skip(str(e))
        except WrongProduct:
            SUITE.records(config).append(dict(benchmark.extra_info))
            raise
        except Exception as e:
            SUITE.records(config).append(failed_row(cell.as_dict(), e))
            raise
        SUITE.records(config).append(record)
        return record

    return run


def pytest_benchmark_update_json(config, benchmarks, output_json):
    fill_share_of_best(b.get("extra_info", {}) for b in output_json.get("benchmarks", []))


def summary(records: list[dict]) -> str:
    fill_share_of_best(records)
    return gemm_table(records)
