"""xfbench: the same networks in PyTorch, TensorFlow, JAX and ONNX Runtime, timed the same
way, as a pytest-benchmark suite. Importing it imports no framework."""

__version__ = "0.1.0"  # the one place it is stated: pyproject.toml reads it
