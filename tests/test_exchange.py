"""The ONNX exchange: canonical files, reading them back, bad files, the harness's
--weights onnx, and the proof that a framework runs the canonical function."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

# The exchange writes and reads files with onnx; where it is absent (a GPU image) these
# tests skip with that reason, and tests/test_without_onnx.py covers running the files.
onnx = pytest.importorskip("onnx")

from xfbench.exchange import (  # noqa: E402
    IR_VERSION,
    OPSET,
    ExchangeError,
    canonical_file,
    canonical_path,
    read_weights,
    write_canonical,
)
from xfbench.exchange.reference import TOL, rel_err  # noqa: E402
from xfbench.harness.equivalence import check_inference, framework_export  # noqa: E402
from xfbench.harness.measure import initial  # noqa: E402
from xfbench.models import NETWORKS, get_spec, initial_weights  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XFBENCH_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def cli(*args, cwd=ROOT):
    proc = subprocess.run(
        [sys.executable, "-m", "xfbench.exchange", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return proc.returncode, proc.stdout, proc.stderr


@pytest.mark.parametrize("network", list(NETWORKS))
def test_canonical_file_holds_the_seeds_weights(network):
    spec = get_spec(network, "smoke")
    path = canonical_file(spec, seed=3)
    weights, expected = read_weights(path, spec), initial_weights(spec, 3)
    assert list(weights) == list(expected)
    for name, value in expected.items():
        np.testing.assert_array_equal(weights[name], value, err_msg=name)


def test_file_is_deterministic_pinned_and_keeps_weights_outside(tmp_path):
    spec = get_spec("resnet56", "smoke")
    a, b = (
        write_canonical(spec, 0, tmp_path / "a" / "m.onnx"),
        write_canonical(spec, 0, tmp_path / "b" / "m.onnx"),
    )
    for suffix in ("", ".data"):
        assert Path(f"{a}{suffix}").read_bytes() == Path(f"{b}{suffix}").read_bytes()
    model = onnx.load(str(a), load_external_data=False)
    assert model.ir_version == IR_VERSION == 10
    assert [(o.domain, o.version) for o in model.opset_import] == [("", OPSET)] == [("", 21)]
    onnx.checker.check_model(str(a), full_check=True)
    # the weights are in the .data file beside the graph, not in it
    assert Path(f"{a}.data").stat().st_size >= 4 * spec.param_count
    assert a.stat().st_size < 4 * spec.param_count / 4
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["m.onnx", "m.onnx.data"]


def test_cache_name_changes_with_the_geometry():
    assert canonical_path(get_spec("resnet56", "smoke")) != canonical_path(get_spec("resnet56"))
    assert canonical_path(get_spec("lstm32")) != canonical_path(get_spec("lstm64"))


def test_harness_weights_are_identical_from_seed_and_from_onnx(cache):
    spec = get_spec("lstm32", "smoke")
    from_seed, from_onnx = initial(spec, 0, "seed"), initial(spec, 0, "onnx")
    assert canonical_path(spec).exists()  # --weights onnx wrote the file to the cache
    assert from_seed.keys() == from_onnx.keys()
    for name in from_seed:
        np.testing.assert_array_equal(from_seed[name], from_onnx[name])


# -- bad files: one clear line, nothing written ------------------------------------------


@pytest.fixture
def good(tmp_path):
    spec = get_spec("alexnet_r", "smoke")
    return spec, write_canonical(spec, 0, tmp_path / "files" / "m.onnx")


def _one_line_error(path, spec, match):
    with pytest.raises(ExchangeError, match=match) as e:
        read_weights(path, spec)
    assert "\n" not in str(e.value)


def test_truncated_model_file(good):
    spec, path = good
    path.write_bytes(path.read_bytes()[:200])
    _one_line_error(path, spec, "truncated or corrupt")


def test_corrupt_model_file(good):
    spec, path = good
    path.write_bytes(b"\xff" * 64 + path.read_bytes()[64:])
    _one_line_error(path, spec, "truncated or corrupt")


def test_truncated_data_file(good):
    spec, path = good
    data = Path(f"{path}.data")
    data.write_bytes(data.read_bytes()[:1000])
    _one_line_error(path, spec, "too short")


def test_shapes_that_do_not_match_the_spec(good):
    _, path = good
    bigger = get_spec("alexnet_r", "full")
    _one_line_error(
        path,
        bigger,
        r"conv1.weight has shape \(8, 3, 5, 5\), the spec says "
        r"\(32, 3, 5, 5\)",
    )
    _one_line_error(path, get_spec("resnet56", "smoke"), "not a resnet56 .* missing")


@pytest.mark.parametrize("location", ["../outside.data", "/etc/passwd", "sub/../../x.data", "."])
def test_external_data_outside_its_folder_is_refused(good, location):
    spec, path = good
    model = onnx.load(str(path), load_external_data=False)
    for tensor in model.graph.initializer:
        for entry in tensor.external_data:
            if entry.key == "location":
                entry.value = location
    onnx.save_model(model, str(path))
    (path.parent.parent / "outside.data").write_bytes(Path(f"{path}.data").read_bytes())
    _one_line_error(path, spec, "outside the model's own folder")


def test_cli_bad_file_is_one_line_and_writes_nothing(good, tmp_path):
    spec, path = good
    path.write_bytes(path.read_bytes()[:100])
    before = sorted(p.name for p in tmp_path.rglob("*"))
    out = tmp_path / "exported" / "x.onnx"
    for args in (
        ["check", path, "--model", "alexnet_r", "--scale", "smoke"],
        [
            "export",
            "--framework",
            "torch",
            "--model",
            "alexnet_r",
            "--scale",
            "smoke",
            "--weights",
            path,
            "--out",
            out,
        ],
    ):
        code, stdout, stderr = cli(*args)
        assert code == 2, stderr
        assert stderr.count("\n") == 1 and "truncated or corrupt" in stderr
        assert "Traceback" not in stderr
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


# -- the same function ---------------------------------------------------------------------


def test_altered_torch_geometry_is_caught(monkeypatch):
    """A wrong option-A shortcut padding, or a channels-last flatten, in the PyTorch
    adapter makes its logits differ from ONNX Runtime's: the check fails."""
    import torch
    from torch import nn

    from xfbench.adapters.torch import resnet

    spec = get_spec("resnet56", "smoke")
    weights = initial_weights(spec)
    assert check_inference("torch", spec, weights, 4)["verified"]
    original = resnet.BasicBlock.__init__

    def shifted_pad(self, cin, cout, stride):
        original(self, cin, cout, stride)
        extra = cout - cin
        self.pad = (0, extra)  # all new channels after the old ones, not split evenly

    monkeypatch.setattr(resnet.BasicBlock, "__init__", shifted_pad)
    record = check_inference("torch", spec, weights, 4)
    assert not record["verified"] and record["max_rel_err"] > 100 * TOL
    monkeypatch.undo()

    spec = get_spec("alexnet", "smoke")  # a 2x2 last map, so the flatten order matters
    weights = initial_weights(spec)
    assert check_inference("torch", spec, weights, 2)["verified"]
    monkeypatch.setattr(
        nn.Flatten,
        "forward",
        lambda self, x: (
            torch.flatten(x.permute(0, 2, 3, 1), 1) if x.ndim == 4 else torch.flatten(x, 1)
        ),
    )
    record = check_inference("torch", spec, weights, 2)
    assert not record["verified"] and record["max_rel_err"] > 100 * TOL


