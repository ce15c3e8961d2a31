"""A plain TensorFlow ResNet-56 training loop, independent of xfbench's adapter.

The yardstick for the suite's TensorFlow numbers: what a TensorFlow user would
write by hand (Keras layers, channels-last, TensorFlow's fused batch norm, a
tf.function step with tf.GradientTape and Keras SGD), with the geometry of docs/models.md (3x3 convs padded
by 1, option-A shortcuts, global average pool, fc 64 -> 10). It prints the median
seconds per training step after warm-up. Compare with

    pytest xfbench/suites/test_train.py --framework tensorflow --model resnet56 \
        --mode function,xla --threads 1 --preset quick

    python crosscheck/tensorflow_resnet56.py --threads 1 --batch 128 --steps 30
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=1, help="CPU threads (default 1)")
    p.add_argument("--steps", type=int, default=30, help="timed steps (default 30)")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps after the first")
    p.add_argument("--batch", type=int, default=128, help="mini-batch size (default 128)")
    p.add_argument("--xla", action="store_true", help="tf.function(jit_compile=True)")
    p.add_argument(
        "--keras-bn",
        action="store_true",
        help="Keras 3's BatchNormalization (not fused) instead of TensorFlow's fused "
        "kernel, to see what the unfused layer costs",
    )
    args = p.parse_args(argv)
    cpus = sorted(os.sched_getaffinity(0))
    for name in ("threads", "steps", "batch"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be at least 1")
    if args.threads > len(cpus):
        p.error(f"--threads {args.threads} is more than the {len(cpus)} CPUs available")
    return args, cpus


def main(argv=None) -> int:
    args, cpus = parse_args(argv)
    # Before TensorFlow starts: thread variables, affinity, then its own pools.
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(args.threads)
    os.sched_setaffinity(0, cpus[: args.threads])
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras
    import numpy as np
    import tensorflow as tf
    from keras import layers

    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    tf.config.experimental.enable_tensor_float_32_execution(False)

    class FusedBatchNorm(layers.Layer):
        """TensorFlow's fused batch-norm kernel, running statistics at factor 0.1."""

        def build(self, shape):
            c = shape[-1]
            self.gamma = self.add_weight(shape=(c,), initializer="ones")
            self.beta = self.add_weight(shape=(c,), initializer="zeros")
            self.mean = self.add_weight(shape=(c,), initializer="zeros", trainable=False)
            self.var = self.add_weight(shape=(c,), initializer="ones", trainable=False)

        def call(self, x, training=False):
            y, mean, var = tf.compat.v1.nn.fused_batch_norm(
                x,
                self.gamma,
                self.beta,
                mean=self.mean,
                variance=self.var,
                epsilon=1e-5,
                is_training=training,
                exponential_avg_factor=0.1 if training else 1.0,
            )
            if training:
                self.mean.assign(mean)
                self.var.assign(var)
            return y

    def batch_norm():
        if args.keras_bn:
            return layers.BatchNormalization(momentum=0.9, epsilon=1e-5)
        return FusedBatchNorm()

    def conv_bn(x, filters, stride):
        if stride == 1:
            x = layers.Conv2D(filters, 3, padding="same", use_bias=False)(x)
        else:  # "same" would pad 0 before and 1 after; the spec pads 1 on both sides
            x = layers.ZeroPadding2D(1)(x)
            x = layers.Conv2D(filters, 3, strides=stride, use_bias=False)(x)
        return batch_norm()(x)

    def block(x, filters, stride):
        out = layers.ReLU()(conv_bn(x, filters, stride))
        out = conv_bn(out, filters, 1)
        shortcut = x
        if stride != 1 or x.shape[-1] != filters:  # option A: subsample, zero channels
            extra = filters - x.shape[-1]
            shortcut = layers.Lambda(
                lambda t: tf.pad(
                    t[:, ::stride, ::stride, :],
                    [[0, 0], [0, 0], [0, 0], [extra // 2, extra - extra // 2]],
                )
            )(x)
        return layers.ReLU()(layers.Add()([out, shortcut]))

    inputs = keras.Input((32, 32, 3))
    x = layers.ReLU()(conv_bn(inputs, 16, 1))
    for stage, filters in enumerate((16, 32, 64)):
        for b in range(9):
            x = block(x, filters, 2 if (b == 0 and stage > 0) else 1)
    x = layers.GlobalAveragePooling2D()(x)
    model = keras.Model(inputs, layers.Dense(10)(x))
    params = model.count_params() - sum(int(np.prod(v.shape)) for v in model.non_trainable_weights)
    optimizer = keras.optimizers.SGD(learning_rate=0.01, momentum=0.9)

    rng = np.random.default_rng(0)
    images = tf.constant(rng.standard_normal((args.batch, 32, 32, 3), dtype=np.float32))
    labels = tf.constant(rng.integers(0, 10, args.batch))

    @tf.function(jit_compile=args.xla)
    def train_step(x, y):
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            loss = tf.reduce_mean(
                tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)
            )
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    t0 = time.perf_counter()
    train_step(images, labels).numpy()
    first = time.perf_counter() - t0
    for _ in range(args.warmup):
        train_step(images, labels).numpy()
    times, cpu = [], []
    for _ in range(args.steps):
        t0, c0 = time.perf_counter(), time.process_time()
        loss = train_step(images, labels).numpy()  # returns when the step is done
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    # CPU seconds per step are printed too: on a shared machine they move less than wall time.
    print(
        f"plain TensorFlow {tf.__version__} ResNet-56 ({params:,} parameters), "
        f"{'xla' if args.xla else 'function'}, "
        f"{'Keras' if args.keras_bn else 'fused'} batch norm, batch {args.batch}, {args.threads} thread(s): "
        f"first step {first:.2f} s, median {statistics.median(times):.4f} s/step over "
        f"{args.steps} steps (CPU {statistics.median(cpu):.4f} s/step; loss {loss:.3f})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
