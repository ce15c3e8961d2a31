"""TensorFlow on a TPU: finding the TPU system and a TPUStrategy over one of its cores.

A tpu:N cell runs on TPU core N alone (TensorFlow's /TPU:N): a TPUStrategy whose device
assignment has one replica of one core, that core. Written to TensorFlow 2.21's documented
API (TPUClusterResolver, experimental_connect_to_cluster, initialize_tpu_system,
DeviceAssignment, TPUStrategy) and never run on a TPU.

TensorFlow lists TPUs only after it has connected to them and initialised the TPU system.
On an ordinary machine that start fails, or waits on Google Cloud's metadata service, so
TensorFlow is asked only where a TPU can be (target()), at most once per process.

Nothing here imports tensorflow: each function is given the module, so that listing the
adapter starts no runtime and tests can hand in a stand-in.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from xfbench import machine
from xfbench.errors import CannotRun

# The precisions a TPU cell runs: bf16 is the TPU's half type; fp16 has no fast path there
# (tf32 and fp64 are refused for every accelerator but their own, in Adapter.check).
PRECISIONS = ("fp32", "bf16")
# Under TPUStrategy the TPU compiles the whole step with XLA, whatever the tf.function
# asks: of TensorFlow's modes only "xla" says what runs.
MODE = "xla"


def target() -> str | None:
    """What TPUClusterResolver is asked for: "local" where TPU chips are attached to this
    machine (a TPU VM), else the TPU that TPU_NAME names (one reached over the network),
    else None: no TPU can be here, and TensorFlow is not asked."""
    if machine.tpu_chip_count():
        return "local"
    return os.environ.get("TPU_NAME") or None


@dataclass(frozen=True)
class TpuSystem:
    """The TPU system this process connected to and initialised."""

    resolver: Any  # tf.distribute.cluster_resolver.TPUClusterResolver
    topology: Any  # tf.tpu.experimental.Topology, as initialize_tpu_system returned it
    cores: int  # TPU cores TensorFlow lists once initialised: tpu:0 ... tpu:cores-1


# What connect() found in this process: None until it is called, then the TpuSystem, or a
# str saying why there is none. Initialising the TPU system again would drop every
# variable on it, so it is started once and kept.
_found: TpuSystem | str | None = None


def connect(tf) -> TpuSystem | None:
    """The TPU system, connected and initialised on the first call; None when there is
    none here (failure() says why)."""
    global _found
    if _found is None:
        _found = _start(tf, target())
    return _found if isinstance(_found, TpuSystem) else None


def failure() -> str | None:
    """Why connect() found no TPU system; None before it was called or when it found one."""
    return _found if isinstance(_found, str) else None


def _start(tf, where: str | None) -> TpuSystem | str:
    if where is None:
        return "no TPU here (no /dev/accel* device, TPU_NAME not set)"
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=where)
        tf.config.experimental_connect_to_cluster(resolver)
        topology = tf.tpu.experimental.initialize_tpu_system(resolver)
    except Exception as e:  # TensorFlow's errors differ by cause; each means no TPU to use
        first = (str(e).strip().splitlines() or [""])[0][:200]
        return f"TensorFlow could not start the TPU {where!r}: {type(e).__name__}: {first}"
    return TpuSystem(resolver, topology, len(tf.config.list_logical_devices("TPU")))


def core_count(tf) -> int:
    """TPU cores TensorFlow can use here (0 without asking it where no TPU can be)."""
    system = connect(tf)
    return system.cores if system else 0


def device_assignment(tf, topology, core: int):
    """One replica of one logical core, placed on TPU core `core` of the first host (on a
    TPU VM, the only one). DeviceAssignment.build places a replica at the mesh's origin, so
    the core is named by its coordinates in the topology instead."""
    per_host = topology.num_tpus_per_task
    if not 0 <= core < per_host:
        raise CannotRun(f"tpu:{core} is not present (TensorFlow's TPU host has {per_host} cores)")
    coordinates = np.asarray(topology.device_coordinates[0, core], dtype=np.int32)
    # [replicas, cores per replica, mesh axes]
    return tf.tpu.experimental.DeviceAssignment(topology, coordinates.reshape(1, 1, -1))


def one_core_strategy(tf, core: int):
    """(TPUStrategy over TPU core `core` alone, facts for the record). Connects to the TPU
    system first if this process has not."""
    system = connect(tf)
    if system is None:
        raise CannotRun(failure())
    assignment = device_assignment(tf, system.topology, core)
    strategy = tf.distribute.TPUStrategy(system.resolver, experimental_device_assignment=assignment)
    facts = {
        "tpu_cores": system.cores,
        "tpu_mesh_shape": "x".join(str(int(n)) for n in system.topology.mesh_shape),
        "tpu_core_coordinates": [int(c) for c in assignment.core_assignment[0, 0]],
    }
    return strategy, facts
