"""The TensorFlow adapter. tensorflow is imported only when a method needs it."""

from __future__ import annotations

import os

from xfbench.adapters.base import Adapter


def _tf():
    # TensorFlow's C++ start-up notices (oneDNN, CPU features) are noise in a benchmark log.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    import tensorflow as tf

    return tf


class TensorFlowAdapter(Adapter):
    name = "tensorflow"

    def versions(self):
        tf = _tf()
        import keras

        info = tf.sysconfig.get_build_info()
        out = {"tensorflow": tf.__version__, "keras": keras.__version__}
        if info.get("is_cuda_build"):
            out["cuda"] = str(info.get("cuda_version"))
            out["cudnn"] = str(info.get("cudnn_version"))
        return out

    def devices(self):
        tf = _tf()
        gpus = tf.config.list_physical_devices("GPU")
        tpus = tf.config.list_physical_devices("TPU")
        return (
            ["cpu"]
            + [f"cuda:{i}" for i in range(len(gpus))]
            + [f"tpu:{i}" for i in range(len(tpus))]
        )

    def mode_reason(self, mode, device):
        if device.startswith("tpu"):
            return "TPU cells need TPUStrategy on a TPU host; this adapter runs CPU and GPU cells"
        return None

    def configure_threads(self, threads):
        """Intra-op = threads, inter-op = 1 (N threads means N busy threads, all inside
        operators). TensorFlow fixes both when its runtime starts: later calls fail."""
        tf = _tf()
        threading = tf.config.threading
        try:
            threading.set_intra_op_parallelism_threads(threads)
            threading.set_inter_op_parallelism_threads(1)
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
        }

    def build(self, spec, cell, weights):
        _tf()
        from xfbench.adapters.tensorflow.workload import TensorFlowWorkload

        return TensorFlowWorkload(spec, cell, weights)


ADAPTER = TensorFlowAdapter()
