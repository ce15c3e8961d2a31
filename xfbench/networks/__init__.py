"""Table 7's network suite (the train/infer cells of the FCNs, AlexNet, the ResNets, the
LSTMs and the transformers, each on one device, and their equivalence checks): what it
declares beside its `Suite` in xfbench/plugin.py, as every suite declares in its package.
"""
