#!/usr/bin/env bash
# One run of the reference preset into one results folder: the train/infer cells, the
# serving suite's Offline scenario and the generation suite (each framework's fastest
# generating mode), at the given thread count. docs/reports.md says how the checked-in
# reference was made from such runs.
#   bash benchmarks/reference_run.sh RESULTS_DIR [THREADS]
set -euo pipefail
out=${1:?usage: reference_run.sh RESULTS_DIR [THREADS]}
threads=${2:-2}
xfbench=${XFBENCH:-xfbench}
common=(--preset reference --threads "$threads" --results "$out" --quiet)
"$xfbench" run "${common[@]}"
"$xfbench" run --suite serving --scenario Offline --skip-roofs "${common[@]}"
"$xfbench" run --suite generation --mode compile,jit,xla,cpu --skip-roofs "${common[@]}"
