"""The PTB word model in TensorFlow: embedding -> two keras.layers.LSTM -> dense at
every step, batch-major.

keras.layers.LSTM runs cuDNN's fused kernel (CudnnRNNV3) when a GPU is visible and
its arguments allow it: activation tanh, recurrent_activation sigmoid, unroll
False, use_bias True, recurrent_dropout 0 (the defaults, checked below). It is
asked for explicitly (use_cudnn=True), so a configuration cuDNN cannot run is an
error rather than a silent fallback. Elsewhere (the CPU, and XLA, which cannot
compile the cuDNN op) it is Keras's generic loop over time (a tf.while_loop).

Keras keeps one bias per layer: the canonical two are summed on import
(weights.py), so TensorFlow holds 4H fewer numbers per layer than the spec counts.
Training stays the spec's: each of the two biases would get the gradient g, so
their sum moves by twice one bias's step; the workload gives the Keras bias 2g,
and counts it twice in the global norm that is clipped.
"""

from __future__ import annotations

import keras
import tensorflow as tf

from xfbench.adapters.tensorflow.layers import Dense, Embedding, Variables
from xfbench.adapters.tensorflow.weights import lstm_from_keras, lstm_to_keras
from xfbench.models import Spec
from xfbench.models import layers as L

POLICIES = {
    tf.float32: "float32",
    tf.bfloat16: "mixed_bfloat16",
    tf.float16: "mixed_float16",
    tf.float64: "float64",
}


def cudnn_conditions(layer: keras.layers.LSTM) -> dict[str, bool]:
    """keras.layers.LSTM's documented conditions for the cuDNN kernel."""
    cell = layer.cell
    return {
        "activation tanh": cell.activation is keras.activations.tanh,
        "recurrent_activation sigmoid": cell.recurrent_activation is keras.activations.sigmoid,
        "recurrent_dropout 0": cell.recurrent_dropout == 0,
        "unroll False": not layer.unroll,
        "use_bias True": cell.use_bias,
    }


class LSTMLanguageModel(tf.Module):
    def __init__(self, spec: Spec, variables: Variables, use_cudnn: bool, compute_dtype=tf.float32):
        super().__init__()
        embed, lstm, fc = spec.layers
        assert isinstance(embed, L.Embedding) and isinstance(lstm, L.LSTM)
        shapes = [x for _, x in spec.shapes]
        self.spec_lstm = lstm
        self.embed = Embedding(embed, shapes[0], variables)
        self.lstms = []
        fin = embed.dim
        for _i in range(lstm.layers):
            layer = keras.layers.LSTM(
                lstm.hidden,
                return_sequences=True,
                use_cudnn=use_cudnn,
                # Values come from the canonical weights; zeros avoid drawing
                # (and, for the orthogonal default, factorising) throw-away ones.
                kernel_initializer="zeros",
                recurrent_initializer="zeros",
                bias_initializer="zeros",
                unit_forget_bias=False,
                dtype=POLICIES[compute_dtype],
            )
            layer.build((None, spec.input_shape[0], fin))
            self.lstms.append(layer)
            fin = lstm.hidden
        if use_cudnn:
            failed = [
                k for layer in self.lstms for k, ok in cudnn_conditions(layer).items() if not ok
            ]
            if failed:
                raise ValueError(f"keras.layers.LSTM cannot use cuDNN: {', '.join(failed)}")
        self.dtype = variables.dtype
        if not variables.shape_only:
            self.load(variables.weights)
        self.fc = Dense(fc, shapes[2], variables)
        self.compute_dtype = compute_dtype

    def _names(self, i: int) -> tuple[str, str, str]:
        n = f"{self.spec_lstm.name}.l{i}"
        return f"{n}.W", f"{n}.R", f"{n}.B"

    def load(self, weights) -> None:
        for i, layer in enumerate(self.lstms):
            kernel, recurrent, bias = lstm_to_keras(
                *(weights[n] for n in self._names(i)), dtype=self.dtype
            )
            layer.cell.kernel.assign(kernel)
            layer.cell.recurrent_kernel.assign(recurrent)
            layer.cell.bias.assign(bias)

    def export(self) -> dict:
        out = {}
        for i, layer in enumerate(self.lstms):
            values = lstm_from_keras(
                layer.cell.kernel.numpy(),
                layer.cell.recurrent_kernel.numpy(),
                layer.cell.bias.numpy(),
                dtype=self.dtype,
            )
            out.update(zip(self._names(i), values))
        return out

    def keras_variables(self) -> list:
        """The LSTM layers' tf.Variables (under Keras's variable wrappers), each with the
        number of canonical tensors it stands for (the bias: two)."""
        return [
            (v.value, n)
            for layer in self.lstms
            for v, n in (
                (layer.cell.kernel, 1),
                (layer.cell.recurrent_kernel, 1),
                (layer.cell.bias, 2),
            )
        ]

    def __call__(self, tokens, training=False):
        x = tf.cast(self.embed(tokens), self.compute_dtype)
        for layer in self.lstms:
            x = layer(x, training=training)
        return self.fc(x)
