"""The GPU acceptance run: `xfbench acceptance`.

One command that, on a machine with an NVIDIA GPU, probes the machine and runs the steps
that show the suite works there and what it measures: the GEMM at 8192 beside the
published cuBLAS figures, ResNet-50 training at batch 256 beside the published H100
figures, Table 7's GPU column, the GPU tests, and NCCL all-reduce and DDP on one GPU.
Each step is a child process under its own time-out, all of them under one time budget;
a step that fails or runs out of time never stops the others; the run ends with a
summary and one archive of everything it wrote (docs/gpus.md).

The steps are data (steps.py), run by run.py; summary.py reads what they wrote.
"""
