"""What only a GPU can show: cells on cuda:0 compute in the dtype their precision names
(the LSTM's cuDNN path included), autotune convolutions, compile, keep their own peak
memory, and are described by NVML as the GPU the framework used.

Every test is marked gpu: skipped with the reason where NVML sees no NVIDIA GPU (CI), and
each skips where its framework cannot use the GPU (a CPU build). The GPU acceptance run
(docs/gpus.md) runs them with `pytest -m gpu`.
"""

from __future__ import annotations

import numpy as np
import pytest

from xfbench import machine
from xfbench.adapters.base import Cell
from xfbench.models import get_spec, initial_weights

pytestmark = pytest.mark.gpu

DEVICE = "cuda:0"


def torch_cuda():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip(f"torch {torch.__version__} sees no CUDA device")
    return torch


def jax_cuda():
    jax = pytest.importorskip("jax")
    try:
        jax.devices("cuda")
    except RuntimeError as e:
        pytest.skip(f"JAX sees no CUDA device: {e}")
    return jax


def cell(network, framework, mode, precision, task="train", batch=8):
    return Cell(
        network=network,
        framework=framework,
        mode=mode,
        precision=precision,
        device=DEVICE,
        threads=1,
        batch_size=batch,
        task=task,
        scale="smoke",
    )


def torch_workload(network, precision, mode="eager", task="train", batch=8):
    torch_cuda()
    from xfbench.adapters.torch.workload import TorchWorkload

    spec = get_spec(network, "smoke")
    c = cell(
        network=network, framework="torch", mode=mode, precision=precision, task=task, batch=batch
    )
    return TorchWorkload(spec, c, initial_weights(spec, 0))


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
@pytest.mark.parametrize("network", ["resnet56", "lstm32"])
def test_torch_half_precision_cells_compute_in_their_type_on_cuda(network, precision):
    """A bf16 LSTM under autocast would run cuDNN in fp16; the cell must say bf16 and mean
    it, and fp16 training scales its loss."""
    work = torch_workload(network, precision)
    want = {"bf16": "bfloat16", "fp16": "float16"}[precision]
    kinds = ("Conv2d", "Linear") if network == "resnet56" else ("LSTM", "Linear")
    assert {work.info["layer_dtypes"][k] for k in kinds} == {want}, work.info["layer_dtypes"]
    assert work.info["loss_scale"].startswith("dynamic" if precision == "fp16" else "none")
    if network == "lstm32":
        print("lstm_kernel:", work.info["lstm_kernel"])  # cuDNN's or ATen's, as it ran
    for _ in range(3):
        work.step()
    assert np.isfinite(work.loss())


def test_torch_fp32_is_ieee_and_tf32_is_not_on_cuda():
    torch = torch_cuda()
    from xfbench.adapters.torch.workload import set_fp32_precision

    g = torch.Generator(device=DEVICE).manual_seed(0)
    a = torch.randn(2048, 2048, device=DEVICE, generator=g)
    b = torch.randn(2048, 2048, device=DEVICE, generator=g)
    exact = a.double() @ b.double()

    def error():
        return float(((a @ b).double() - exact).norm() / exact.norm())

    set_fp32_precision("fp32")
    assert error() < 1e-5
    set_fp32_precision("tf32")
    tf32 = error()
    set_fp32_precision("fp32")
    print(f"TF32 matmul error {tf32:.1e}")  # reported, not asserted: the GPU decides
    assert error() < 1e-5


def test_torch_convolution_cells_autotune_with_cudnn():
    work = torch_workload("resnet56", "fp32")
    assert work.info["cudnn_benchmark"] is True
    assert "cuDNN" in work.info["backend"]


@pytest.mark.parametrize("mode", ["compile", "cudagraph"])
def test_torch_compiled_cells_compile_on_cuda(mode):
    work = torch_workload("fcn_r", "fp32", mode=mode)
    work.step()
    facts = work.compile_facts()  # raises where it fell back to eager
    assert facts["compiled_graphs"] >= work.compiled_functions


def test_nvml_describes_the_gpu_torch_runs_on():
    torch = torch_cuda()
    assert machine.gpu_name(DEVICE) == torch.cuda.get_device_name(0)
    assert machine.gpu_count() == torch.cuda.device_count()
    from xfbench.adapters.torch import ADAPTER

    versions = ADAPTER.versions()
    assert versions["cuda"] and versions["cudnn"] and versions["nccl"]


def test_jax_peak_memory_is_each_cells_own():
    """A small cell after a large one reports its own peak, not the process's."""
    jax_cuda()
    from xfbench.adapters.jax.workload import JaxWorkload

    peaks = []
    for network, batch in (("alexnet", 64), ("fcn_r", 8)):
        spec = get_spec(network, "smoke")
        work = JaxWorkload(
            spec, cell(network, "jax", "jit", "fp32", batch=batch), initial_weights(spec, 0)
        )
        work.step()
        peaks.append(work.peak_device_memory())
        work.close()
    assert peaks[0] and peaks[1] and peaks[1] < peaks[0], peaks


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_jax_half_precision_cells_compute_in_their_type_on_cuda(precision):
    jax_cuda()
    from xfbench.adapters.jax.workload import JaxWorkload

    spec = get_spec("lstm32", "smoke")
    work = JaxWorkload(spec, cell("lstm32", "jax", "jit", precision), initial_weights(spec, 0))
    work.step()
    want = {"bf16": "bfloat16", "fp16": "float16"}[precision]
    assert set(work.info["layer_dtypes"].values()) == {want}
    assert work.info["loss_scale"] != "none" or precision == "bf16"


