"""One TensorFlow cell: the network on its device, the batch resident, and the step.

Modes: eager (the step runs op by op); function (tf.function: one graph, Grappler
optimisations, oneDNN fusions on the CPU); xla (tf.function(jit_compile=True)).
Precisions: fp32 is IEEE fp32 (TensorFlow allows TF32 on Ampere and later by
default, so it is switched off); tf32 switches it on; bf16 and fp16 compute in
that type over fp32 master weights, fp16 with dynamic loss scaling; fp64 (CPU only)
computes and keeps everything in float64, for the equivalence proof.
The update is TensorFlow's fused ResourceApplyMomentum, whose rule is PyTorch's
(accum = momentum * accum + grad; var -= lr * accum). Keras's SGD keeps
v = momentum * v - lr * grad instead: the same for a constant rate, but not the
same numbers, so it is not used.
"""

from __future__ import annotations

import functools

import numpy as np
import tensorflow as tf

from xfbench.adapters.base import Cell, Workload, check_layer_dtypes
from xfbench.adapters.tensorflow.networks import Network
from xfbench.errors import CannotRun
from xfbench.models import Spec, synthetic_batch
from xfbench.models import layers as L

COMPUTE_DTYPES = {
    "fp32": tf.float32,
    "tf32": tf.float32,
    "bf16": tf.bfloat16,
    "fp16": tf.float16,
    "fp64": tf.float64,
}
MODES = ("eager", "function", "xla")

# Dynamic loss scaling for fp16 (Keras LossScaleOptimizer's defaults).
INITIAL_LOSS_SCALE = 2.0**15
GROWTH_INTERVAL = 2000


def tf_device(device: str) -> str:
    """The harness's device name (cpu, cuda:N, tpu:N) in TensorFlow's (/CPU:0, /GPU:N, /TPU:N)."""
    kind, _, index = device.partition(":")
    names = {"cpu": "/CPU:0", "cuda": f"/GPU:{index or 0}", "tpu": f"/TPU:{index or 0}"}
    if kind not in names:
        raise CannotRun(f"TensorFlow has no device {device!r}")
    return names[kind]


def set_fp32_precision(precision: str) -> bool:
    """IEEE fp32 unless tf32 was asked for; returns whether TF32 is now allowed."""
    tf.config.experimental.enable_tensor_float_32_execution(precision == "tf32")
    return tf.config.experimental.tensor_float_32_execution_enabled()


def onednn_in_use() -> bool:
    """Whether TensorFlow runs its CPU kernels through oneDNN in this process. It decides
    once, at start-up: TF_ENABLE_ONEDNN_OPTS when set, else on only for some Intel CPUs
    (on an AMD EPYC, for one, it runs its own Eigen kernels)."""
    from tensorflow.python.util import _pywrap_util_port

    return bool(_pywrap_util_port.IsMklEnabled())


def backend(device: str, mode: str) -> str:
    """The kernels TensorFlow runs, as TensorFlow reports them."""
    if device.startswith("cuda"):
        kernels = "cuDNN"
    else:
        kernels = "oneDNN" if onednn_in_use() else "Eigen (oneDNN off)"
    return kernels + (", XLA-compiled" if mode == "xla" else "")


@functools.cache
def cpu_runs_channels_first() -> bool:
    """Whether TensorFlow's CPU convolution takes NCHW in this process, asked of
    TensorFlow itself with one tiny convolution: oneDNN's does, Eigen's does not."""
    with tf.device("/CPU:0"):
        try:
            tf.nn.conv2d(tf.zeros((1, 1, 2, 2)), tf.zeros((1, 1, 1, 1)), 1, "VALID", "NCHW")
        except tf.errors.UnimplementedError:
            return False
    return True


def layout_reason(layout: str, device: str) -> str | None:
    """Why TensorFlow cannot compute layout on device in this process, or None.
    cuDNN and oneDNN run both layouts; Eigen's CPU kernels only channels_last."""
    if layout != "channels_first" or device.startswith("cuda") or cpu_runs_channels_first():
        return None
    return (
        "TensorFlow's CPU convolutions here are Eigen's, which run channels_last (NHWC) "
        "only: oneDNN is off (TF_ENABLE_ONEDNN_OPTS=0, or TensorFlow's default on this CPU)"
    )


