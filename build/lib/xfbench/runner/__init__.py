"""The sweep runner: each (framework, device, threads) group in a fresh process,
results kept cell by cell so that nothing is lost and an interrupted sweep resumes."""