def test_tensorflow_grows_gpu_memory_instead_of_taking_it_all():
    tf = pytest.importorskip("tensorflow")
    if not tf.config.list_physical_devices("GPU"):
        pytest.skip("TensorFlow sees no GPU (a CPU build)")
    from xfbench.adapters.tensorflow import ADAPTER

    assert all(ADAPTER.configure_threads(1)["gpu_memory_growth"])


def test_onnxruntime_cuda_cells_run_on_the_cuda_provider():
    ort = pytest.importorskip("onnxruntime")
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        pytest.skip(f"onnxruntime {ort.__version__} has no CUDA provider (a CPU build)")
    pytest.importorskip("onnx", reason="the network is built as ONNX here (onnx absent)")
    from xfbench.adapters.onnxruntime import ADAPTER

    spec = get_spec("fcn_r", "smoke")
    work = ADAPTER.build(
        spec,
        cell(network="fcn_r", framework="onnxruntime", mode="cuda", precision="fp32", task="infer"),
        initial_weights(spec, 0),
    )
    work.step()
    assert work.info["execution_provider"] == "CUDAExecutionProvider", work.info


def _decoders(framework: str, modes: tuple[str, ...], precision: str = "fp32"):
    """GPT-2 smoke decoders of a framework on cuda:0, one per mode, and a prompt."""
    from types import SimpleNamespace

    from xfbench.adapters import get_adapter
    from xfbench.generation.check import decoding_weights
    from xfbench.generation.measure import prompt_ids

    spec = get_spec("gpt2", "smoke")
    weights = decoding_weights(spec, precision)

    def one(mode):
        c = SimpleNamespace(
            framework=framework, mode=mode, device=DEVICE, precision=precision, threads=1,
            batch_size=2, prompt_tokens=16, new_tokens=16,
        )  # fmt: skip
        return get_adapter(framework).generator(spec, c, weights)

    return [one(m) for m in modes], prompt_ids(spec, 2, 16)


def test_torch_compiled_cudagraph_decoding_replays_its_graphs_and_eagers_tokens():
    """(Compiled: the checks part runs it.) The cudagraph decode step, its cache a static address, replays graphs (the proof a
    cell runs after its rounds) and decodes eager's tokens, the host out of the loop."""
    torch_cuda()
    from xfbench.generation.metrics import generate

    (eager, graphed), prompt = _decoders("torch", ("eager", "cudagraph"))
    want = generate(eager, prompt, 16).tokens
    for _ in range(3):  # warm-up, recording, replay
        got = generate(graphed, prompt, 16)
    facts = graphed.replay_facts(lambda: generate(graphed, prompt, 16))
    assert facts["cudagraph_replays"] >= 15 and np.array_equal(got.tokens, want)
    profiled = graphed.decode_profile(want[:, -1])
    assert profiled["kernels_per_decode_step"] > 0 < profiled["decode_step_kernel_us"]
    assert graphed.peak_device_memory() > graphed.cache_bytes


def test_jax_loop_mode_decodes_jits_tokens_on_cuda():
    jax_cuda()
    from xfbench.generation.metrics import generate

    (jit, loop), prompt = _decoders("jax", ("jit", "loop"))
    assert np.array_equal(generate(loop, prompt, 16).tokens, generate(jit, prompt, 16).tokens)
    assert loop.compile_facts()["compilations"]["loop"] == 1
    assert loop.peak_device_memory() > loop.cache_bytes


@pytest.mark.parametrize(("framework", "mode"), [("torch", "eager"), ("jax", "loop")])
def test_bf16_decoding_holds_bfloat16_within_the_bf16_rule_on_cuda(framework, mode):
    """A bf16 generation cell on the GPU: bfloat16 weights and cache, its logits within
    the bf16 bound of the float64 function of the same rounded weights."""
    torch_cuda() if framework == "torch" else jax_cuda()
    from xfbench.generation import check
    from xfbench.generation.metrics import generate

    (decoder,), prompt = _decoders(framework, (mode,), "bf16")
    run = generate(decoder, prompt, 16, keep_logits=[0, 1])
    assert decoder.info["weights_dtype"] == decoder.info["cache_dtype"] == "bfloat16"
    spec = get_spec("gpt2", "smoke")
    result = check.check_generation(
        spec, check.decoding_weights(spec, "bf16"), prompt, tokens=run.tokens,
        logits=run.logits, precision="bf16",
    )  # fmt: skip
    assert result["verified"], result