def preferred_layout(spec: Spec, device: str, precision: str) -> str:
    """channels_last on the CPU (TensorFlow's CPU convolutions and pools want NHWC)
    and for tensor-core precisions on a GPU; channels_first for fp32 on a GPU,
    where cuDNN's fp32 kernels are fastest in NCHW. Never a layout the device's
    kernels cannot run here (layout_reason): then channels_last, which all run."""
    if spec.sequence or not any(len(s) == 3 for _, s in spec.shapes):
        return "n/a"
    if device.startswith("cuda") and precision == "fp32":
        wanted = "channels_first"
    else:
        wanted = "channels_last"
    return "channels_last" if layout_reason(wanted, device) else wanted


# The ops that do a network's matrix arithmetic, by op-type prefix: dense layers and the
# LSTM's products (MatMul, BatchMatMulV2/V3), convolutions and their gradients, cuDNN's LSTM.
MATH_OP_PREFIXES = ("MatMul", "BatchMatMul", "Conv2D", "CudnnRNN")


def graph_dtypes(concrete) -> dict[str, str]:
    """op type -> the dtypes (attribute T) its nodes take in a traced function, nested
    functions (while-loop bodies, conditionals) included, comma separated."""
    graph = concrete.graph.as_graph_def()
    nodes = list(graph.node) + [n for f in graph.library.function for n in f.node_def]
    seen: dict[str, set[str]] = {}
    for node in nodes:
        if node.op.startswith(MATH_OP_PREFIXES) and "T" in node.attr:
            seen.setdefault(node.op, set()).add(tf.dtypes.as_dtype(node.attr["T"].type).name)
    return {k: ",".join(sorted(v)) for k, v in sorted(seen.items())}


def _same_device(actual: str, wanted: str) -> bool:
    a, w = tf.DeviceSpec.from_string(actual), tf.DeviceSpec.from_string(wanted)
    return (a.device_type or "").upper() == w.device_type.upper() and (a.device_index or 0) == (
        w.device_index or 0
    )


