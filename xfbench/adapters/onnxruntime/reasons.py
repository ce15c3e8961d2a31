"""Why an ONNX Runtime cell cannot run here, in one line each: the adapter checks a cell
with them before anything is built, and the workload guards with the same words."""

TRAIN_REASON = (
    "ONNX Runtime here runs inference only: training needs onnxruntime-training's "
    "separate runtime and artifacts, which this suite does not measure"
)
HALF_REASON = (
    "ONNX Runtime runs fp32 (and tf32 on CUDA) here: fp16/bf16 would need a converted "
    "model, which this suite does not make"
)
