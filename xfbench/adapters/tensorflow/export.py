"""Export a TensorFlow network to ONNX through tf2onnx.

tf2onnx.convert.from_function traces a tf.function of the forward pass (its Keras
path is broken under Keras 3). The exported graph keeps the exchange interface:
"input" channels-first as synthetic_batch gives it (transposed inside when the
network computes channels-last) and "logits" in float32. tf2onnx 1.17 writes opsets
up to 18, so the file is opset 18 (IR 8), which every runtime here reads.
"""

from __future__ import annotations

import tensorflow as tf

from xfbench.exchange.graph import INPUT, OUTPUT

TF2ONNX_OPSET = 18


def export_onnx(work, path: str) -> None:
    import tf2onnx

    spec = work.spec
    channels_last = len(spec.input_shape) == 3 and work.layout == "channels_last"
    signature = [
        tf.TensorSpec(
            (None,) + spec.input_shape, tf.int64 if spec.sequence else tf.float32, name=INPUT
        )
    ]

    @tf.function(input_signature=signature)
    def forward(x):
        if channels_last:
            x = tf.transpose(x, [0, 2, 3, 1])
        return tf.identity(tf.cast(work.net(x, training=False), tf.float32), name=OUTPUT)

    module = work.net.module
    written = getattr(module, "written", None)
    if written is not None:
        module.written = True  # the transformers' GELU as erf, which tf2onnx converts
    try:
        with tf.device(work.device):
            tf2onnx.convert.from_function(
                forward, input_signature=signature, opset=TF2ONNX_OPSET, output_path=str(path)
            )
    finally:
        if written is not None:
            module.written = written
