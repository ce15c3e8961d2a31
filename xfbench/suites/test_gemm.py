"""GEMM: C = A @ B through raw CuPy (cuBLAS), each framework's matmul and NumPy's BLAS,
in TFLOP/s, share of the device's datasheet peak and share of the best implementation.

Shapes: squares 1024 to 16384 (skipped with the reason where the three matrices
would not fit in free memory), and four fully connected layers, in x out =
576x1024, 1024x4096, 2304x16000 and 4096x11008 (after Raina et al. 2009), run
as (batch x in) @ (in x out) with batch 4096: large enough that the smallest
layer keeps a current GPU busy, so the figure is the GEMM engine's, not launch
overhead's. The smoke preset uses squares 256 and 512 and batch 16.
Selection: --gemm-impl, --gemm-sizes, and the common --precision, --device,
--threads, --preset (see gemm/plugin.py). How a cell is timed: gemm/measure.py.
"""

TASK = "gemm"


def test_gemm(run_gemm, gemm_cell):
    run_gemm(gemm_cell)
