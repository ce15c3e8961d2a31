"""Each training cell's MFU against the peak its run measured where it ran
(xfbench/roofline/mfu.py), or null with the reason."""

from xfbench.roofline.mfu import mfu_fields

ROOFS = {
    "t2": {"fp32_peak_tflops": 0.2, "memory_bandwidth_gbps": 20.0},
    "t1": {"error": "timed out"},
    "cuda:0": {"fp32_peak_tflops": 50.0, "bf16_peak_tflops": 800.0, "tf32_peak_tflops": 400.0},
}


def _train(**kw):
    return {"kind": "train", "status": "ok", "device": "cpu", "threads": 2,
            "precision": "fp32", "achieved_tflops": 0.05, **kw}  # fmt: skip


def test_a_training_cell_is_held_to_the_peak_of_its_precision_where_it_ran():
    assert mfu_fields(_train(), ROOFS) == {"mfu": 0.25, "mfu_peak_tflops": 0.2, "mfu_reason": None}
    gpu = _train(device="cuda:0", precision="bf16", achieved_tflops=320.0)
    assert mfu_fields(gpu, ROOFS)["mfu"] == 0.4
    tf32 = _train(device="cuda:0", precision="tf32", achieved_tflops=100.0)
    assert mfu_fields(tf32, ROOFS)["mfu_peak_tflops"] == 400.0
    # no TF32 arithmetic on the CPU: its fp32 peak
    assert mfu_fields(_train(precision="tf32"), ROOFS)["mfu"] == 0.25


def test_without_a_peak_there_it_is_null_and_says_why():
    bf16 = mfu_fields(_train(precision="bf16"), ROOFS)
    assert bf16["mfu"] is None and bf16["mfu_reason"] == "no bf16 peak measured at t2"
    assert mfu_fields(_train(threads=1), ROOFS)["mfu_reason"] == "timed out"
    assert mfu_fields(_train(threads=4), ROOFS)["mfu_reason"] == "no roofs measured at t4"


def test_only_training_cells_that_ran_are_given_one():
    """The network suite fills it once a run's cells are merged (plugin.Suite's merged)."""
    from xfbench.networks.plugin import NETWORKS

    infos = [_train(), _train(kind="infer"), _train(status="failed")]
    NETWORKS.merged(infos, {"roofs": ROOFS})  # the run's machine, its roofs in it
    assert infos[0]["mfu"] == 0.25 and "mfu" not in infos[1] and "mfu" not in infos[2]


def test_beside_it_the_mfu_over_the_datasheets_peak_as_palm_and_llmc_count_it():
    """On a GPU of a listed model, the model's FLOPs over the datasheet's dense peak: a
    transformer's counted a token as llm.c counts them (6N + 6LCT causal, 12LCT
    bidirectional), which GPT-2 small's three forwards at 1024 tokens stand 6 % above;
    another network's are its three forwards; the CPU has no datasheet."""
    from xfbench.models import get_spec
    from xfbench.roofline.mfu import datasheet_fields, model_flops

    spec = get_spec("gpt2", "full")
    n = spec.param_count
    step = 8 * 1024 * (6 * n + 6 * 12 * 768 * 1024)
    gpt2 = _train(device="cuda:0", device_name="NVIDIA H100 80GB HBM3", precision="bf16",
                  network="gpt2", scale="full", tokens=1024, batch_size=8,
                  flops_per_step=3 * 2 * 8 * 1024 * n * 1.064, seconds_per_batch=step / 989e12 / 0.5)  # fmt: skip
    found = datasheet_fields(gpt2)
    assert abs(found["mfu_datasheet"] - 0.5) < 1e-9 and found["mfu_datasheet_peak_tflops"] == 989.0
    assert "6N + 6LCT" in found["mfu_datasheet_flops"] and "causal" in found["mfu_datasheet_flops"]
    bert = model_flops({"network": "bert_base", "scale": "full", "tokens": 128, "batch_size": 1})
    assert "6N + 12LCT" in bert[1] and "causal" not in bert[1]
    resnet = _train(device="cuda:0", device_name="NVIDIA H200", precision="bf16",
                    network="resnet50", scale="full", batch_size=256,
                    flops_per_step=989e12 * 0.25, seconds_per_batch=1.0)  # fmt: skip
    assert datasheet_fields(resnet)["mfu_datasheet"] == 0.25
    assert datasheet_fields(_train())["mfu_datasheet"] is None  # the CPU
    unknown = _train(device="cuda:0", device_name="NVIDIA H100 NVL", seconds_per_batch=1.0)
    assert datasheet_fields(unknown)["mfu_datasheet"] is None
