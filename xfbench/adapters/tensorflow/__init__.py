"""The TensorFlow adapter. tensorflow is imported only when a method needs it."""

from __future__ import annotations

import os

from xfbench.adapters.base import PRECISIONS, Adapter
from xfbench.adapters.tensorflow import tpu


def _startup_settings() -> None:
    """Settings TensorFlow reads once, when it starts; a value the user set is kept, and
    records say what ran (workload.onednn_in_use asks TensorFlow).

    oneDNN on: TensorFlow enables its oneDNN CPU kernels by itself only on some Intel
    CPUs and runs Eigen's elsewhere (on an AMD EPYC, 1.7-2.5x slower, docs/frameworks.md).
    On, every machine runs the same backend, TensorFlow's fastest on the CPU;
    TF_ENABLE_ONEDNN_OPTS=0 measures Eigen."""
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")
    # TensorFlow's C++ start-up notices (oneDNN, CPU features) are noise in a benchmark log.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")


# Here, before any module of this package runs `import tensorflow`.
_startup_settings()


def import_tensorflow():
    """tensorflow, started with xfbench's settings (for code outside this package)."""
    import tensorflow as tf

    return tf


class TensorFlowAdapter(Adapter):
    name = "tensorflow"
    precisions = tuple(p for p in PRECISIONS if p != "int8")
    int8_reason = (
        "has no documented int8 CPU inference path for these models: its int8 is TensorFlow "
        "Lite's converter and interpreter, another runtime, which this suite does not measure"
    )

    layers_reason = (
        "is not profiled per layer: its profiler (tf.profiler.experimental) writes XPlane "
        "traces that only TensorBoard's profile plugin, not a dependency of xfbench, turns "
        "into per-operation times, and in function and xla modes Grappler and XLA fuse "
        "operations across the layers"
    )

    def versions(self):
        tf = import_tensorflow()
        import keras

        info = tf.sysconfig.get_build_info()
        out = {"tensorflow": tf.__version__, "keras": keras.__version__}
        if info.get("is_cuda_build"):
            out["cuda"] = str(info.get("cuda_version"))
            out["cudnn"] = str(info.get("cudnn_version"))
        return out

    def devices(self):
        tf = import_tensorflow()
        gpus = tf.config.list_physical_devices("GPU")
        # TensorFlow lists TPUs only once it has started the TPU system. Where a TPU can
        # be (chips under /dev/accel*, or TPU_NAME set) it is started here, once per
        # process, even when only CPU cells run: devices() must say what is here.
        # Elsewhere TensorFlow is not asked: no resolver starts, nothing waits.
        tpus = tpu.core_count(tf)
        return ["cpu"] + [f"cuda:{i}" for i in range(len(gpus))] + [f"tpu:{i}" for i in range(tpus)]

    def mode_reason(self, mode, device):
        if device.startswith("tpu") and mode != tpu.MODE:
            return (
                f"on a TPU, TPUStrategy compiles every step with XLA: TensorFlow's TPU "
                f"cells run in mode {tpu.MODE}"
            )
        return None

    def precision_reason(self, mode, precision, device):
        if device.startswith("tpu") and precision not in tpu.PRECISIONS:
            return (
                f"TPU cells run {' and '.join(tpu.PRECISIONS)}: bf16 is the TPU's half "
                f"type, and {precision} has no fast path there"
            )
        return None

    def check(self, cell):
        reason = super().check(cell)
        # An absent TPU: add where TensorFlow looked for one, or why it would not start.
        absent = reason and reason.startswith(f"{cell.device} is not present")
        if absent and cell.device.startswith("tpu") and tpu.failure():
            return f"{reason}; {tpu.failure()}"
        return reason

    def attention_scores_kept(self, cell):
        # attention written out: the softmax's output stays for its backward pass
        return 1

    def configure_threads(self, threads):
        """Intra-op = threads, inter-op = 1 (N threads means N busy threads, all inside
        operators). TensorFlow fixes both when its runtime starts: later calls fail."""
        tf = import_tensorflow()
        threading = tf.config.threading
        try:
            threading.set_intra_op_parallelism_threads(threads)
            threading.set_inter_op_parallelism_threads(1)
            # Without memory growth TensorFlow takes every GPU's memory when it starts,
            # starving whatever else runs in the process (another framework's cells).
            for gpu in tf.config.list_physical_devices("GPU"):
                tf.config.experimental.set_memory_growth(gpu, True)
        except RuntimeError as e:
            if (
                threading.get_intra_op_parallelism_threads(),
                threading.get_inter_op_parallelism_threads(),
            ) != (threads, 1):
                raise RuntimeError(
                    f"TensorFlow's thread pools already started in this process with "
                    f"intra_op={threading.get_intra_op_parallelism_threads()}, "
                    f"inter_op={threading.get_inter_op_parallelism_threads()} (0 = all "
                    f"cores); configure_threads({threads}) must run before its first "
                    f"operation"
                ) from e
        return {
            "intra_op": threading.get_intra_op_parallelism_threads(),
            "inter_op": threading.get_inter_op_parallelism_threads(),
            "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
            "gpu_memory_growth": [
                tf.config.experimental.get_memory_growth(g)
                for g in tf.config.list_physical_devices("GPU")
            ],
        }

    def build(self, spec, cell, weights):
        import_tensorflow()
        if cell.device.startswith("tpu"):
            from xfbench.adapters.tensorflow.tpu_workload import TpuWorkload

            return TpuWorkload(spec, cell, weights)
        from xfbench.adapters.tensorflow.workload import TensorFlowWorkload

        return TensorFlowWorkload(spec, cell, weights)

    def generator(self, spec, cell, weights):
        import_tensorflow()
        from xfbench.adapters.tensorflow.generation import TensorFlowGenerator

        return TensorFlowGenerator(spec, cell, weights)


ADAPTER = TensorFlowAdapter()
