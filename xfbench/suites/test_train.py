"""Training: one step = forward, mean cross-entropy, backward, SGD momentum update."""

TASK = "train"


def test_train(run_cell, cell):
    run_cell(cell)
