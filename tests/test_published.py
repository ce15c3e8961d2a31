"""Published figures are stated once (xfbench/published.toml) and matched to a device only
by its exact name: an H100 SXM's figures never stand beside an H100 PCIe or NVL, and an
H200 is held to its own datasheet."""

from __future__ import annotations

import pytest

from xfbench import published
from xfbench.gemm.compare import table


@pytest.mark.parametrize(
    "name, model",
    [
        ("NVIDIA H100 80GB HBM3", "h100_sxm"),
        ("  nvidia h100 80gb  HBM3 ", "h100_sxm"),  # case and spacing aside
        ("NVIDIA H100 PCIe", "h100_pcie"),
        ("NVIDIA H100 NVL", None),  # another part: no neighbour's figures
        ("NVIDIA H200", "h200_sxm"),
        ("NVIDIA H200 NVL", None),
        ("NVIDIA H100 80GB HBM3 (fake NVML)", None),
        ("H100", None),
        ("cpu", None),
        (None, None),
    ],
)
def test_a_device_matches_a_model_only_by_an_exact_name(name, model):
    found = published.gpu_for(name)
    assert (found.id if found else None) == model


def test_the_h200_has_its_own_bandwidth_and_the_h100_sxm_compute():
    h200, h100 = published.gpu_for("NVIDIA H200"), published.gpu_for("NVIDIA H100 80GB HBM3")
    assert h200.memory_gbps == 4800.0 and h100.memory_gbps == 3350.0
    assert h200.peaks_tflops["bf16"] == h100.peaks_tflops["bf16"] == 989.0


def test_every_anchor_names_a_listed_model_and_a_gemm_figure_is_found_by_exact_name():
    assert all(a.gpu in published.gpus() for a in published.anchors())
    # each kind is the one suite's that declares it stands beside it (Hooks.anchors): a
    # kind none declares would stand beside nothing
    from xfbench.report.suites import declared

    titles = {s.name: s.hooks.anchors.titles if s.hooks.anchors else {} for s in declared()}
    declaring = {kind: [name for name, kinds in titles.items() if kind in kinds] for kind in
                 {a.kind for a in published.anchors()}}  # fmt: skip
    assert all(len(names) == 1 for names in declaring.values()), declaring
    assert set(declaring) == {"gemm", "resnet50_train", "gpt2_train"}
    assert (
        published.published_figure("gemm", "NVIDIA H100 80GB HBM3", "bf16", n=8192).value == 798.0
    )
    assert published.published_figure("gemm", "NVIDIA H200", "bf16", n=8192).value == 790.0
    assert published.published_figure("gemm", "NVIDIA H100 PCIe", "bf16", n=8192).value == 493.0
    assert published.published_figure("gemm", "NVIDIA H100 NVL", "bf16", n=8192) is None
    assert published.published_figure("gemm", "NVIDIA H100 80GB HBM3", "bf16", n=4096) is None


def test_the_gemm_table_shows_the_published_figure_of_the_same_model_only():
    def rec(name):
        return {
            "impl": "torch", "m": 8192, "n": 8192, "k": 8192, "shape": "8192", "dtype": "bf16",
            "device": "cuda:0", "device_name": name, "status": "ok", "tflops": 700.0,
        }  # fmt: skip

    assert "798" in table([rec("NVIDIA H100 80GB HBM3")])
    assert "798" not in table([rec("NVIDIA H100 NVL")])


def test_published_ratios_of_two_models_are_found_by_exact_names_either_way_round():
    """MLPerf's H200 over H100 for a decode step (Inference v4.1's Llama-2-70B, Offline and
    Server) and for training (Training v4.0's ResNet-50 and Llama-2-70B LoRA); inverted for
    the H100 over the H200; none for another part."""
    decode = published.gpu_ratios("NVIDIA H100 80GB HBM3", "NVIDIA H200", "decode")
    assert [round(r.value, 2) for r in decode] == [1.28, 1.35]
    assert all("mlperf_log_summary.txt" in r.source for r in decode)
    training = published.gpu_ratios("NVIDIA H100 80GB HBM3", "NVIDIA H200", "training")
    assert [round(r.value, 2) for r in training] == [1.1, 1.14]
    back = published.gpu_ratios("NVIDIA H200", "NVIDIA H100 80GB HBM3", "decode")
    assert [round(r.value, 3) for r in back] == [round(1 / 1.276, 3), round(1 / 1.353, 3)]
    assert published.gpu_ratios("NVIDIA H100 PCIe", "NVIDIA H200", "decode") == ()
