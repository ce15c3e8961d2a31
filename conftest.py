"""In a checkout, pytest loads xfbench's plugin from here even where xfbench is not
installed (PYTHONPATH=. on a machine without pip access); installed, its pytest11
entry point has loaded the same module already, and this line does nothing."""

pytest_plugins = ("xfbench.plugin",)
