"""Table 7's network suite (the train/infer cells of the FCNs, AlexNet, the ResNets, the
LSTMs and the transformers, each on one device, and their equivalence checks): what it
declares in its package, as every suite does: its `Suite` and options (plugin.py), its record
fields (fields.py) and its steps of the GPU plan (gpu_steps.py).
"""
