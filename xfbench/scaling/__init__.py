"""Data-parallel training over several workers, on each framework's own engine.

cell.py     ScalingCell, the one expansion of a selection into cells, and the one command
            line every worker takes;
protocol.py the measuring sequence every worker runs, given its framework's hooks;
launch.py   the command that starts a cell's workers, and running it;
torch_ddp.py, jax_sharding.py, tensorflow_mirrored.py   the workers;
result.py   what every worker writes (the worker JSON) and the step timing;
plugin.py   the suite's cells, fixture and end-of-session speedup table.

Importing this package imports no framework.
"""

from xfbench import environment

# The CPUs a scaling cell's workers share out, set for them by the suite.
SCALING_CPUS = environment.declare(
    environment.Variable(
        name="XFBENCH_SCALING_CPUS",
        meaning="the CPUs, comma-separated, that a scaling cell's workers share out",
        who="xfbench",
        check=environment.cpu_list,
    )
)
