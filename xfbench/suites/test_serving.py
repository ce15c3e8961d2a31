"""Serving: MLPerf's LoadGen drives each framework's inference through its four scenarios.

A cell is an inference cell (network, framework, mode, precision, device, threads, largest
batch) under one scenario: SingleStream (p90 latency of batch-1 queries), MultiStream (p99
of 8-sample queries), Server (the highest Poisson arrival rate whose p99 meets the
network's latency bound, searched) and Offline (samples/s). Every number is LoadGen's,
read from its log, which stays in the cell's folder; the pytest-benchmark entry's one
round is the whole LoadGen run. Selection: the common options, --scenario and
--latency-bound (xfbench/serving/, docs/serving.md). Runs only when this file is named.
"""

TASK = "serve"


def test_serve(run_serving, serving_cell):
    run_serving(serving_cell)
