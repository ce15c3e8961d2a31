"""Energy over the timed rounds, measured, or a record that says why it was not.

Around exactly the rounds CpuMeter watches, EnergyMeter reads the counters the hardware
keeps:
- a GPU cell: NVML's total-energy counter (millijoules since the driver loaded; Volta and
  later) before and after, "nvml-energy"; where the GPU has no such counter, its power
  sampled by a thread at SAMPLE_HZ and integrated (trapezoids), "nvml-power-sampling".
  The GPU's clocks, temperature, enforced power limit and throttle reasons are recorded at
  the start and the end: a GPU that throttled during the rounds says so.
- a CPU cell: RAPL through Linux's powercap (the package domains and their DRAM
  subdomains; AMD's RAPL is exposed under the same intel-rapl name), "rapl". The counter
  wraps at max_energy_range_uj; one wrap between two readings is undone. Package energy is
  the whole socket's: other processes on it count too (the record's other_cpu_share says
  how busy the machine was).
- otherwise "none", with the reason: no powercap domains (a virtual machine, or a CPU
  without RAPL), counters readable only by root (Linux 5.10 and later), no NVML.
Nothing here is ever a typed wattage.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

POWERCAP = Path("/sys/class/powercap")
SAMPLE_HZ = 20  # power samples per second where the GPU has no energy counter
# RAPL counters are read at least this often during the rounds: an AMD package's counter
# (max_energy_range_uj about 65.5 kJ) wraps in about 3 minutes at 360 W, and between two
# readings only one wrap can be undone.
POLL_S = 1.0

# NVML's clocks-event (throttle) reason bits, as nvml.h defines them
THROTTLE_REASONS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}


def throttle_names(mask: int) -> list[str]:
    """The reasons set in NVML's mask; a bit this table does not name is kept as its value."""
    names = [name for bit, name in THROTTLE_REASONS.items() if mask & bit]
    unknown = mask & ~sum(THROTTLE_REASONS)
    return names + [f"0x{1 << i:x}" for i in range(64) if unknown >> i & 1]


class RaplDomain:
    """One powercap zone: its name ("package-0", "dram"), energy_uj and wrap range."""

    def __init__(self, path: Path):
        self.path = path
        self.name = (path / "name").read_text().strip()
        self.range_uj = int((path / "max_energy_range_uj").read_text())

    @property
    def label(self) -> str:
        """package-0, or dram-0 for the DRAM of package 0 (two packages, two labels)."""
        if self.name.startswith("package"):
            return self.name
        return f"{self.name}-{self.path.name.split(':')[1]}"

    def read_uj(self) -> int:
        return int((self.path / "energy_uj").read_text())

    def delta_uj(self, start: int, end: int) -> int:
        """Energy between two readings, across one wrap of the counter (readings every
        POLL_S keep it to one wrap at most)."""
        return end - start if end >= start else end + self.range_uj - start


def rapl_domains(root: Path = POWERCAP) -> tuple[list[RaplDomain], str]:
    """(the package and DRAM domains whose counters can be read, "") or ([], why not)."""
    zones = sorted(p for p in root.glob("intel-rapl:*") if p.is_dir()) if root.is_dir() else []
    # top-level zones are packages (intel-rapl:0) or psys (the whole platform, packages
    # included: counting it too would count them twice); subzones (intel-rapl:0:1) hold
    # core, uncore and dram, and only dram is not already inside its package's count
    picked = []
    try:
        for zone in zones:
            domain = RaplDomain(zone)
            top = zone.name.count(":") == 1
            if (top and domain.name.startswith("package")) or (not top and domain.name == "dram"):
                domain.read_uj()  # raises PermissionError where only root may read
                picked.append(domain)
    except PermissionError:
        return (
            [],
            f"powercap energy counters under {root} are readable only by root (Linux >= 5.10)",
        )
    except (OSError, ValueError) as e:
        return [], f"powercap counters under {root} cannot be read ({type(e).__name__}: {e})"
    if not picked:
        return [], f"no RAPL domains under {root} (a virtual machine, or a CPU without RAPL)"
    return picked, ""


