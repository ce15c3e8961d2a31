"""Before any test module imports TensorFlow (pytest.importorskip does, at collection):
TensorFlow reads its oneDNN switch once, when it starts, and the tests must see the
runtime the suite's cells run (xfbench.adapters.tensorflow sets it)."""

import xfbench.adapters.tensorflow  # noqa: F401
