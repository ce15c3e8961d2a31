"""A toy suite, in its own package, declared in one line (PYTEST_PLUGINS=toy_suite.plugin):
what adding a suite to xfbench takes, held by tests/test_toy_suite.py."""
