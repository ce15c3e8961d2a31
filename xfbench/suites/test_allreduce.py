"""All-reduce bandwidth: torch.distributed (Gloo on CPU, NCCL on GPUs) and jax.lax.psum.

One test per framework, device and world size
(`test_allreduce[torch-cpu-n2]`); each runs every message size through each
pattern (allreduce.FRAMEWORK_PATTERNS: the all-reduce, torch's reduce to rank 0
then broadcast, and the literal parameter server), in worker processes
(allreduce/launch.py), checking every result. It records one
pytest-benchmark entry whose extra_info is {"kind": "allreduce", ..., "rows":
[one per pattern and size: seconds, algbw_gbps, busbw_gbps, correct, ...]} and
whose stats are the per-operation times of the largest all-reduce.

Options: --world-sizes, --allreduce-sizes, --framework torch,jax, --device, --preset
(see allreduce/plugin.py). The suite runs only when this file is named on the
command line (`pytest xfbench/suites/test_allreduce.py`): a plain `pytest xfbench/suites/` is the
single-device benchmark run.
"""

from __future__ import annotations


def test_allreduce(allreduce_case, run_allreduce):
    record = run_allreduce(allreduce_case)
    wrong = [r for r in record["rows"] if not r["correct"]]
    assert not wrong, "; ".join(f"{r['pattern']} {r['bytes']} B: {r.get('reason')}" for r in wrong)
