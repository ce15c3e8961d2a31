"""Equivalence: every framework runs the same function as the canonical ONNX graph.

For each selected network and each training framework (torch, tensorflow, jax):
- infer: its fp32 logits, from the canonical ONNX weights, against ONNX Runtime's
  on the same batch;
- train: one training step's loss against ONNX Runtime's forward on the "train"
  graph, and its updated weights against the first framework's (PyTorch's).
Agreement: a relative error of at most 1e-4, as exchange/verify.py defines it.

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
(`pytest suites/test_equivalence.py`): a plain `pytest suites/` is a benchmark run.
"""
from __future__ import annotations

import pytest

from adapters import REGISTRY, Unsupported, get_adapter
from models import SMOKE_BATCH, get_spec

TRAINING_FRAMEWORKS = ("torch", "tensorflow", "jax")
FULL_BATCH = 2  # full-size networks: a small batch is enough to show the same function

# Updated weights of the first framework to run each network's step: the reference
# for the frameworks after it (test order is framework order within a network).
_UPDATED: dict[tuple[str, str], tuple[str, dict]] = {}


def _selection(config):
    from conftest import SELECTION
    return config.stash[SELECTION]


def asked_for(config) -> bool:
    """Whether this file was named on the command line (alone, or with test ids)."""
    return any(str(arg).split("::")[0].endswith("test_equivalence.py") for arg in config.args)


def pytest_generate_tests(metafunc):
    if "framework" not in metafunc.fixturenames:
        return
    if not asked_for(metafunc.config):
        # A plain `pytest suites/` is a benchmark run: the equivalence checks (which
        # build every network in every framework) run only when asked for by name.
        metafunc.parametrize("network, framework", [pytest.param(
            "-", "-", marks=pytest.mark.skip(reason="the equivalence suite runs when named: "
                                                    "pytest suites/test_equivalence.py"))],
            ids=["not-named"])
        return
    sel = _selection(metafunc.config)
    named = (metafunc.config.getoption("framework") or "").split(",")
    chosen = [f for f in TRAINING_FRAMEWORKS if f in named] or list(TRAINING_FRAMEWORKS)
    pairs = [(n, f) for n in sel.networks for f in chosen]
    metafunc.parametrize("network, framework", pairs, ids=[f"{n}-{f}" for n, f in pairs])


def _setup(request, framework: str, network: str):
    if framework not in REGISTRY:
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
    from exchange import canonical_weights
    return spec, batch, mode, canonical_weights(spec)


def _record(benchmark, record: dict) -> None:
    benchmark.group = "equivalence"
    benchmark.extra_info.update({"kind": "equivalence", "equivalence": record})
    benchmark.pedantic(lambda: None, rounds=1, iterations=1)


def test_inference_matches_onnxruntime(request, benchmark, network, framework):
    spec, batch, mode, weights = _setup(request, framework, network)
    from exchange.verify import check_inference
    try:
        record = check_inference(framework, spec, weights, batch, mode)
    except Unsupported as e:
        pytest.skip(str(e))
    _record(benchmark, record)
    assert record["verified"], (f"{framework} {network}: logits differ from ONNX Runtime's by "
                                f"{record['max_rel_err']:.2e} (tolerance {record['tolerance']})")


def test_training_step_agrees(request, benchmark, network, framework):
    spec, batch, mode, weights = _setup(request, framework, network)
    from exchange.verify import check_training
    key = (network, spec.scale)
    ref_framework, ref_weights = _UPDATED.get(key, (None, None))
    try:
        record, after = check_training(framework, spec, weights, batch, mode, ref_weights,
                                       ref_framework)
    except Unsupported as e:
        pytest.skip(str(e))
    if key not in _UPDATED:
        _UPDATED.clear()  # one network at a time: full-size weights are large
        _UPDATED[key] = (framework, after)
    _record(benchmark, record)
    assert record["verified"], (f"{framework} {network}: {record['worst_tensor']} differs by "
                                f"{record['max_rel_err']:.2e} from {record['reference']} "
                                f"(tolerance {record['tolerance']})")
