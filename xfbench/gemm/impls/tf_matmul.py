"""tf.linalg.matmul, eager, on the CPU and NVIDIA GPUs.

TensorFlow turns TF32 on by default; fp32 cells turn it off with
tf.config.experimental.enable_tensor_float_32_execution(False), tf32 cells on.
Thread pools (intra-op = the process's threads, inter-op = 1) and GPU memory
growth (TensorFlow otherwise takes a whole GPU when it starts) must be set before
the runtime starts, so configure_threads does both. The timer is the wall clock
around a batch of calls, stopped after tf.test.experimental.sync_devices().
"""

from __future__ import annotations

import numpy as np

from xfbench.gemm.impls.base import GemmImpl, WallTimer, gpu_index


def _tf():
    from xfbench.adapters.tensorflow import import_tensorflow

    return import_tensorflow()


class TfMatmul(GemmImpl):
    name = "tensorflow"
    package = "tensorflow"
    call = "tf.linalg.matmul"

    def versions(self):
        tf = _tf()
        out = {"tensorflow": tf.__version__}
        build = tf.sysconfig.get_build_info()
        for key in ("cuda_version", "cudnn_version"):
            if build.get(key):
                out[key.split("_")[0]] = str(build[key])
        return out

    def devices(self):
        tf = _tf()
        return ["cpu"] + [f"cuda:{i}" for i in range(len(tf.config.list_physical_devices("GPU")))]

    def configure_threads(self, threads):
        tf = _tf()
        try:
            tf.config.threading.set_intra_op_parallelism_threads(threads)
            tf.config.threading.set_inter_op_parallelism_threads(1)
            for gpu in tf.config.list_physical_devices("GPU"):
                tf.config.experimental.set_memory_growth(gpu, True)
        except RuntimeError:
            pass  # the runtime already started in this process; what holds is reported below
        return {
            "intra_op": tf.config.threading.get_intra_op_parallelism_threads(),
            "inter_op": tf.config.threading.get_inter_op_parallelism_threads(),
        }

    def _name(self, device):
        return "/CPU:0" if device == "cpu" else f"/GPU:{gpu_index(device)}"

    def device_name(self, device):
        if device == "cpu":
            return "cpu"
        tf = _tf()
        gpu = tf.config.list_physical_devices("GPU")[gpu_index(device)]
        return tf.config.experimental.get_device_details(gpu).get("device_name", "unknown")

    def prepare(self, dtype, device):
        tf = _tf()
        self.device = self._name(device)
        tf.config.experimental.enable_tensor_float_32_execution(dtype == "tf32")
        return {
            "tf32_mode": "enable_tensor_float_32_execution="
            f"{tf.config.experimental.tensor_float_32_execution_enabled()}"
        }

    def load(self, x, role, dtype, device):
        tf = _tf()
        storage = {"fp32": tf.float32, "tf32": tf.float32, "bf16": tf.bfloat16, "fp16": tf.float16}[
            dtype
        ]
        with tf.device(self.device):
            return tf.identity(tf.cast(tf.constant(np.ascontiguousarray(x)), storage))

    def matmul(self, a, b):
        tf = _tf()
        with tf.device(self.device):
            return tf.linalg.matmul(a, b)

    def fetch(self, c, rows, cols):
        tf = _tf()
        block = tf.gather(tf.gather(c, rows, axis=0), cols, axis=1)
        return tf.cast(block, tf.float64).numpy()

    def placed_on(self, c):
        name = c.device.upper()
        if "GPU:" in name:
            return f"cuda:{int(name.rsplit('GPU:', 1)[1])}"
        return "cpu" if "CPU:" in name else name

    def timer(self, device):
        tf = _tf()
        if device == "cpu":
            return WallTimer()  # eager CPU ops return when done
        return WallTimer(lambda last: tf.test.experimental.sync_devices())


IMPL = TfMatmul()
