"""One TensorFlow cell on one TPU core: workload.py's network, batch and step, run under a
TPUStrategy over that core alone (tpu.py). Written to TensorFlow 2.21's documented API and
never run on a TPU.

What differs from a CPU or GPU cell:
- the variables are made in strategy.scope(), so they are TPUStrategy's, on the core;
- the batch is resident on the core (or copied to it inside each step, --data copied);
- the step is a tf.function calling strategy.run: TPUStrategy hands the replicated step to
  XLA, which compiles it for the TPU as one program (mode "xla" is the only one offered);
- a step returns once one value it computed has been read on the host. A TPU's SyncDevice
  kernel does nothing, so tf.test.experimental.sync_devices() would not wait; the copy to
  the host is queued behind the step's program on the core, so it ends when the step has.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from xfbench.adapters.base import Cell
from xfbench.adapters.tensorflow import tpu
from xfbench.adapters.tensorflow.workload import TensorFlowWorkload
from xfbench.errors import CannotRun
from xfbench.models import Spec


class TpuWorkload(TensorFlowWorkload):
    def __init__(self, spec: Spec, cell: Cell, weights: dict[str, np.ndarray], seed: int = 0):
        if cell.mode != tpu.MODE or cell.precision not in tpu.PRECISIONS:
            raise CannotRun(
                f"a TPU cell runs mode {tpu.MODE} in {' or '.join(tpu.PRECISIONS)}, "
                f"not {cell.mode} in {cell.precision}"
            )
        core = int(cell.device.partition(":")[2] or 0)
        self.strategy, facts = tpu.one_core_strategy(tf, core)
        self._probe = None
        super().__init__(spec, cell, weights, seed)
        self.info.update(
            {
                "strategy": f"{type(self.strategy).__name__}, "
                f"{self.strategy.num_replicas_in_sync} replica",
                "tpu_device": self.device,
                "backend": "XLA:TPU (TPUStrategy)",
                # TF32 off: TensorFlow asks XLA for HIGHEST precision products, true fp32
                # on a TPU too (bf16 operands stay bf16).
                "matmul_precision": "HIGHEST",
                **facts,
            }
        )

    # -- placement ----------------------------------------------------------------
    def _device(self) -> str:
        """The core's full name, as the strategy places its one replica."""
        return self.strategy.extended.worker_devices[0]

    def _placement(self):
        return self.strategy.scope()

    def _device_name(self) -> str:
        # TensorFlow names no TPU generation (get_device_details describes GPUs only);
        # tpu_mesh_shape and tpu_cores in the record say which system it was.
        return "TPU"

    # -- the step -------------------------------------------------------------------
    def _compile(self, fn):
        def replica_step(*batch):
            out = fn(*batch)
            # One element of the result, for _sync to read on the host.
            return out, tf.reshape(out, [-1])[0]

        def on_core(*batch):
            (result,) = self.strategy.experimental_local_results(
                self.strategy.run(replica_step, args=batch)
            )
            return result

        # No jit_compile: TPUStrategy hands the replicated step to XLA itself.
        return tf.function(on_core, reduce_retracing=False)

    def step(self) -> None:
        x, y = self._batch()
        if self.cell.task == "train":
            self._loss, self._probe = self.fn(x, y)
        else:
            self._out, self._probe = self.fn(x)
        self._sync()

    def _sync(self) -> None:
        self._probe.numpy()

    # -- memory ---------------------------------------------------------------------
    def reset_peak_memory(self) -> None:
        try:
            tf.config.experimental.reset_memory_stats(self.device)
        except ValueError:
            pass  # not tracked by this runtime: peak_device_memory says None

    def peak_device_memory(self) -> int | None:
        try:
            return int(tf.config.experimental.get_memory_info(self.device)["peak"])
        except ValueError:  # TensorFlow documents it for TPUs; a runtime may not track it
            return None

    def close(self) -> None:
        super().close()
        self.strategy = self._probe = None
