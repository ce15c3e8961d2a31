"""The sweep runner: every (framework, device, threads) group in a fresh process, results kept cell by cell."""
