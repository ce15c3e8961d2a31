#!/usr/bin/env bash
# One GPU window (docs/gpus.md): exactly what is sent to a lent GPU machine, from the
# checkout's root, with nothing installed there:
#   bash gpu/window.sh                  # the next part for this GPU model: at most 9 minutes
#   bash gpu/window.sh --part table7    # a part by name
# With no --part it runs the first part of the plan that the checked-in references of this
# GPU model do not hold (xfbench/acceptance/plan.py), and its first line says which and why.
# Any option of `xfbench acceptance` may follow and overrides those below (the rehearsal,
# tests/test_gpu_window.py, adds --device cpu --preset smoke). What comes back is $OUT:
# summary.md and acceptance.tar.gz, each rewritten after every step, and console.log, so a
# run cut off at its time limit still returns every step that finished. Its output ends
# with the summary.
set -uo pipefail
cd "$(dirname "$0")/.."
back=${OUT:-results/gpu-window}
mkdir -p "$back"
export PYTHONPATH=".${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
# LoadGen (the serving parts) where the machine lacks it: its wheel for this Python, carried
# in gpu/wheels/, unpacked onto the path (a wheel is a zip file; nothing is installed).
if ! python3 -c "import mlperf_loadgen" 2>/dev/null; then
    tag=$(python3 -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
    for wheel in gpu/wheels/mlcommons_loadgen-*-"$tag"-*.whl; do
        [ -f "$wheel" ] && python3 -m zipfile -e "$wheel" .gpu-site && export PYTHONPATH=".gpu-site:$PYTHONPATH"
    done
fi
python3 -m xfbench.harness.cli acceptance --part next --device cuda:0 --preset quick \
    --out results/acceptance --pack "$back" "$@" 2>&1 | tee "$back/console.log"