class TensorFlowWorkload(Workload):
    def __init__(self, spec: Spec, cell: Cell, weights: dict[str, np.ndarray], seed: int = 0):
        if cell.mode not in MODES:
            raise CannotRun(f"unknown TensorFlow mode {cell.mode!r}")
        self.spec, self.cell = spec, cell
        self.device = self._device()
        self.gpu = cell.device.startswith("cuda")
        tf32 = set_fp32_precision(cell.precision)
        self.compute_dtype = COMPUTE_DTYPES[cell.precision]
        self.layout = preferred_layout(spec, cell.device, cell.precision)
        # cuDNN's LSTM on a GPU, except under XLA, which cannot compile it.
        use_cudnn = self.gpu and cell.mode != "xla"

        # The master weights, loss and update: float32, or float64 for fp64.
        self.master_dtype = tf.float64 if self.compute_dtype == tf.float64 else tf.float32

        x, y = synthetic_batch(spec, cell.batch_size, seed)
        self.x_host, self.y_host = self._host_layout(x), y  # once, outside the timer

        with self._placement():
            self.net = Network(
                spec=spec,
                layout=self.layout,
                weights=weights,
                use_cudnn=use_cudnn,
                compute_dtype=self.compute_dtype,
            )
            self.x, self.y = self._to_device()
            self.trainable = self.net.trainable
            if cell.task == "train":
                self._optimizer_state()
        self._check_placement()

        fn = self._train_fn if cell.task == "train" else self._infer_fn
        self.fn = self._compile(fn)
        self._loss = self._out = None

        self.info = self._facts(tf32, use_cudnn)
        if cell.mode == "eager":  # a trace of the same body, untimed; graph modes: prepare()
            self._check_dtypes(self._trace(tf.function(fn)))

    def _optimizer_state(self) -> None:
        """The update's state (under the cell's placement): momentum or Adam's moments,
        the hyperparameters at the master precision, and fp16's dynamic loss scale."""
        spec, cell = self.spec, self.cell
        self.slots = [tf.Variable(tf.zeros_like(v), trainable=False) for v in self.trainable]
        self.lr = tf.constant(spec.lr, self.master_dtype)
        self.momentum = tf.constant(spec.momentum, self.master_dtype)
        if spec.optimizer == "adamw":
            self.second_moments = [
                tf.Variable(tf.zeros_like(v), trainable=False) for v in self.trainable
            ]
            self.adam_steps = tf.Variable(0, trainable=False, dtype=tf.int64)
            names = [e.name for e in self.net.variables.entries]
            self.decays = [spec.decays(name) for name in names]
        self.loss_scale = self.good_steps = None
        if cell.precision == "fp16":
            self.loss_scale = tf.Variable(INITIAL_LOSS_SCALE, trainable=False)
            self.good_steps = tf.Variable(0, trainable=False, dtype=tf.int64)

    def _facts(self, tf32: bool, use_cudnn: bool) -> dict:
        """What the record says of how the cell runs: device, layout, kernels, optimizer."""
        spec, cell = self.spec, self.cell
        info = {
            "device_name": self._device_name(),
            "layout": self.layout,
            "tf32": tf32,
            "compute_dtype": self.compute_dtype.name,
            "lstm_kernel": (
                "n/a"
                if not spec.time_major
                else "cudnn (CudnnRNNV3 via keras.layers.LSTM)"
                if use_cudnn
                else "keras.layers.LSTM generic loop" + (" under XLA" if cell.mode == "xla" else "")
            ),
            "batchnorm_kernel": "FusedBatchNormV3" if self._has_batchnorm() else "n/a",
            "optimizer": (
                "ResourceApplyAdam with epsilon eps sqrt(1 - b2^t) (PyTorch's AdamW "
                "arithmetic), decay w -= lr wd w first on matrices and embeddings"
                if spec.optimizer == "adamw"
                else "ResourceApplyMomentum (v = 0.9 v + g; w -= lr v)"
            ),
            "attention_kernel": (
                "softmax(q k^T / sqrt(dh)) v: BatchMatMulV2 and Softmax"
                + (", XLA-fused" if cell.mode == "xla" else "")
                if spec.transformer
                else "n/a"
            ),
            "loss_scale": (
                f"dynamic, from 2**{int(np.log2(INITIAL_LOSS_SCALE))}"
                if getattr(self, "loss_scale", None) is not None
                else "none"
            ),
            "tensorflow_param_count": self.net.native_param_count(),
            "onednn": onednn_in_use(),
            "backend": backend(cell.device, cell.mode),
        }
        if cell.task != "train":
            del info["optimizer"]  # inference updates nothing
        if spec.time_major:
            info["lstm_bias"] = (
                "one bias per layer (Keras): canonical B halves summed on "
                "import; weights() returns B = [sum, zeros]"
            )
        return info

    # -- placement ----------------------------------------------------------------
    def _device(self) -> str:
        """TensorFlow's name of the cell's device."""
        if self.cell.device.startswith("tpu"):
            # A TPU runs only under TPUStrategy: TpuWorkload (tpu_workload.py).
            raise CannotRun(
                "a TPU cell is a TpuWorkload; TensorFlowWorkload runs CPU and GPU cells"
            )
        return tf_device(self.cell.device)

    def _placement(self):
        """The scope the variables are made in: the device."""
        return tf.device(self.device)

    def _host_layout(self, x: np.ndarray) -> np.ndarray:
        """Samples as synthetic_batch gives them, in the network's dtype and layout."""
        if self.master_dtype == tf.float64 and x.dtype == np.float32:
            x = x.astype(np.float64)  # the same values, widened exactly
        if x.ndim == 4 and self.layout == "channels_last":
            x = x.transpose(0, 2, 3, 1)
        return np.ascontiguousarray(x)

    def infer_samples(self, x: np.ndarray) -> np.ndarray:
        with tf.device(self.device):
            self.x = tf.identity(tf.constant(self._host_layout(x)))
        self.step()
        return self.output()

    def _to_device(self):
        with tf.device(self.device):
            return tf.identity(tf.constant(self.x_host)), tf.identity(tf.constant(self.y_host))

    def _check_placement(self) -> None:
        """No silent fallback: every variable and the batch are where the cell says."""
        tensors = list(self.trainable) + [self.x, self.y] + list(getattr(self, "slots", []))
        wrong = sorted({t.device for t in tensors if not _same_device(t.device, self.device)})
        if wrong:
            raise RuntimeError(
                f"asked for {self.cell.device} ({self.device}), but tensors "
                f"are on {', '.join(wrong)}"
            )

    def _device_name(self) -> str:
        if not self.gpu:
            return "cpu"
        gpus = tf.config.list_physical_devices("GPU")
        index = int(self.cell.device.partition(":")[2] or 0)
        details = tf.config.experimental.get_device_details(gpus[index])
        return details.get("device_name", gpus[index].name)

    def _has_batchnorm(self) -> bool:
        return any(
            isinstance(layer, (L.BatchNorm, L.Bottleneck, L.BasicBlock))
            for layer in self.spec.layers
        )

    # -- the step's body (eager as is, or traced by tf.function) --------------------
    def _loss_of(self, logits, labels):
        logits = tf.cast(logits, self.master_dtype)
        if self.spec.loss_positions is not None:  # the masked LM's positions
            at = tf.constant(self.spec.loss_positions)
            logits, labels = tf.gather(logits, at, axis=1), tf.gather(labels, at, axis=1)
        losses = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
        return tf.reduce_mean(losses)  # mean over samples (and over all tokens)

    def _clip(self, grads):
        """Global-norm clipping where the spec asks for it, over the canonical tensors:
        a variable standing for n of them (the Keras LSTM bias, n = 2) counts n times in
        the norm and gets n times its gradient, as the n tensors' sum would move."""
        copies = self.net.copies
        if self.spec.clip_norm:
            # PyTorch's clip_grad_norm_ rule, max_norm / (norm + 1e-6) when below 1, where
            # tf.clip_by_global_norm's has no 1e-6: AdamW's update of a tensor whose
            # gradient is near its epsilon sees the difference (3e-9 in float64)
            norm = tf.linalg.global_norm([g for g, n in zip(grads, copies) for _ in range(n)])
            factor = tf.minimum(tf.cast(1, norm.dtype), self.spec.clip_norm / (norm + 1e-6))
            grads = [g * tf.cast(factor, g.dtype) for g in grads]
        return [g * n if n != 1 else g for g, n in zip(grads, copies)]

    def _apply(self, grads) -> None:
        if self.spec.optimizer == "adamw":
            self._apply_adamw(grads)
            return
        for v, m, g in zip(self.trainable, self.slots, grads):
            tf.raw_ops.ResourceApplyMomentum(
                var=v.handle,
                accum=m.handle,
                lr=self.lr,
                grad=g,
                momentum=self.momentum,
                use_locking=False,
                use_nesterov=False,
            )

    def _apply_adamw(self, grads) -> None:
        """PyTorch's AdamW step through TensorFlow's fused Adam kernel. ResourceApplyAdam
        divides by sqrt(v) + epsilon with lr sqrt(1 - b2^t) / (1 - b1^t) (the "epsilon
        hat" form): given epsilon = eps sqrt(1 - b2^t) it computes PyTorch's
        lr / (1 - b1^t) m / (sqrt(v / (1 - b2^t)) + eps) exactly, rather than a nearby rule."""
        spec, dtype = self.spec, self.master_dtype
        self.adam_steps.assign_add(1)
        t = tf.cast(self.adam_steps, dtype)
        b1, b2 = (tf.constant(b, dtype) for b in spec.betas)
        b1_power, b2_power = tf.pow(b1, t), tf.pow(b2, t)
        epsilon = tf.constant(spec.eps, dtype) * tf.sqrt(1 - b2_power)
        decay = tf.constant(spec.lr * spec.weight_decay, dtype)
        for v, m, s, g, decays in zip(
            self.trainable, self.slots, self.second_moments, grads, self.decays
        ):
            if decays:  # decoupled: w -= lr wd w, before the Adam step, as PyTorch
                v.assign_sub(decay * v)
            tf.raw_ops.ResourceApplyAdam(
                var=v.handle,
                m=m.handle,
                v=s.handle,
                beta1_power=b1_power,
                beta2_power=b2_power,
                lr=self.lr,
                beta1=b1,
                beta2=b2,
                epsilon=epsilon,
                grad=g,
                use_locking=False,
                use_nesterov=False,
            )

    def _train_fn(self, x, y):
        with tf.GradientTape() as tape:
            loss = self._loss_of(self.net(x, training=True), y)
            target = loss * self.loss_scale if self.loss_scale is not None else loss
        # The embedding's gradient comes as IndexedSlices; PyTorch's is dense, and so is
        # its momentum update (every row decays), so it is made dense here.
        grads = [tf.convert_to_tensor(g) for g in tape.gradient(target, self.trainable)]
        if self.loss_scale is None:
            self._apply(self._clip(grads))
            return loss
        grads = [g / self.loss_scale for g in grads]
        finite = tf.reduce_all([tf.reduce_all(tf.math.is_finite(g)) for g in grads])

        def update():
            self._apply(self._clip(grads))
            grow = self.good_steps + 1 >= GROWTH_INTERVAL
            self.loss_scale.assign(tf.where(grow, self.loss_scale * 2.0, self.loss_scale))
            self.good_steps.assign(tf.where(grow, tf.constant(0, tf.int64), self.good_steps + 1))
            return tf.constant(True)

        def skip():
            self.loss_scale.assign(tf.maximum(self.loss_scale / 2.0, 1.0))
            self.good_steps.assign(0)
            return tf.constant(False)

        tf.cond(finite, update, skip)
        return loss

    def _infer_fn(self, x):
        return self.net(x, training=False)

    def _compile(self, fn):
        """The step as the mode runs it: op by op (eager), or one tf.function, XLA-compiled
        for xla."""
        if self.cell.mode == "eager":
            return fn
        return tf.function(fn, jit_compile=self.cell.mode == "xla", reduce_retracing=False)

    # -- steps --------------------------------------------------------------------
    def _batch(self):
        return self._to_device() if self.cell.data == "copied" else (self.x, self.y)

    def input_batches(self, source, seed: int, workers: int):
        from xfbench.adapters.tensorflow.input_pipeline import batches

        return batches(
            src=source,
            batch=self.cell.batch_size,
            seed=seed,
            workers=workers,
            channels_last=self.layout == "channels_last",
        )

    def feed(self, x, y) -> None:
        with tf.device(self.device):
            if x.dtype.is_floating and x.dtype != self.master_dtype:
                x = tf.cast(x, self.master_dtype)
            self.x, self.y = tf.identity(x), tf.identity(y)

    def _trace(self, fn):
        args = (self.x, self.y) if self.cell.task == "train" else (self.x,)
        return fn.get_concrete_function(*args)

    def _check_dtypes(self, concrete) -> None:
        """What the step computes in, read from its traced graph (every product and
        convolution, backward and the LSTM's loop included), recorded and checked."""
        ran = self.info["layer_dtypes"] = graph_dtypes(concrete)
        check_layer_dtypes(self.cell.precision, ran, math_kinds=ran.keys())  # all are math

    def prepare(self) -> None:
        if self.cell.mode != "eager":  # trace now; XLA compiles on the first call
            self._check_dtypes(self._trace(self.fn))

    def step(self) -> None:
        with tf.device(self.device):
            x, y = self._batch()
            if self.cell.task == "train":
                self._loss = self.fn(x, y)
            else:
                self._out = self.fn(x)
        self._sync()

    def _sync(self) -> None:
        # CPU ops run synchronously (eager) and a tf.function returns when its ops are
        # done; GPU kernels are queued, so wait for them.
        if self.gpu:
            tf.test.experimental.sync_devices()

    # -- results ------------------------------------------------------------------
    def loss(self) -> float:
        return float(self._loss)

    def output(self) -> np.ndarray:
        return np.asarray(tf.cast(self._out, self.master_dtype))

    def export_onnx(self, path: str) -> None:
        """The network in evaluation mode, with its current weights, through tf2onnx (see export.py)."""
        from xfbench.adapters.tensorflow.export import export_onnx

        export_onnx(self, path)

    def weights(self) -> dict[str, np.ndarray]:
        return self.net.weights()

    def _gpu_name(self) -> str:
        return "GPU:" + (self.cell.device.partition(":")[2] or "0")

    def reset_peak_memory(self) -> None:
        if self.gpu:
            tf.config.experimental.reset_memory_stats(self._gpu_name())

    def peak_device_memory(self) -> int | None:
        if self.gpu:
            return int(tf.config.experimental.get_memory_info(self._gpu_name())["peak"])
        return None

    def close(self) -> None:
        self.net = self.trainable = self.slots = self.fn = None
        self.x = self.y = self._loss = self._out = None
