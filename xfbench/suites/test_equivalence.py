"""Equivalence: every framework runs the same function as the canonical ONNX graph.

For each selected network, each training framework (torch, tensorflow, jax), each
selected device (--device; default: the CPU and every GPU present) and each of the
framework's modes that runs there:
- infer: its fp32 logits, from the canonical ONNX weights, against ONNX Runtime's
  on the same batch;
- train: one training step's loss against ONNX Runtime's forward on the "train"
  graph, and its updated weights against the same step computed in float64;
- train-fp64: the same network run in float64 (the fp64 precision): its logits, its
  step's loss and its update (w1 - w0) against float64 PyTorch, to 1e-10 (once, on the
  CPU, where fp64 runs);
- function (the transformers, ONNX Runtime's modes included): the fp32 logits, with the
  kernels each mode runs (its library GELU and attention, ONNX Runtime's fused graph), at
  weights that put GELU's inputs and the attention scores in a trained network's range,
  against the canonical graph in float64, held to FLOOR_FACTOR times a plain fp32 run's
  distance from it: a GELU of the other form, a causal mask one position off or a softmax
  scale off by a factor fails it (tests/test_planted_changes.py).
The references run on the CPU whatever the device checked. fp32 means TF32 off on a GPU
too, and is held to the rule below; with --precision fp32,tf32 a GPU's TF32 checks are run
beside it and their errors recorded (`asserted: false`), not asserted: TF32 is a
different function, whose distance from fp32 is worth knowing but not a defect.
Agreement: a relative error of at most 1e-4, as harness/equivalence.py defines it; for the
updated weights, at most 1e-4 or FLOOR_FACTOR times the distance of a plain fp32 step
from the float64 one, whichever is larger, plus the effect of taking the ReLU and
max-pool decisions that lie within fp32's error of a tie the other way
(harness/equivalence.py says why; `near_ties` and `tie_allowance` are recorded). In
float64 no decision lies that near a tie, so nothing is allowed for.

Each result is one pytest-benchmark entry (its time means nothing) whose
extra_info holds {"kind": "equivalence", "equivalence": {network, framework, mode,
check, scale, batch_size, verified, max_rel_err, worst_tensor, tolerance, reference,
...}}, so a report can mark each row "verified identical".

--framework picks which training frameworks are compared (when it names none of
them, e.g. --framework onnxruntime, all three are); --model picks networks;
--preset smoke (tiny networks, batch 8) or paper/quick (full size, batch 2 unless
--batch-size); --mode picks modes, each framework running those of them it has (default:
every mode of each framework that runs on the CPU; test ids name it, e.g.
resnet56-tensorflow-xla); --seeds 0-9 (or 0,4,7) checks
the canonical weights of each seed (default: seed 0; ids then end in -seedN), a sweep
that is not part of CI. Frameworks not installed, or whose adapter is not in this
checkout, are skipped with the reason. The suite runs only when this file is named on
the command line (`pytest xfbench/suites/test_equivalence.py`): a plain
`pytest xfbench/suites/` is a benchmark run.
"""

from __future__ import annotations

import pytest

from xfbench import records
from xfbench.adapters import get_adapter
from xfbench.errors import CannotRun
from xfbench.frameworks import FRAMEWORKS, training
from xfbench.harness.equivalence import check_modes, parse_seeds
from xfbench.harness.selection import comma_list
from xfbench.models import SMOKE_BATCH, TRANSFORMERS, get_spec
from xfbench.plugin import named

TRAINING_FRAMEWORKS = training()
FULL_BATCH = 2  # full-size networks: a small batch is enough to show the same function

# The float64 references of the network in hand, computed once for all frameworks and
# modes (test order is framework and mode order within a network).
_REFERENCE: dict[tuple, object] = {}
_FLOAT64: dict[tuple, object] = {}


def _selection(config):
    from xfbench.plugin import selection

    return selection(config)


PARAMS = "network, framework, mode, device, precision, seed"
# A plain `pytest xfbench/suites/` is a benchmark run: the equivalence checks (which build
# every network in every framework) run only when asked for by name.
NOT_NAMED = pytest.param(
    *("-",) * 5,
    0,
    marks=pytest.mark.skip(
        reason="the equivalence suite runs when named: pytest xfbench/suites/test_equivalence.py"
    ),
)


def pytest_generate_tests(metafunc):
    if "framework" not in metafunc.fixturenames:
        return
    if not named(metafunc.config, "test_equivalence.py"):
        metafunc.parametrize(PARAMS, [NOT_NAMED], ids=["not-selected"])
        return
    sel = _selection(metafunc.config)
    asked = comma_list(metafunc.config.getoption("framework"))
    chosen = [f for f in TRAINING_FRAMEWORKS if f in asked] or list(TRAINING_FRAMEWORKS)
    networks = list(sel.networks)
    if metafunc.definition.name == "test_function_at_trained_range":
        # the transformers, in every framework that runs them (ONNX Runtime's fused
        # graph among them); the other networks' functions are checked above
        chosen = [f for f in (*TRAINING_FRAMEWORKS, "onnxruntime") if not asked or f in asked]
        networks = [n for n in networks if n in TRANSFORMERS]
    seeds_asked = metafunc.config.getoption("seeds")
    try:
        seeds = parse_seeds(seeds_asked) if seeds_asked else [0]
    except ValueError as e:
        raise pytest.UsageError(f"--seeds: {e}") from None
    # fp32 is held to the rule; tf32 (a GPU's) is measured and recorded, not asserted.
    precisions = [p for p in sel.precisions if p in ("fp32", "tf32")] or ["fp32"]
    params, ids = [], []
    for n in networks:
        for f in chosen:
            for d in sel.devices:
                for m in check_modes(f, sel.modes, d):
                    for p in precisions:
                        for seed in seeds:
                            params.append((n, f, m, d, p, seed))
                            ids.append(
                                f"{n}-{f}-{m}"
                                + (f"-{d}" if d != "cpu" else "")
                                + (f"-{p}" if p != "fp32" else "")
                                + (f"-seed{seed}" if seeds_asked else "")
                            )
    metafunc.parametrize(PARAMS, params, ids=ids)


