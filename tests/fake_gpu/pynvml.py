"""A stand-in for nvidia-ml-py's pynvml: NVML reporting one NVIDIA GPU that no framework
can use. Put this folder first on PYTHONPATH to see what the suite does on a machine with
a GPU: default devices gain cuda:0, and its cells must be skipped with a reason (the
frameworks here are CPU builds), never fail or shift the CPU cells' results."""

import os

NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0
# FAKE_NVML_NAME names the GPU exactly as a real one's NVML does (the plan's choice of the
# next part looks references up by it); by default a name no reference or datasheet has
NAME = os.environ.get("FAKE_NVML_NAME", "NVIDIA H100 80GB HBM3 (fake NVML)")
_UUIDS = ["GPU-00000000-fake-0000-0000-000000000000"]


class NVMLError(Exception):
    pass


class _Memory:
    total, free, used = 80 * 2**30, 79 * 2**30, 2**30


def nvmlInit():
    pass


def nvmlShutdown():
    pass


def nvmlDeviceGetCount():
    return len(_UUIDS)


def nvmlDeviceGetHandleByIndex(index):
    if not 0 <= int(index) < len(_UUIDS):
        raise NVMLError("Not Found")
    return int(index)


def nvmlDeviceGetHandleByUUID(uuid):
    if uuid not in _UUIDS:
        raise NVMLError("Not Found")
    return _UUIDS.index(uuid)


def nvmlDeviceGetUUID(handle):
    return _UUIDS[handle]


def nvmlDeviceGetName(handle):
    return NAME


def nvmlDeviceGetMemoryInfo(handle):
    return _Memory()


def nvmlSystemGetDriverVersion():
    return "580.00.00"


def nvmlSystemGetCudaDriverVersion():
    return 13000


def nvmlDeviceGetTotalEnergyConsumption(handle):
    raise NVMLError("Not Supported")


def nvmlDeviceGetPowerUsage(handle):
    raise NVMLError("Not Supported")


def nvmlDeviceGetClockInfo(handle, clock):
    raise NVMLError("Not Supported")


def nvmlDeviceGetTemperature(handle, sensor):
    raise NVMLError("Not Supported")


def nvmlDeviceGetEnforcedPowerLimit(handle):
    raise NVMLError("Not Supported")


def nvmlDeviceGetCurrentClocksEventReasons(handle):
    raise NVMLError("Not Supported")
