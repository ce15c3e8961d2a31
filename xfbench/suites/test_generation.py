"""Token generation: GPT-2 decodes B prompts of ISL tokens into OSL new ones, greedily,
with a key/value cache allocated once, in every framework.

A cell is (framework, mode, precision, device, threads, batch, ISL/OSL). Its first
generation compiles (timed apart) and its tokens are checked against the canonical
function in float64; then each timed round is one whole generation, the prefill (TTFT)
and every decode step (TPOT, the gaps) timed inside it. Selection: the common options,
--lengths and --batch-size (xfbench/generation/, docs/generation.md). Runs only when this
file is named.
"""

TASK = "generate"


def test_generate(run_generation, generation_cell):
    run_generation(generation_cell)
