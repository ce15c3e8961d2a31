"""The ONNX Runtime adapter: the canonical graph in a session, providers checked,
training refused with its reason."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

# The reference logits come from the canonical graph, which onnx builds: where it is
# absent these skip with that reason (tests/test_without_onnx.py runs the cells there).
pytest.importorskip("onnx")

from xfbench.adapters import Cell, get_adapter  # noqa: E402
from xfbench.adapters.onnxruntime import HALF_REASON, TRAIN_REASON, TRT_FP32_REASON  # noqa: E402
from xfbench.exchange.reference import TOL, reference_logits, rel_err  # noqa: E402
from xfbench.models import NETWORKS, get_spec, initial_weights  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
ORT = get_adapter("onnxruntime")


def cell(
    network="resnet56",
    task="infer",
    mode="cpu",
    device="cpu",
    precision="fp32",
    data="resident",
    threads=1,
):
    return Cell(
        network=network,
        framework="onnxruntime",
        mode=mode,
        precision=precision,
        device=device,
        threads=threads,
        batch_size=4,
        task=task,
        data=data,
        scale="smoke",
    )


def test_adapter_module_does_not_import_onnxruntime():
    code = (
        "import sys, xfbench.adapters as adapters; adapters.get_adapter('onnxruntime'); "
        "print('onnxruntime' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.stdout.strip() == "False", out.stderr


@pytest.mark.parametrize("network", list(NETWORKS))
def test_session_computes_the_canonical_function(network):
    spec = get_spec(network, "smoke")
    weights = initial_weights(spec)
    work = ORT.build(spec, cell(network), weights)
    work.step()
    out = work.output()
    assert out.shape == (4,) + spec.output_shape
    assert rel_err(out, reference_logits(spec, weights, 4)) <= TOL
    assert work.info["execution_provider"] == "CPUExecutionProvider"
    assert work.info["graph_optimization_level"] == "ORT_ENABLE_ALL"
    work.close()


def test_copied_data_gives_the_same_logits():
    spec = get_spec("alexnet_r", "smoke")
    weights = initial_weights(spec)
    outs = []
    for data in ("resident", "copied"):
        work = ORT.build(spec, cell("alexnet_r", data=data), weights)
        work.step()
        work.step()
        outs.append(work.output())
    np.testing.assert_array_equal(*outs)


@pytest.mark.parametrize(
    "kwargs, reason",
    [
        (dict(task="train"), TRAIN_REASON),
        (dict(precision="bf16"), HALF_REASON),
        (dict(mode="tensorrt", device="cuda:0"), TRT_FP32_REASON),
        (dict(mode="cuda", device="cpu"), "runs only on a CUDA device"),
        (dict(mode="cpu", device="cuda:0"), "the cpu mode runs on the host"),
    ],
)
def test_cells_it_cannot_run_have_reasons(kwargs, reason):
    assert reason in ORT.check(cell(**kwargs))


def test_cuda_cell_without_the_cuda_provider_is_refused():
    import onnxruntime as ort

    if "CUDAExecutionProvider" in ort.get_available_providers():
        pytest.skip("this onnxruntime has the CUDA provider")
    assert "CUDAExecutionProvider is not in this onnxruntime build" in ORT.check(
        cell(mode="cuda", device="cuda:0")
    )


def test_a_session_that_falls_back_is_an_error():
    """Asked for CUDA where the session ends up on the CPU: an error, never a result."""
    import onnxruntime as ort

    if "CUDAExecutionProvider" in ort.get_available_providers():
        pytest.skip("this onnxruntime has the CUDA provider")
    from xfbench.adapters.onnxruntime.workload import OrtWorkload

    spec = get_spec("fcn_r", "smoke")
    with pytest.raises(RuntimeError, match="no silent fallback"):
        OrtWorkload(spec, cell("fcn_r", mode="cuda", device="cuda:0"), initial_weights(spec))


def test_suite_runs_inference_and_skips_training_with_the_reason(tmp_path):
    out = tmp_path / "out.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "xfbench/suites/test_infer.py",
            "xfbench/suites/test_train.py",
            "-q",
            "-rs",
            "-p",
            "no:cacheprovider",
            "--framework",
            "onnxruntime",
            "--model",
            "resnet56,lstm32",
            "--preset",
            "smoke",
            "--threads",
            "1",
            "--device",
            "cpu",
            "--weights",
            "onnx",
            f"--benchmark-json={out}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**__import__("os").environ, "XFBENCH_CACHE": str(tmp_path / "cache")},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("ONNX Runtime here runs inference only") >= 1
    assert "2 passed, 2 skipped" in proc.stdout
    for bench in json.loads(out.read_text())["benchmarks"]:
        info = bench["extra_info"]
        assert info["task"] == "infer" and info["status"] == "ok"
        assert info["execution_provider"] == "CPUExecutionProvider"
        assert info["intra_op_num_threads"] == 1
        assert info["weights_source"] == "onnx"
        assert "onnxruntime" in info["versions"]


@pytest.mark.skipif(
    __import__("platform").machine() not in ("x86_64", "AMD64"), reason="x86-64's choice"
)
def test_int8_quantizes_activations_to_uint8_and_weights_to_int8_on_x86():
    """U8S8 on x86-64, as ONNX Runtime's quantization guide advises there: its CPU provider
    fuses such a graph's convolutions (an S8S8 ResNet-50 had fused 33 of 53, at a third of
    the speed)."""
    import onnx

    from xfbench.adapters.onnxruntime.int8 import SETTINGS, quantize
    from xfbench.exchange.graph import build_graph

    spec = get_spec("resnet56", "smoke")
    model = build_graph(spec, initial_weights(spec, 0), "infer")[0].SerializeToString()
    graph = onnx.load_from_string(quantize(spec, model)).graph
    inits = {t.name: t for t in graph.initializer}
    zero_points = {}
    for node in graph.node:
        if node.op_type == "QuantizeLinear" and len(node.input) > 2:
            weight = node.input[0] in inits
            zero_points.setdefault(weight, set()).add(inits[node.input[2]].data_type)
    assert zero_points[False] == {onnx.TensorProto.UINT8}  # activations
    assert zero_points.get(True, {onnx.TensorProto.INT8}) == {onnx.TensorProto.INT8}
    dq_weights = {
        inits[n.input[0]].data_type
        for n in graph.node
        if n.op_type == "DequantizeLinear" and n.input[0] in inits
    }
    # the weights int8, the biases int32 (their scale the product of the two others)
    assert dq_weights == {onnx.TensorProto.INT8, onnx.TensorProto.INT32}
    assert SETTINGS["activations"].startswith("uint8")