@pytest.mark.parametrize("framework", ["torch", "tensorflow", "jax"])
@pytest.mark.parametrize("network", ["alexnet_r", "lstm64", "bert_base", "gpt2"])
@pytest.mark.slow
def test_export_reproduces_the_framework_in_onnxruntime(framework, network, tmp_path):
    from xfbench.adapters import get_adapter

    if get_adapter(framework).import_error():
        pytest.skip(get_adapter(framework).import_error())
    spec = get_spec(network, "smoke")
    err = framework_export(
        framework=framework,
        spec=spec,
        weights=initial_weights(spec),
        batch=4,
        path=tmp_path / "t.onnx",
    )
    assert err <= TOL
    assert (tmp_path / "t.onnx").exists()


def test_rel_err_is_scaled_by_the_reference():
    ref = np.array([1.0, -4.0, 0.0])
    assert rel_err(ref, ref) == 0.0
    assert rel_err(ref + [0, 0, 4e-4], ref) == pytest.approx(1e-4)
    assert rel_err(np.zeros(2), np.zeros(2)) == 0.0
    assert rel_err(np.ones(3), np.ones(2)) == float("inf")


@pytest.mark.parametrize("network", ["resnet56", "lstm32"])  # with BatchNorm, and without
def test_a_different_update_is_caught(network):
    """Against a float64 reference step with twice the learning rate, the adapter's
    step fails the training check; against the right one it passes."""
    from dataclasses import replace

    from xfbench.harness.equivalence import ReferenceStep, check_training

    spec = get_spec(network, "smoke")
    weights = initial_weights(spec)
    right = ReferenceStep.compute(spec, weights, 4)
    assert check_training(
        framework="torch", spec=spec, weights=weights, batch=4, mode=None, reference=right
    )[0]["verified"]
    doubled = ReferenceStep.compute(replace(spec, lr=2 * spec.lr), weights, 4)
    record, _ = check_training(
        framework="torch", spec=spec, weights=weights, batch=4, mode=None, reference=doubled
    )
    assert not record["verified"]
    assert record["weights_rel_err"] > 3 * record["weights_tolerance"]