def _setup(request, framework: str, network: str, seed: int):
    if framework not in FRAMEWORKS:
        pytest.skip(f"the {framework} adapter is not part of this checkout")
    adapter = get_adapter(framework)
    reason = adapter.import_error()
    if reason:
        pytest.skip(reason)
    sel = _selection(request.config)
    spec = get_spec(network, sel.preset.scale)
    batch = sel.batch_size or (SMOKE_BATCH if sel.preset.scale == "smoke" else FULL_BATCH)
    from xfbench.exchange import canonical_weights

    return spec, batch, canonical_weights(spec, seed)


def _record(benchmark, record: dict, seed: int) -> None:
    record["seed"] = seed
    benchmark.group = "equivalence"
    benchmark.extra_info.update({**records.header("equivalence"), "equivalence": record})
    benchmark.pedantic(lambda: None, rounds=1, iterations=1)


def _cached(cache: dict, key: tuple, compute):
    if key not in cache:
        cache.clear()  # one network at a time: full-size weights are large
        cache[key] = compute()
    return cache[key]


def _asserted(record: dict) -> bool:
    """fp32 is held to the rule; tf32's distance is recorded beside it, not asserted."""
    record["asserted"] = record["precision"] == "fp32"
    return record["asserted"]


def test_inference_matches_onnxruntime(
    request, benchmark, network, framework, mode, device, precision, seed
):
    spec, batch, weights = _setup(request, framework, network, seed)
    from xfbench.harness.equivalence import check_inference

    try:
        record = check_inference(
            framework=framework,
            spec=spec,
            weights=weights,
            batch=batch,
            mode=mode,
            device=device,
            precision=precision,
        )
    except CannotRun as e:
        pytest.skip(str(e))
    _asserted(record)
    _record(benchmark, record, seed)
    assert record["verified"] or not record["asserted"], (
        f"{framework} {mode} {network}: logits differ from ONNX Runtime's by "
        f"{record['max_rel_err']:.2e} (tolerance {record['tolerance']})"
    )


def test_training_step_agrees(
    request, benchmark, network, framework, mode, device, precision, seed
):
    spec, batch, weights = _setup(request, framework, network, seed)
    from xfbench.harness.equivalence import ReferenceStep, check_training

    key = (network, spec.scale, batch, seed)
    try:
        reference = _cached(_REFERENCE, key, lambda: ReferenceStep.compute(spec, weights, batch))
        record, _ = check_training(
            framework=framework,
            spec=spec,
            weights=weights,
            batch=batch,
            mode=mode,
            reference=reference,
            device=device,
            precision=precision,
        )
    except CannotRun as e:
        pytest.skip(str(e))
    _asserted(record)
    _record(benchmark, record, seed)
    assert record["verified"] or not record["asserted"], (
        f"{framework} {mode} {network}: loss {record['loss_rel_err']:.2e} from ONNX Runtime's "
        f"(tolerance {record['tolerance']}), updated weights {record['weights_rel_err']:.2e} "
        f"from the float64 step (tolerance {record['weights_tolerance']:.2e}, "
        f"fp32 floor {record['fp32_floor']:.2e}, {record['near_ties']} decisions near a tie "
        f"adding {record['tie_allowance']:.2e})"
    )


def test_float64_step_agrees(request, benchmark, network, framework, mode, device, precision, seed):
    if device != "cpu" or precision != "fp32":
        pytest.skip("float64 is checked once, on the CPU (the fp64 precision runs there only)")
    spec, batch, weights = _setup(request, framework, network, seed)
    from xfbench.harness.equivalence import Float64Reference, check_float64

    key = (network, spec.scale, batch, seed)
    try:
        reference = _cached(_FLOAT64, key, lambda: Float64Reference.compute(spec, weights, batch))
        record = check_float64(
            framework=framework,
            spec=spec,
            weights=weights,
            batch=batch,
            mode=mode,
            reference=reference,
        )
    except CannotRun as e:
        pytest.skip(str(e))
    _record(benchmark, record, seed)
    assert record["verified"], (
        f"{framework} {mode} {network} in float64: logits {record['logits_rel_err']:.2e}, "
        f"loss {record['loss_rel_err']:.2e}, update {record['update_rel_err']:.2e} "
        f"(in {record['worst_update_tensor']}) from float64 PyTorch's "
        f"(tolerance {record['tolerance']:.0e})"
    )


def test_function_at_trained_range(
    request, benchmark, network, framework, mode, device, precision, seed
):
    if precision != "fp32":
        pytest.skip("the function check is an fp32 one")
    spec, batch, weights = _setup(request, framework, network, seed)
    from xfbench.harness.equivalence import check_function

    try:
        record = check_function(
            framework=framework, spec=spec, weights=weights, batch=batch, mode=mode, device=device
        )
    except CannotRun as e:
        pytest.skip(str(e))
    _asserted(record)
    _record(benchmark, record, seed)
    assert record["verified"], (
        f"{framework} {mode} {network} at trained-range weights: logits {record['max_rel_err']:.2e} "
        f"from the float64 function (tolerance {record['tolerance']:.2e}, fp32 floor "
        f"{record['fp32_floor']:.2e})"
    )
