"""The toy suite's pytest file (not named test_*.py: collected only where its suite runs it)."""


def test_toy(run_toy, toy_cell):
    run_toy(toy_cell)
