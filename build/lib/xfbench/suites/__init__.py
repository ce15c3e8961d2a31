"""The benchmark suites, run by pytest: `pytest --pyargs xfbench.suites ...` or
`pytest xfbench/suites/...` in a checkout (the `xfbench` plugin gives their options)."""
