"""Token serving: MLPerf's LoadGen, in its token mode, drives GPT-2's generation in each
framework through SingleStream, Server and Offline.

A cell is a generation cell (framework, mode, precision, device, threads, largest batch,
ISL/OSL) under one scenario. Its generators (one per batch size the scenario runs) are
compiled, their tokens checked against the canonical function in float64 and warmed
before LoadGen starts; the SUT reports each sample's first token the moment its batch's
prefill returns it, and completes the sample with all its tokens. Every number is
LoadGen's: SingleStream's p90 TTFT and TPOT, Server's highest Poisson rate whose p99
TTFT and p99 TPOT meet the bounds (searched, then confirmed over enough queries for
LoadGen's early stopping), Offline's tokens/s. Selection: the common options,
--scenario, --lengths (one pair), --batch-size (the largest), --ttft-bound and
--tpot-bound (xfbench/token_serving/, docs/token-serving.md). Runs only when this file is
named.
"""

TASK = "serve-tokens"


def test_serve_tokens(run_token_serving, token_serving_cell):
    run_token_serving(token_serving_cell)
