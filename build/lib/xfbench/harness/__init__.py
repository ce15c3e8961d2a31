"""The measurement harness: selection, threads, timing and records, shared by every framework."""
