"""Why a machine is fast or slow: each network's layers from its spec (profile.py), the
machine's measured memory bandwidth and peak FLOP/s (roofs.py), and each cell on the
roofline they make (docs/measurement.md, The roofline)."""
