"""Result bundles and the results database (docs/records.md).

A bundle is one file holding one run's folder as it was (records, every round, LoadGen's
logs), the environment it ran in and the content hashes of its model files, checked on
reading (pack.py, read.py). `xfbench collect` merges bundles into one SQLite database
(database.py), which `xfbench report`, `score` and `compare` read as they read folders.
"""
