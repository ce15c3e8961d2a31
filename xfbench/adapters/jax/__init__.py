"""The JAX adapter. jax is imported only when a method needs it.

The networks are pure functions of plain parameter dicts keyed by the canonical
names (networks.py, resnet.py, lstm.py); the training step is jitted once with
its state donated (workload.py); weights.py converts layouts to and from the
canonical ONNX ones.
"""

from __future__ import annotations

import os

from xfbench.adapters.base import PRECISIONS, Adapter

# Backends a harness device name maps to, in the order devices() lists them.
ACCELERATORS = (("cuda", "cuda"), ("tpu", "tpu"))
# XLA's flag that splits the CPU into N host devices (data-parallel workers and all-reduce
# ranks on one CPU); set before jax is imported.
HOST_DEVICES_FLAG = "--xla_force_host_platform_device_count"


def host_devices_env(count: int, env: dict) -> dict:
    """env with XLA_FLAGS asking for count host devices (replacing an earlier count)."""
    flags = [f for f in env.get("XLA_FLAGS", "").split() if not f.startswith(HOST_DEVICES_FLAG)]
    return {**env, "XLA_FLAGS": " ".join(flags + [f"{HOST_DEVICES_FLAG}={count}"])}


class JaxAdapter(Adapter):
    name = "jax"
    precisions = tuple(p for p in PRECISIONS if p != "int8")
    int8_reason = (
        "has no documented int8 inference path for the CPU: its quantization libraries "
        "(AQT, Qwix) target TPUs and GPUs, and a hand-quantized network would not be JAX's own"
    )

    layers_reason = (
        "is not profiled per layer: jit compiles the whole step into one XLA program whose "
        "fusions cross the layers' boundaries, so a layer has no time of its own; "
        "jax.profiler.trace names each fusion's operations by named scope, in a trace for "
        "TensorBoard's or Perfetto's viewer that xfbench does not read"
    )

    def versions(self):
        import jax
        import jaxlib

        out = {"jax": jax.__version__, "jaxlib": jaxlib.__version__}
        for backend, _ in ACCELERATORS:
            try:
                out[f"{backend}_platform"] = jax.devices(backend)[0].client.platform_version
            except RuntimeError:
                pass  # backend not present
        return out

    def devices(self):
        import jax

        out = ["cpu"]
        for backend, harness_name in ACCELERATORS:
            try:
                out += [f"{harness_name}:{i}" for i in range(len(jax.devices(backend)))]
            except RuntimeError:
                pass  # no such backend here
        return out

    def attention_scores_kept(self, cell):
        # cuDNN's fused attention (a GPU, the half types) keeps none; XLA's implementation,
        # and the written-out one, keep the probabilities for the backward pass
        fused = cell.device.startswith("cuda") and cell.precision in ("bf16", "fp16")
        return 0 if fused else 1

    def configure_threads(self, threads):
        # Other frameworks may share this process and its GPU: take device memory as
        # needed instead of XLA's default of 75 % up front. Read when the GPU backend starts.
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
        import jax

        # XLA's CPU client has no thread-count option here: its pools are sized from the
        # CPU affinity (and NPROC), which harness.threads.pin set before jax was imported.
        cpus = len(os.sched_getaffinity(0))
        jax.devices("cpu")  # start the CPU client now, under that affinity
        return {
            "xla_cpu_threads_from": "cpu affinity",
            "cpus_allowed": cpus,
            "NPROC": os.environ.get("NPROC"),
            "matches_request": cpus == threads,
        }

    def build(self, spec, cell, weights):
        from xfbench.adapters.jax.workload import JaxWorkload

        return JaxWorkload(spec, cell, weights)

    makes_weights = True

    def generator(self, spec, cell, weights):
        from xfbench.adapters.jax.generation import JaxGenerator

        return JaxGenerator(spec, cell, weights)


ADAPTER = JaxAdapter()