def test_float64_catches_a_change_fp32_cannot_see():
    """A learning rate 1e-6 off moves the update by 1e-6 of itself: below what the fp32
    check resolves (its weights agree to round-off), far above the float64 check's 1e-10."""
    from dataclasses import replace

    from xfbench.harness.equivalence import (
        FP64_TOL,
        Float64Reference,
        ReferenceStep,
        check_float64,
        check_training,
    )

    spec = get_spec("fcn_r", "smoke")
    weights = initial_weights(spec)
    off = replace(spec, lr=spec.lr * (1 + 1e-6))
    assert check_training(
        framework="torch",
        spec=spec,
        weights=weights,
        batch=4,
        mode=None,
        reference=ReferenceStep.compute(off, weights, 4),
    )[0]["verified"]
    right = check_float64(
        framework="torch",
        spec=spec,
        weights=weights,
        batch=4,
        mode=None,
        reference=Float64Reference.compute(spec, weights, 4),
    )
    assert right["verified"] and right["update_rel_err"] <= FP64_TOL
    wrong = check_float64(
        framework="torch",
        spec=spec,
        weights=weights,
        batch=4,
        mode=None,
        reference=Float64Reference.compute(off, weights, 4),
    )
    assert not wrong["verified"]
    assert wrong["update_rel_err"] == pytest.approx(1e-6, rel=1e-2)
    assert wrong["logits_rel_err"] <= FP64_TOL  # the forward is the same function


def test_fp64_is_refused_off_the_cpu():
    from xfbench.adapters import Cell, get_adapter

    for framework in ("torch", "tensorflow", "jax"):
        cell = Cell(
            network="fcn5",
            framework=framework,
            mode=get_adapter(framework).modes[0],
            precision="fp64",
            device="cuda:0",
            threads=1,
            batch_size=8,
        )
        assert "CPU only" in get_adapter(framework).check(cell)


def test_equivalence_modes_and_seeds():
    from xfbench.harness.equivalence import check_modes, parse_seeds

    assert check_modes("tensorflow") == ["eager", "function", "xla"]
    assert check_modes("torch") == ["eager"]  # compile only when named: slow to compile
    assert check_modes("torch", ["compile", "xla"]) == ["compile"]
    assert check_modes("jax", ["eager"]) == []
    assert parse_seeds("0-9") == list(range(10))
    assert parse_seeds("3, 0-1,3") == [3, 0, 1]
    for bad in ("a", "5-2", "-1"):
        with pytest.raises(ValueError):
            parse_seeds(bad)


def test_weights_tolerance_follows_the_fp32_floor():
    """The tolerance is TOL where fp32 reaches the float64 step easily, and
    FLOOR_FACTOR times the plain fp32 step's distance where it does not."""
    from xfbench.harness.equivalence import FLOOR_FACTOR, ReferenceStep

    spec = get_spec("fcn_r", "smoke")
    ref = ReferenceStep.compute(spec, initial_weights(spec), 4)
    assert 0 < ref.fp32_floor < TOL / FLOOR_FACTOR and ref.tolerance == TOL
    assert all(w.dtype == np.float64 for w in ref.weights.values())


def test_reference_step_records_and_flips_relu_and_maxpool_decisions():
    """The float64 step records each ReLU and max-pool call's decisions with their margin
    from the tie, and takes the marked ones the other way (harness.equivalence's near ties)."""
    import torch

    from xfbench.adapters.torch.reference import _window_top2, train_step

    z = torch.randn(2, 3, 9, 9, dtype=torch.float64)
    pool = torch.nn.MaxPool2d(3, 2, 1)
    first, second = _window_top2(pool, z)
    assert torch.equal(first, pool(z)) and bool((second <= first).all())

    spec = get_spec("alexnet", "smoke")
    weights = initial_weights(spec)
    calls = []
    loss, _ = train_step(spec, weights, 4, "float64", decisions=calls)
    kinds = [c.kind for c in calls]
    assert "relu" in kinds and "maxpool" in kinds
    for c in calls:
        if c.kind == "relu":
            assert c.margin is c.inputs
        else:
            assert (c.margin >= 0).all() and c.margin.shape[:2] == c.inputs.shape[:2]
    none = [np.zeros(c.margin.shape, bool) for c in calls]
    assert train_step(spec, weights, 4, "float64", flips=none)[0] == loss
    for kind in ("relu", "maxpool"):  # one decision taken the other way changes the step
        k = kinds.index(kind)
        flips = [None] * len(calls)
        flips[k] = np.zeros(calls[k].margin.shape, bool)
        flips[k].flat[np.argmax(calls[k].margin)] = True  # the clearest decision
        assert train_step(spec, weights, 4, "float64", flips=flips)[0] != loss, kind
