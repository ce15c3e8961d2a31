"""Each training cell's MFU against the peak its run measured where it ran
(xfbench/roofline/mfu.py), or null with the reason."""

from xfbench.roofline.mfu import fill_mfu, mfu_fields

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
    infos = [_train(), _train(kind="infer"), _train(status="failed")]
    fill_mfu(infos, ROOFS)
    assert infos[0]["mfu"] == 0.25 and "mfu" not in infos[1] and "mfu" not in infos[2]
