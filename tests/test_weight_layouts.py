"""Each adapter's conversion of the canonical (ONNX) layouts: one known element, marked,
must land exactly where the framework reads it. One test per conversion."""

import importlib.util

import numpy as np
import pytest

from xfbench.models import get_spec, initial_weights


def _needs(module: str):
    if importlib.util.find_spec(module.split(".")[0]) is None:
        pytest.skip(f"{module.split('.')[0]} is not installed")
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        pytest.skip(f"{module} is not part of this checkout ({e.name})")


def _marked(shape, index, value=7.0):
    w = np.zeros(shape, np.float32)
    w[index] = value
    return w


# -- PyTorch: conv and dense are PyTorch's own layouts; the LSTM reorders gates -----------


def test_torch_conv_and_dense_keep_their_layout():
    W = _needs("xfbench.adapters.torch.weights")
    from xfbench.adapters.torch.networks import build_network

    spec = get_spec("alexnet_r", "smoke")
    weights = initial_weights(spec)
    weights["conv2.weight"] = _marked(weights["conv2.weight"].shape, (3, 1, 4, 0))
    weights["fc4.weight"] = _marked(weights["fc4.weight"].shape, (9, 17))
    state = W.to_state_dict(spec, build_network(spec), weights)
    conv = next(v for k, v in state.items() if k.endswith("conv2.weight"))
    fc = next(v for k, v in state.items() if k.endswith("fc4.weight"))
    assert conv[3, 1, 4, 0] == 7.0 and conv.sum() == 7.0
    assert fc[9, 17] == 7.0 and fc.sum() == 7.0


def test_torch_lstm_gate_order_and_two_biases():
    W = _needs("xfbench.adapters.torch.weights")
    from xfbench.adapters.torch.networks import build_network

    spec = get_spec("lstm32", "smoke")
    h = spec.layers[1].hidden
    weights = initial_weights(spec)
    weights["lstm.l0.W"] = _marked(weights["lstm.l0.W"].shape, (1 * h + 2, 5))  # ONNX gate o
    weights["lstm.l0.B"] = _marked(weights["lstm.l0.B"].shape, (4 * h + 3 * h + 1,))  # Rb, c
    state = W.to_state_dict(spec, build_network(spec), weights)
    assert state["lstm.weight_ih_l0"][3 * h + 2, 5] == 7.0  # torch i, f, g, o: o is 4th
    assert state["lstm.bias_hh_l0"][2 * h + 1] == 7.0  # g (cell) is 3rd
    assert state["lstm.bias_ih_l0"].abs().sum() == 0


# -- TensorFlow: HWIO kernels, (in, out) dense, NHWC flatten order, Keras LSTM -----------


def test_tensorflow_conv_oihw_to_hwio():
    T = _needs("xfbench.adapters.tensorflow.weights")
    w = _marked((5, 3, 2, 4), (4, 2, 1, 3))
    assert T.CONV.to_tf(w)[1, 3, 2, 4] == 7.0


def test_tensorflow_dense_out_in_to_in_out():
    T = _needs("xfbench.adapters.tensorflow.weights")
    assert T.DENSE.to_tf(_marked((6, 9), (5, 8)))[8, 5] == 7.0


def test_tensorflow_dense_after_flatten_takes_hwc_rows():
    T = _needs("xfbench.adapters.tensorflow.weights")
    c, h, w = 3, 2, 4
    # canonical input feature (c=2, y=1, x=3) of output 4: row 2*8 + 1*4 + 3 of a CHW flatten
    canonical = _marked((6, c * h * w), (4, 2 * h * w + 1 * w + 3))
    tf_kernel = T.Converter("flat_dense", (c, h, w)).to_tf(canonical)
    assert tf_kernel[(1 * w + 3) * c + 2, 4] == 7.0  # row of an HWC flatten


def test_tensorflow_lstm_gates_ifco_and_one_summed_bias():
    T = _needs("xfbench.adapters.tensorflow.weights")
    hid, fin = 4, 3
    W = _marked((4 * hid, fin), (1 * hid + 2, 1))  # ONNX gate o, unit 2
    R = np.zeros((4 * hid, hid), np.float32)
    B = np.zeros(8 * hid, np.float32)
    B[2 * hid + 1] = 1.0  # Wb of gate f, unit 1
    B[4 * hid + 2 * hid + 1] = 2.0  # Rb of gate f, unit 1
    kernel, _, bias = T.lstm_to_keras(W, R, B)
    assert kernel[1, 3 * hid + 2] == 7.0  # Keras i, f, c, o: o is 4th
    assert bias[1 * hid + 1] == 3.0 and bias.sum() == 3.0  # f is 2nd; the sum of both


# -- JAX: HWIO kernels, (in, out) dense, NHWC flatten order, LSTM gates kept -------------


def _jax_params(network, name, index):
    J = _needs("xfbench.adapters.jax.weights")
    spec = get_spec(network, "smoke")
    weights = initial_weights(spec)
    weights[name] = _marked(weights[name].shape, index)
    return spec, J.to_jax(spec, weights)[name]


def test_jax_conv_oihw_to_hwio():
    _, w = _jax_params("alexnet_r", "conv2.weight", (3, 1, 4, 0))
    assert w[4, 0, 1, 3] == 7.0 and w.sum() == 7.0


def test_jax_dense_out_in_to_in_out():
    _, w = _jax_params("fcn_r", "fc2.weight", (9, 17))
    assert w[17, 9] == 7.0 and w.sum() == 7.0


def test_jax_dense_after_flatten_takes_hwc_rows():
    spec = get_spec("alexnet", "smoke")  # a 2x2 last map
    flat = next(x for layer, x in spec.shapes if type(layer).__name__ == "Flatten")
    c, h, w = flat
    _, kernel = _jax_params("alexnet", "fc6.weight", (5, 2 * h * w + 1 * w + 1))
    assert kernel[(1 * w + 1) * c + 2, 5] == 7.0 and kernel.sum() == 7.0


def test_jax_lstm_transposed_gates_kept_both_biases():
    spec = get_spec("lstm32", "smoke")
    h = spec.layers[1].hidden
    _, w = _jax_params("lstm32", "lstm.l0.W", (1 * h + 2, 5))
    assert w[5, 1 * h + 2] == 7.0  # gate o stays 2nd (i, o, f, c)
    _, b = _jax_params("lstm32", "lstm.l0.B", (4 * h + 3,))
    assert b[4 * h + 3] == 7.0  # B used as it is
