"""The specs: counts computed from the layer lists equal docs/models.md."""

import numpy as np
import pytest

from xfbench.models import (
    NETWORKS,
    PAPER_NETWORKS,
    TRANSFORMERS,
    get_spec,
    initial_weights,
    synthetic_batch,
)

# docs/models.md: parameters and forward MACs per sample (MACs in millions, as printed there).
EXPECTED = {
    "fcn5": (117_997_696, 117.96),
    "fcn8": (130_586_752, 130.55),
    "fcn_r": (14_205_962, 14.20),
    "alexnet": (62_378_344, 1135.3),
    "alexnet_r": (85_098, 10.73),
    "resnet50": (25_557_032, 4100.0),  # "about 4.1 G"
    "resnet56": (853_018, 125.5),
    "lstm32": (6_182_672, None),
    "lstm64": (6_182_672, None),
}
TABLE7_BATCH = {
    "fcn5": 64,
    "fcn8": 64,
    "fcn_r": 1024,
    "alexnet": 16,
    "alexnet_r": 1024,
    "resnet50": 16,
    "resnet56": 128,
    "lstm32": 128,
    "lstm64": 128,
}


def test_the_nine_networks_and_the_transformers_are_defined():
    assert set(PAPER_NETWORKS) == set(EXPECTED)
    assert list(NETWORKS) == list(PAPER_NETWORKS) + list(TRANSFORMERS)


@pytest.mark.parametrize("network", EXPECTED)
def test_full_size_parameter_count(network):
    assert get_spec(network).param_count == EXPECTED[network][0]


@pytest.mark.parametrize("network", EXPECTED)
def test_forward_macs(network):
    macs = EXPECTED[network][1]
    spec = get_spec(network)
    if (
        macs is None
    ):  # LSTM: per step, 2 layers x 4 gates x H x (in + H) plus the 256 -> 10000 output
        steps = spec.input_shape[0]
        assert spec.forward_macs == steps * (2 * 4 * 256 * 512 + 256 * 10000)
    else:
        rel = 0.025 if network == "resnet50" else 0.0005
        assert spec.forward_macs / 1e6 == pytest.approx(macs, rel=rel)


@pytest.mark.parametrize("network", EXPECTED)
def test_flops_convention(network):
    spec = get_spec(network)
    assert spec.forward_flops(3) == 2 * spec.forward_macs * 3
    assert spec.train_flops(3) == 3 * spec.forward_flops(3)


@pytest.mark.parametrize("network", EXPECTED)
def test_table7_batch(network):
    assert get_spec(network).batch_size == TABLE7_BATCH[network]


def test_alexnet_last_feature_map_is_6x6():
    from xfbench.models.layers import Flatten

    spec = get_spec("alexnet")
    [(_, shape)] = [(layer, s) for layer, s in spec.shapes if isinstance(layer, Flatten)]
    assert shape == (256, 6, 6)


def test_resnet56_has_56_weighted_layers():
    from xfbench.models.layers import BasicBlock, Conv, Dense

    spec = get_spec("resnet56")
    layers = len(spec.layer(Conv)) + 2 * len(spec.layer(BasicBlock)) + len(spec.layer(Dense))
    assert layers == 56


@pytest.mark.parametrize("network", EXPECTED)
def test_smoke_size_keeps_the_layer_kinds(network):
    full, smoke = get_spec(network), get_spec(network, "smoke")
    assert [type(x) for x in full.layers] == [type(x) for x in smoke.layers]
    assert smoke.param_count < full.param_count / 10 or network == "alexnet_r"


def test_synthetic_batch_is_deterministic_and_well_formed():
    spec = get_spec("lstm32", "smoke")
    x1, y1 = synthetic_batch(spec, 4, seed=3)
    x2, y2 = synthetic_batch(spec, 4, seed=3)
    assert np.array_equal(x1, x2) and np.array_equal(y1, y2)
    assert x1.shape == (4, 32) and y1.shape == (4, 32) and x1.max() < spec.vocab
    img = get_spec("resnet56", "smoke")
    x, y = synthetic_batch(img, 5)
    assert x.shape == (5, 3, 32, 32) and x.dtype == np.float32 and y.max() < 10
    assert abs(float(x.std()) - 1) < 0.1  # N(0, 1), never zeros


def test_initial_weights_follow_the_spec():
    spec = get_spec("lstm32", "smoke")
    w = initial_weights(spec, seed=0)
    assert {p.name: p.shape for p in spec.params} == {k: v.shape for k, v in w.items()}
    h = 32
    bias = w["lstm.l0.B"]
    assert (
        not bias[2 * h : 3 * h].any() and not bias[6 * h : 7 * h].any()
    )  # forget gates start at 0
    assert bias[: 2 * h].any()
    assert np.array_equal(initial_weights(spec, 0)["fc.weight"], w["fc.weight"])
    assert not np.array_equal(initial_weights(spec, 1)["fc.weight"], w["fc.weight"])
