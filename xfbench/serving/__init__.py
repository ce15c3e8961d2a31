"""Serving: MLPerf's LoadGen drives each framework's inference through its scenarios
(suites/test_serving.py, `xfbench run --suite serving`, docs/serving.md)."""