class EnergyMeter:
    """`with EnergyMeter(device) as e: <timed rounds>`, then e.fields(steps, batch)."""

    def __init__(
        self, device: str, powercap: Path = POWERCAP, nvml=None, handle=None, poll_s=POLL_S
    ):
        self.device = device
        self.powercap = powercap
        self.poll_s = poll_s  # None: no thread (tests call poll() themselves)
        self.domain_joules: dict[str, float] | None = None
        self._nvml, self._handle = nvml, handle
        self.method, self.reason = "none", ""
        self.domains: list[RaplDomain] = []
        self.joules: float | None = None
        self.gpu_start: dict | None = None
        self.gpu_end: dict | None = None
        self._samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- choosing the method ---------------------------------------------------------
    def _gpu(self) -> bool:
        if self._nvml is None:
            from xfbench import machine

            self._nvml = machine._nvml()
            self._handle = machine.nvml_handle(self.device, self._nvml)
        if self._nvml is None or self._handle is None:
            self.reason = "NVML is not available for " + self.device
            return False
        try:
            self._start_mj = self._nvml.nvmlDeviceGetTotalEnergyConsumption(self._handle)
            self.method = "nvml-energy"
        except Exception as e:  # NVMLError_NotSupported before Volta
            self.method = "nvml-power-sampling"
            self.reason = f"no energy counter on this GPU ({type(e).__name__}): power sampled"
            self._thread = threading.Thread(target=self._sample, daemon=True)
        return True

    def _sample(self) -> None:
        period = 1.0 / SAMPLE_HZ
        while True:
            try:
                watts = self._nvml.nvmlDeviceGetPowerUsage(self._handle) / 1000.0
                self._samples.append((time.perf_counter(), watts))
            except Exception:  # a failed reading is a gap, integrated across
                pass
            if self._stop.wait(period):
                return

    def poll(self) -> None:
        """Add each RAPL counter's advance since its last reading."""
        now = [d.read_uj() for d in self.domains]
        for i, (d, last, value) in enumerate(zip(self.domains, self._last_uj, now, strict=True)):
            self._sum_uj[i] += d.delta_uj(last, value)
        self._last_uj = now

    def _poll_loop(self) -> None:
        while not self._stop.wait(self.poll_s):
            self.poll()

    def gpu_state(self) -> dict:
        """Clocks (MHz), temperature (C), enforced power limit (W) and throttle reasons."""
        n, h = self._nvml, self._handle
        state: dict = {}
        for key, read in (
            ("sm_clock_mhz", lambda: n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM)),
            ("memory_clock_mhz", lambda: n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_MEM)),
            ("temperature_c", lambda: n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU)),
            ("power_limit_w", lambda: n.nvmlDeviceGetEnforcedPowerLimit(h) / 1000.0),
            ("throttle", lambda: throttle_names(_reasons(n)(h))),
        ):
            try:
                state[key] = read()
            except Exception:  # not supported on this GPU: left out, never guessed
                pass
        return state

    # -- the window ------------------------------------------------------------------
    def __enter__(self):
        if self.device.startswith("cuda"):
            if self._gpu():
                self.gpu_start = self.gpu_state()
                if self._thread:
                    self._thread.start()
        elif self.device == "cpu":
            self.domains, self.reason = rapl_domains(self.powercap)
            if self.domains:
                self.method = "rapl"
                self._last_uj = [d.read_uj() for d in self.domains]
                self._sum_uj = [0] * len(self.domains)
                if self.poll_s:
                    self._thread = threading.Thread(target=self._poll_loop, daemon=True)
                    self._thread.start()
        else:
            self.reason = f"no energy counter read for {self.device}"
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self._t0
        try:
            if self.method == "rapl":
                if self._thread:
                    self._stop.set()
                    self._thread.join()
                self.poll()
                self.domain_joules = {
                    d.label: 1e-6 * uj for d, uj in zip(self.domains, self._sum_uj, strict=True)
                }
                self.joules = sum(self.domain_joules.values())
            elif self.method == "nvml-energy":
                end_mj = self._nvml.nvmlDeviceGetTotalEnergyConsumption(self._handle)
                self.joules = (end_mj - self._start_mj) / 1000.0
            elif self.method == "nvml-power-sampling":
                self._stop.set()
                self._thread.join()
                # the window's end, so a short window still spans two readings
                watts = self._nvml.nvmlDeviceGetPowerUsage(self._handle) / 1000.0
                self._samples.append((time.perf_counter(), watts))
                self.joules = _integrate(self._samples)
            if self.gpu_start is not None:
                self.gpu_end = self.gpu_state()
        except Exception as e:  # a counter that vanished mid-window: no number, and why
            self.method, self.joules = "none", None
            self.reason = f"energy counter failed during the rounds ({type(e).__name__}: {e})"
        return False

    def fields(self, steps: int, batch: int) -> dict:
        """The record's energy fields for steps timed steps of batch samples each."""
        out: dict = {"energy_method": self.method, "energy_reason": self.reason or None}
        ok = self.joules is not None and self.joules > 0 and steps > 0
        out["energy_j"] = self.joules if ok else None
        out["energy_per_step_j"] = self.joules / steps if ok else None
        out["joules_per_sample"] = self.joules / (steps * batch) if ok else None
        out["samples_per_kj"] = steps * batch / self.joules * 1000 if ok else None
        out["energy_domains"] = self.domain_joules
        if self.method == "nvml-power-sampling":
            out["power_samples"] = len(self._samples)
        if self.gpu_start is not None:
            out["gpu_state_start"] = self.gpu_start
            out["gpu_state_end"] = self.gpu_end
        if self.joules is not None and not ok and self.method != "none":
            out["energy_reason"] = f"{self.method} read no energy over the rounds"
        return out


def _reasons(nvml):
    """NVML's clocks-event reasons call (its newer name first; the older is deprecated)."""
    return getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or (
        nvml.nvmlDeviceGetCurrentClocksThrottleReasons
    )


def _integrate(samples: list[tuple[float, float]]) -> float | None:
    """Joules from (time, watts) samples, by trapezoids; None with fewer than two."""
    if len(samples) < 2:
        return None
    return sum((t1 - t0) * (w0 + w1) / 2 for (t0, w0), (t1, w1) in zip(samples, samples[1:]))
