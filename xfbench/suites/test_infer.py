"""Inference: one step = forward in evaluation mode (BatchNorm on running statistics)."""

TASK = "infer"


def test_infer(run_cell, cell):
    run_cell(cell)
