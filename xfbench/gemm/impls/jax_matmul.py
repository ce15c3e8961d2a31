"""jax.numpy.matmul under jax.jit, on the CPU, NVIDIA GPUs and TPUs.

fp32 asks for precision "highest" (JAX's default lets the GPU use TF32), tf32 for
"tensorfloat32". JAX preallocates 75 % of a GPU's memory when it starts, which
would starve every other implementation in the same process, so preallocation
is turned off unless the user has set XLA_PYTHON_CLIENT_PREALLOCATE. The timer is
the wall clock around a batch of asynchronously dispatched calls, stopped when
the last result is ready.
"""

from __future__ import annotations

import os

import numpy as np

from xfbench.gemm.impls.base import GemmImpl, WallTimer

PRECISION = {"fp32": "highest", "tf32": "tensorfloat32", "bf16": None, "fp16": None}


def _jax():
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    import jax

    return jax


def _platform_devices(platform: str) -> list:
    try:
        return _jax().devices(platform)
    except RuntimeError:  # no such backend here
        return []


class JaxMatmul(GemmImpl):
    name = "jax"
    package = "jax"
    call = "jax.jit(jax.numpy.matmul)"

    def versions(self):
        jax = _jax()
        import jaxlib

        return {"jax": jax.__version__, "jaxlib": jaxlib.__version__}

    def devices(self):
        return (
            ["cpu"]
            + [f"cuda:{i}" for i in range(len(_platform_devices("gpu")))]
            + [f"tpu:{i}" for i in range(len(_platform_devices("tpu")))]
        )

    def _device(self, device: str):
        if device == "cpu":
            return _platform_devices("cpu")[0]
        kind, index = device.split(":")
        return _platform_devices("gpu" if kind == "cuda" else kind)[int(index)]

    def configure_threads(self, threads):
        # XLA's CPU thread pool is sized from the CPU affinity (set by harness.threads.pin);
        # one thread also turns off Eigen's multithreading, which affinity alone leaves on.
        if threads == 1 and "xla_cpu_multi_thread_eigen" not in os.environ.get("XLA_FLAGS", ""):
            os.environ["XLA_FLAGS"] = (
                os.environ.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_"
                "eigen=false intra_op_parallelism_threads=1"
            ).strip()
        return {
            "cpus_allowed": len(os.sched_getaffinity(0)),
            "XLA_FLAGS": os.environ.get("XLA_FLAGS"),
        }

    def device_name(self, device):
        if device == "cpu":
            return "cpu"
        return self._device(device).device_kind

    def free_bytes(self, device):
        if device == "cpu":
            return None
        stats = self._device(device).memory_stats() or {}
        if "bytes_limit" in stats:
            return stats["bytes_limit"] - stats.get("bytes_in_use", 0)
        return None

    def prepare(self, dtype, device):
        jax = _jax()
        import jax.numpy as jnp

        self.dev = self._device(device)
        precision = PRECISION[dtype]
        self.fn = jax.jit(lambda a, b: jnp.matmul(a, b, precision=precision))
        return {"tf32_mode": f"precision={precision}" if precision else "n/a"}

    def load(self, x, role, dtype, device):
        jax = _jax()
        import jax.numpy as jnp

        storage = {
            "fp32": jnp.float32,
            "tf32": jnp.float32,
            "bf16": jnp.bfloat16,
            "fp16": jnp.float16,
        }[dtype]
        return jax.device_put(np.ascontiguousarray(x), self.dev).astype(storage)

    def matmul(self, a, b):
        return self.fn(a, b)

    def fetch(self, c, rows, cols):
        return np.asarray(c[rows][:, cols]).astype(np.float64)

    def placed_on(self, c):
        (dev,) = c.devices()
        if dev.platform == "cpu":
            return "cpu"
        kind = "cuda" if dev.platform == "gpu" else dev.platform
        return f"{kind}:{_platform_devices(dev.platform).index(dev)}"

    def timer(self, device):
        return WallTimer(lambda last: last.block_until_ready())

    def release(self):
        self.fn = None


IMPL = JaxMatmul()
