"""Data-parallel scaling: each cell launches its workers (scaling/launch.py) and records
the step time of the global batch, samples/s, and (at session end) speedup and efficiency
over one worker, beside the share of the step spent communicating where the framework
exposes it. Options and defaults: scaling/plugin.py. Runs only when named:

    pytest xfbench/suites/test_scaling.py --framework torch,jax --model resnet56 --workers 1,2
"""


def test_scaling(scaling_cell, run_scaling):
    run_scaling(scaling_cell)
