"""Token generation: GPT-2's greedy decoding with a key/value cache, prefill and each
decode step timed apart, in every framework (suites/test_generation.py, `xfbench run
--suite generation`, docs/generation.md)."""
