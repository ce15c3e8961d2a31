"""The GEMM suite: one matrix product, C = A @ B, timed the way accelerator people trust.

Raw CuPy (cuBLAS) is the GPU baseline and NumPy's BLAS the CPU one; each framework's
own matmul is measured beside them: torch.matmul, jax.numpy.matmul (jitted),
tf.linalg.matmul and ONNX Runtime's MatMul. Every implementation lives in a module
of its own under gemm/impls/ that imports only its own framework, and only inside
its methods, so listing implementations never starts a runtime.
"""

from __future__ import annotations

import importlib

from xfbench.frameworks import FRAMEWORKS

# --gemm-impl value -> module holding an `IMPL` instance.
IMPLS: dict[str, str] = {
    "cupy": "xfbench.gemm.impls.cupy_matmul",
    "torch": "xfbench.gemm.impls.torch_matmul",
    "jax": "xfbench.gemm.impls.jax_matmul",
    "tensorflow": "xfbench.gemm.impls.tf_matmul",
    "onnxruntime": "xfbench.gemm.impls.ort_matmul",
    "numpy": "xfbench.gemm.impls.numpy_matmul",
}

# Each framework's GEMM implementation (a key of IMPLS), where it has one.
OWN_IMPL = {
    "torch": "torch",
    "jax": "jax",
    "tensorflow": "tensorflow",
    "onnxruntime": "onnxruntime",
}

# --framework names (the network suites', and their aliases) -> the GEMM implementation of
# that framework; CuPy and NumPy are GEMM implementations only, named as themselves.
FRAMEWORK_IMPL = {
    **{name: impl for fw, impl in OWN_IMPL.items() for name in (fw, *FRAMEWORKS[fw].aliases)},
    "cupy": "cupy",
    "numpy": "numpy",
}

# Operand types. tf32 is fp32 storage with TF32 tensor-core products; fp8 is e4m3 operands
# with a bf16 result, through torch._scaled_mm only.
DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8")


def get_impl(name: str):
    if name not in IMPLS:
        raise KeyError(f"unknown GEMM implementation {name!r}; known: {', '.join(IMPLS)}")
    return importlib.import_module(IMPLS[name]).IMPL
