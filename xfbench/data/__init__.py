"""Real data: readers for MNIST, CIFAR-10, PTB and folders of JPEGs (readers.py), which
network trains on which and one sample as the pipelines get it (sources.py), and
`xfbench data check` (check.py). The input pipelines themselves are each framework's own,
in its adapter (adapters/<framework>/input_pipeline.py)."""
