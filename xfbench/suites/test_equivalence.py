"""Equivalence: every framework runs the same function as the canonical ONNX graph.

For each selected network and each training framework (torch, tensorflow, jax):
- infer: its fp32 logits, from the canonical ONNX weights, against ONNX Runtime's
  on the same batch;
- train: one training step's loss against ONNX Runtime's forward on the "train"
  graph, and its updated weights against the same step computed in float64.
Agreement: a relative error of at most 1e-4, as harness/equivalence.py defines it; for the
updated weights, at most 1e-4 or FLOOR_FACTOR times the distance of a plain fp32 step
from the float64 one, whichever is larger, plus the effect of taking the ReLU and
max-pool decisions that lie within fp32's error of a tie the other way
(harness/equivalence.py says why; `near_ties` and `tie_allowance` are recorded).

Each result is one pytest-benchmark entry (its time means nothing) whose
extra_info holds {"kind": "equivalence", "equivalence": {network, framework, mode,
check, scale, batch_size, verified, max_rel_err, worst_tensor, tolerance, reference,
...}}, so a report can mark each row "verified identical".

--framework picks which training frameworks are compared (when it names none of
them, e.g. --framework onnxruntime, all three are); --model picks networks;
--preset smoke (tiny networks, batch 8) or paper/quick (full size, batch 2 unless
--batch-size); --mode picks the framework's mode (default: its first CPU mode).
Frameworks not installed, or whose adapter is not in this checkout, are skipped
with the reason. The suite runs only when this file is named on the command line
(`pytest xfbench/suites/test_equivalence.py`): a plain `pytest xfbench/suites/` is a benchmark run.
"""

from __future__ import annotations

import pytest

from xfbench import records
from xfbench.adapters import Unsupported, get_adapter
from xfbench.frameworks import FRAMEWORKS, training
from xfbench.harness.selection import comma_list
from xfbench.models import SMOKE_BATCH, get_spec
from xfbench.plugin import named

TRAINING_FRAMEWORKS = training()
FULL_BATCH = 2  # full-size networks: a small batch is enough to show the same function

# The float64 reference step of the network in hand, computed once for all frameworks
# (test order is framework order within a network).
_REFERENCE: dict[tuple[str, str, int], object] = {}


def _selection(config):
    from xfbench.plugin import selection

    return selection(config)


def pytest_generate_tests(metafunc):
    if "framework" not in metafunc.fixturenames:
        return
    if not named(metafunc.config, "test_equivalence.py"):
        # A plain `pytest xfbench/suites/` is a benchmark run: the equivalence checks (which
        # build every network in every framework) run only when asked for by name.
        metafunc.parametrize(
            "network, framework",
            [
                pytest.param(
                    "-",
                    "-",
                    marks=pytest.mark.skip(
                        reason="the equivalence suite runs when named: "
                        "pytest xfbench/suites/test_equivalence.py"
                    ),
                )
            ],
            ids=["not-named"],
        )
        return
    sel = _selection(metafunc.config)
    asked = comma_list(metafunc.config.getoption("framework"))
    chosen = [f for f in TRAINING_FRAMEWORKS if f in asked] or list(TRAINING_FRAMEWORKS)
    pairs = [(n, f) for n in sel.networks for f in chosen]
    metafunc.parametrize("network, framework", pairs, ids=[f"{n}-{f}" for n, f in pairs])


def _setup(request, framework: str, network: str):
    if framework not in FRAMEWORKS:
        pytest.skip(f"the {framework} adapter is not part of this checkout")
    adapter = get_adapter(framework)
    reason = adapter.import_error()
    if reason:
        pytest.skip(reason)
    sel = _selection(request.config)
    spec = get_spec(network, sel.preset.scale)
    batch = sel.batch_size or (SMOKE_BATCH if sel.preset.scale == "smoke" else FULL_BATCH)
    modes = [m for m in (sel.modes or ()) if m in adapter.modes]
    mode = modes[0] if modes else None
    from xfbench.exchange import canonical_weights

    return spec, batch, mode, canonical_weights(spec)


def _record(benchmark, record: dict) -> None:
    benchmark.group = "equivalence"
    benchmark.extra_info.update({**records.header("equivalence"), "equivalence": record})
    benchmark.pedantic(lambda: None, rounds=1, iterations=1)


def test_inference_matches_onnxruntime(request, benchmark, network, framework):
    spec, batch, mode, weights = _setup(request, framework, network)
    from xfbench.harness.equivalence import check_inference

    try:
        record = check_inference(framework, spec, weights, batch, mode)
    except Unsupported as e:
        pytest.skip(str(e))
    _record(benchmark, record)
    assert record["verified"], (
        f"{framework} {network}: logits differ from ONNX Runtime's by "
        f"{record['max_rel_err']:.2e} (tolerance {record['tolerance']})"
    )


def test_training_step_agrees(request, benchmark, network, framework):
    spec, batch, mode, weights = _setup(request, framework, network)
    from xfbench.harness.equivalence import ReferenceStep, check_training

    key = (network, spec.scale, batch)
    try:
        if key not in _REFERENCE:
            _REFERENCE.clear()  # one network at a time: full-size weights are large
            _REFERENCE[key] = ReferenceStep.compute(spec, weights, batch)
        record, _ = check_training(framework, spec, weights, batch, mode, _REFERENCE[key])
    except Unsupported as e:
        pytest.skip(str(e))
    _record(benchmark, record)
    assert record["verified"], (
        f"{framework} {network}: loss {record['loss_rel_err']:.2e} from ONNX Runtime's "
        f"(tolerance {record['tolerance']}), updated weights {record['weights_rel_err']:.2e} "
        f"from the float64 step (tolerance {record['weights_tolerance']:.2e}, "
        f"fp32 floor {record['fp32_floor']:.2e}, {record['near_ties']} decisions near a tie "
        f"adding {record['tie_allowance']:.2e})"
    )
