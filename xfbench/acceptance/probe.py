"""The acceptance run's first step: what the machine is and what each framework sees on
it, printed and written to OUT/probe.json. It runs as a child
(`python -m xfbench.acceptance.probe OUT`), so that no framework starts in the run's own
process (JAX would take most of the GPU's memory there for the whole run).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from xfbench import machine
from xfbench.adapters import get_adapter
from xfbench.frameworks import FRAMEWORKS
from xfbench.plugin import declared

SMI_FIELDS = "name,uuid,driver_version,memory.total,clocks.max.sm,power.limit,persistence_mode"


def _nvidia_smi() -> str | None:
    if not shutil.which("nvidia-smi"):
        return None
    done = subprocess.run(
        ["nvidia-smi", f"--query-gpu={SMI_FIELDS}", "--format=csv"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    return (done.stdout or done.stderr).strip()


def _sees(thing) -> dict:
    """Its versions and devices, or the one line that says why it cannot tell."""
    try:
        return {"versions": thing.versions(), "devices": thing.devices()}
    except Exception as e:  # not installed, no driver: the probe reports, never stops
        return {"error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"}


def probe() -> dict:
    found = {"machine": machine.describe(), "nvidia_smi": _nvidia_smi(), "frameworks": {}}
    for name, framework in FRAMEWORKS.items():
        if framework.default:
            found["frameworks"][name] = _sees(get_adapter(name))
    for suite in declared().values():  # what a suite measures with beside the frameworks
        for name, thing in (suite.gpu.probes if suite.gpu else {}).items():
            found["frameworks"][name] = _sees(thing())
    return found


def main(argv: list[str]) -> int:
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    found = probe()
    if argv:
        Path(argv[0]).write_text(json.dumps(found, indent=1, default=str))
    m = found["machine"]
    print(f"CPU: {m['cpu_model']}, {m['cpus_allowed']} CPUs allowed, Python {m['python']}")
    for gpu in m["gpus"] or [{"name": "no NVIDIA GPU seen by NVML"}]:
        print("GPU:", ", ".join(f"{k} {v}" for k, v in gpu.items()))
    if found["nvidia_smi"]:
        print(found["nvidia_smi"])
    for name, seen in found["frameworks"].items():
        if "error" in seen:
            print(f"{name}: {seen['error']}")
        else:
            versions = ", ".join(f"{k} {v}" for k, v in seen["versions"].items())
            print(f"{name}: {versions}; devices {', '.join(seen['devices'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
