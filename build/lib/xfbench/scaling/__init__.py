"""Data-parallel training over several workers, on each framework's own engine.

cell.py     ScalingCell and the one command line every worker takes;
launch.py   the command that starts a cell's workers, and running it;
torch_ddp.py, jax_sharding.py, tensorflow_mirrored.py   the workers;
result.py   what every worker writes (the worker JSON) and the step timing;
plugin.py   the pytest options and the end-of-session speedup table.

Importing this package imports no framework.
"""
