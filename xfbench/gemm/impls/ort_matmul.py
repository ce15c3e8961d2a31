"""ONNX Runtime's MatMul: a one-node ONNX model, on the CPU and CUDA providers.

The model is written with onnx.helper at IR version 10 and opset 21, which
onnxruntime 1.31 accepts (the newest onnx writes versions it rejects). Threads:
intra_op_num_threads = the process's threads, inter_op = 1 (ONNX Runtime ignores
the OMP variables). TF32 is the CUDA provider's use_tf32 option. A cell is
skipped, not run some other way, when ONNX Runtime would not run one MatMul in
the asked type on the asked device: the optimized graph must be that one MatMul
(on the CPU, float16 would otherwise get casts to float32 inserted around it),
and on a GPU the CPU fallback is disabled. Inputs and output stay on the device
(I/O binding); each run returns when the device has finished, so the timer is
the wall clock.
"""

from __future__ import annotations

import os
import tempfile

import numpy as np

from xfbench.errors import CannotRun
from xfbench.gemm.impls.base import GemmImpl, WallTimer, gpu_index

IR_VERSION = 10
OPSET = 21
# ONNX TensorProto element types (FLOAT, FLOAT16, BFLOAT16), spelled out so that
# listing this module needs no onnx import.
ELEM = {"fp32": 1, "tf32": 1, "fp16": 10, "bf16": 16}


def matmul_model(m: int, n: int, k: int, elem_type: int) -> bytes:
    from onnx import helper

    graph = helper.make_graph(
        [helper.make_node("MatMul", ["A", "B"], ["C"])],
        "gemm",
        [
            helper.make_tensor_value_info("A", elem_type, [m, k]),
            helper.make_tensor_value_info("B", elem_type, [k, n]),
        ],
        [helper.make_tensor_value_info("C", elem_type, [m, n])],
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        ir_version=IR_VERSION,
        producer_name="xfbench",
    )
    return model.SerializeToString()


def _bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 values that bfloat16 holds exactly -> their bfloat16 bit patterns."""
    return (np.ascontiguousarray(x, dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16)


class OrtMatmul(GemmImpl):
    name = "onnxruntime"
    package = "onnxruntime"
    call = "onnxruntime MatMul"

    def __init__(self):
        self.threads = None
        self.session = None
        self.bindings = {}
        self.last_io = None

    def versions(self):
        import onnx
        import onnxruntime as ort

        return {
            "onnxruntime": ort.__version__,
            "onnx": onnx.__version__,
            "model": f"ir{IR_VERSION}-opset{OPSET}",
        }

    def devices(self):
        import onnxruntime as ort

        if "CUDAExecutionProvider" not in ort.get_available_providers():
            return ["cpu"]
        from xfbench.machine import gpu_count

        return ["cpu"] + [f"cuda:{i}" for i in range(gpu_count())]

    def configure_threads(self, threads):
        self.threads = threads
        return {"intra_op_num_threads": threads, "inter_op_num_threads": 1}

    def device_name(self, device):
        if device == "cpu":
            return "cpu"
        from xfbench.machine import gpus

        return gpus()[gpu_index(device)]["name"]

    def prepare(self, dtype, device):
        self.dtype, self.device = dtype, device
        self.session = None  # built at the first load, when the shape is known
        return {
            "tf32_mode": (
                f"CUDAExecutionProvider use_tf32={int(dtype == 'tf32')}"
                if device.startswith("cuda")
                else "n/a (cpu)"
            )
        }

    def _session(self, m, n, k):
        import onnx
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.log_severity_level = 3
        if self.threads:
            so.intra_op_num_threads = self.threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        if self.device == "cpu":
            providers = ["CPUExecutionProvider"]
        else:
            so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
            providers = [
                (
                    "CUDAExecutionProvider",
                    {
                        "device_id": str(gpu_index(self.device)),
                        "use_tf32": str(int(self.dtype == "tf32")),
                    },
                )
            ]
        with tempfile.TemporaryDirectory() as tmp:
            so.optimized_model_filepath = os.path.join(tmp, "optimized.onnx")
            try:
                session = ort.InferenceSession(
                    matmul_model(m, n, k, ELEM[self.dtype]), so, providers=providers
                )
            except Exception as e:
                raise CannotRun(
                    f"ONNX Runtime cannot run a {self.dtype} MatMul on {self.device}: "
                    f"{str(e).splitlines()[0][:200]}"
                ) from e
            ops = [node.op_type for node in onnx.load(so.optimized_model_filepath).graph.node]
        if ops != ["MatMul"]:
            raise CannotRun(
                f"ONNX Runtime has no {self.dtype} MatMul kernel on {self.device}: "
                f"it would run {' + '.join(ops)} instead"
            )
        if self.device != "cpu" and session.get_providers()[0] != "CUDAExecutionProvider":
            raise CannotRun(f"ONNX Runtime did not put the MatMul on {self.device}")
        return session

    def load(self, x, role, dtype, device):
        import onnxruntime as ort

        if role == "a":
            self._a_shape = x.shape
        elif self.session is None:
            (m, k), n = self._a_shape, x.shape[1]
            self.session = self._session(m, n, k)
        if dtype == "bf16":
            value = ort.OrtValue.ortvalue_from_numpy_with_onnx_type(_bf16_bits(x), ELEM[dtype])
        else:
            host = np.ascontiguousarray(x, dtype=np.float16 if dtype == "fp16" else np.float32)
            value = ort.OrtValue.ortvalue_from_numpy(host)
        if device == "cpu":
            return value
        on_gpu = ort.OrtValue.ortvalue_from_shape_and_type(
            list(x.shape), ELEM[dtype], "cuda", gpu_index(device)
        )
        on_gpu.update_inplace(value)  # host -> device, once, outside the timer
        return on_gpu

    def matmul(self, a, b):
        # One binding per input set, made once: binding is bookkeeping, not the product.
        io = self.bindings.get((id(a), id(b)))
        if io is None:
            io = self.session.io_binding()
            io.bind_ortvalue_input("A", a)
            io.bind_ortvalue_input("B", b)
            if self.device == "cpu":
                io.bind_output("C")
            else:
                io.bind_output("C", "cuda", gpu_index(self.device))
            self.bindings[(id(a), id(b))] = io
        self.session.run_with_iobinding(io)
        self.last_io = io
        return io.get_outputs()[0]

    def fetch(self, c, rows, cols):
        out = c.numpy() if self.device == "cpu" else self.last_io.copy_outputs_to_cpu()[0]
        if out.dtype == np.uint16:  # bfloat16 bit patterns
            out = (out.astype(np.uint32) << 16).view(np.float32)
        return out[np.ix_(rows, cols)].astype(np.float64)

    def placed_on(self, c):
        name = c.device_name().lower()
        return "cpu" if name == "cpu" else f"cuda:{gpu_index(self.device)}"

    def timer(self, device):
        if device == "cpu":
            return WallTimer()
        # Run returns when the CUDA provider has finished; synchronising the outputs is
        # the documented guarantee.
        return WallTimer(lambda last: self.last_io.synchronize_outputs())

    def release(self):
        self.session, self.bindings, self.last_io = None, {}, None


IMPL = OrtMatmul()
