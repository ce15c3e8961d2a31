"""One module per GEMM implementation; each imports only its own framework, inside methods."""
