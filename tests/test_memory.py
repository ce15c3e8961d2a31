"""Host memory: the per-cell peak, and the allocator kept from unmapping freed memory."""

import subprocess
import sys
import textwrap

from xfbench.harness.memory import peak_rss_bytes, reset_peak_rss

CHURN = textwrap.dedent("""
    import resource, sys
    import numpy as np
    from xfbench.harness import memory
    print(memory.keep_freed_memory())
    n = 200_000_000
    for i in range(6):  # free and reallocate 200 MB, as a framework does with its gradients
        if i == 2:
            before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        a = bytearray(n)                       # malloc'd, every page written below
        a[::4096] = bytes(len(range(0, n, 4096)))
        del a
    print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
""")


def churn(env_extra):
    import os

    env = {**os.environ, **env_extra}
    out = subprocess.run(
        [sys.executable, "-c", CHURN], capture_output=True, text=True, env=env, check=True
    ).stdout.split("\n")
    return out[0], int(out[1])


def test_freed_memory_is_reused_without_page_faults():
    setting, faults = churn({})
    assert setting == "glibc: no mmap, no trim"
    assert faults < 1000  # four 200 MB allocations, served from memory already mapped
    setting, faults = churn({"XFBENCH_MALLOC": "default"})
    assert setting.startswith("glibc default")
    assert faults > 100_000  # glibc's default maps each one afresh: ~49,000 faults apiece


def test_peak_rss_resets_per_cell():
    import pytest

    if not reset_peak_rss():
        pytest.skip("this kernel does not let a process reset its peak RSS")
    start = peak_rss_bytes()
    big = bytearray(300_000_000)
    big[::4096] = bytes(len(range(0, len(big), 4096)))
    assert peak_rss_bytes() - start > 150_000_000
    high = peak_rss_bytes()
    del big
    reset_peak_rss()
    assert peak_rss_bytes() <= high  # a new peak starts from the RSS now, not the old peak
