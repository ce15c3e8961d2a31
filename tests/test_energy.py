"""Energy over the timed rounds (harness/energy.py), against fake powercap trees and a fake
NVML: the counters read, a wraparound undone, the reasons recorded where nothing can be
read, and the fields a record gets."""

from __future__ import annotations

import time

import pytest

from xfbench.harness import energy
from xfbench.harness.energy import EnergyMeter, rapl_domains


def zone(root, name, label, uj, max_uj=1_000_000):
    z = root / name
    z.mkdir(parents=True)
    (z / "name").write_text(label + "\n")
    (z / "energy_uj").write_text(f"{uj}\n")
    (z / "max_energy_range_uj").write_text(f"{max_uj}\n")
    return z


def advance(z, uj):
    (z / "energy_uj").write_text(f"{uj}\n")


def test_rapl_reads_packages_and_dram_and_undoes_a_wraparound(tmp_path):
    pkg = zone(tmp_path, "intel-rapl:0", "package-0", 900_000)
    core = zone(tmp_path, "intel-rapl:0:0", "core", 5)  # inside the package's count
    dram = zone(tmp_path, "intel-rapl:0:1", "dram", 10_000)
    psys = zone(tmp_path, "intel-rapl:1", "psys", 0)  # the platform, packages included
    with EnergyMeter("cpu", powercap=tmp_path, poll_s=None) as e:
        advance(pkg, 100_000)  # wrapped: 900,000 -> 1,000,000 = 0 -> 100,000
        advance(core, 999)
        advance(dram, 60_000)
        advance(psys, 999_999)
    assert e.method == "rapl"
    # package 200,000 uJ across the wrap, dram 50,000 uJ; core and psys not added
    assert e.fields(5, 10)["energy_domains"] == pytest.approx({"package-0": 0.2, "dram-0": 0.05})
    assert e.joules == pytest.approx(0.25)
    f = e.fields(steps=5, batch=10)
    assert f["energy_method"] == "rapl" and f["energy_reason"] is None
    assert f["energy_per_step_j"] == pytest.approx(0.25 / 5)
    assert f["joules_per_sample"] == pytest.approx(0.25 / 50)
    assert f["samples_per_kj"] == pytest.approx(50 / 0.25 * 1000)


def test_polling_counts_more_than_one_wraparound(tmp_path):
    """Read only at the two ends, two wraps would look like none; polled, each counts."""
    pkg = zone(tmp_path, "intel-rapl:0", "package-0", 0)
    with EnergyMeter("cpu", powercap=tmp_path, poll_s=None) as e:
        for value in (600_000, 200_000, 800_000, 400_000):  # wraps twice
            advance(pkg, value)
            e.poll()
        advance(pkg, 0)  # and once more before the end
    assert e.joules == pytest.approx(3.0)  # 3,000,000 uJ over three wraps


def test_the_polling_thread_reads_during_the_rounds_and_stops(tmp_path):
    pkg = zone(tmp_path, "intel-rapl:0", "package-0", 0)
    with EnergyMeter("cpu", powercap=tmp_path, poll_s=0.01) as e:
        for value in (600_000, 200_000):  # a wrap the thread must see
            advance(pkg, value)
            time.sleep(0.1)
    assert not e._thread.is_alive()
    assert e.joules == pytest.approx(1.2)


def test_unknown_throttle_bits_are_kept():
    assert energy.throttle_names(0x4 | 0x200) == ["sw_power_cap", "0x200"]


def test_no_powercap_is_method_none_with_the_reason(tmp_path):
    with EnergyMeter("cpu", powercap=tmp_path / "absent") as e:
        pass
    f = e.fields(3, 8)
    assert f["energy_method"] == "none" and f["energy_j"] is None
    assert "no RAPL domains" in f["energy_reason"] and "virtual machine" in f["energy_reason"]


def test_root_only_counters_are_method_none_with_the_reason(tmp_path, monkeypatch):
    zone(tmp_path, "intel-rapl:0", "package-0", 1)

    def refuse(self):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(energy.RaplDomain, "read_uj", refuse)
    domains, why = rapl_domains(tmp_path)
    assert domains == [] and "readable only by root" in why


def test_this_machine_records_a_method_and_never_a_number_without_one():
    """Whatever this machine has (a VM usually has no powercap), the record says which."""
    with EnergyMeter("cpu") as e:
        sum(range(10_000))
    f = e.fields(1, 1)
    assert f["energy_method"] in ("rapl", "none")
    assert (f["energy_j"] is None) == (f["energy_method"] == "none")
    if f["energy_method"] == "none":
        assert f["energy_reason"]


class FakeNVML:
    """pynvml's calls the meter makes, with an energy counter or without one."""

    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0

    def __init__(self, counter=True):
        self.counter = counter
        self.mj = 1_000_000
        self.throttle = 0

    def nvmlDeviceGetTotalEnergyConsumption(self, h):
        if not self.counter:
            raise RuntimeError("NVMLError_NotSupported")
        return self.mj

    def nvmlDeviceGetPowerUsage(self, h):
        return 300_000  # mW

    def nvmlDeviceGetClockInfo(self, h, which):
        return 1980 if which == self.NVML_CLOCK_SM else 2619

    def nvmlDeviceGetTemperature(self, h, which):
        return 45

    def nvmlDeviceGetEnforcedPowerLimit(self, h):
        return 700_000

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, h):
        return self.throttle


def test_a_gpu_energy_counter_and_its_state_at_start_and_end():
    nvml = FakeNVML()
    with EnergyMeter("cuda:0", nvml=nvml, handle=object()) as e:
        nvml.mj += 1500  # 1.5 J
        nvml.throttle = 0x4 | 0x20  # power cap and thermal slowdown began
    f = e.fields(3, 16)
    assert f["energy_method"] == "nvml-energy" and f["energy_j"] == pytest.approx(1.5)
    assert f["gpu_state_start"] == {
        "sm_clock_mhz": 1980,
        "memory_clock_mhz": 2619,
        "temperature_c": 45,
        "power_limit_w": 700.0,
        "throttle": [],
    }
    assert f["gpu_state_end"]["throttle"] == ["sw_power_cap", "sw_thermal_slowdown"]


def test_a_gpu_without_the_counter_has_its_power_sampled_and_integrated():
    with EnergyMeter("cuda:0", nvml=FakeNVML(counter=False), handle=object()) as e:
        time.sleep(0.3)
    f = e.fields(1, 1)
    assert f["energy_method"] == "nvml-power-sampling" and "no energy counter" in f["energy_reason"]
    assert f["power_samples"] >= 4  # 20 Hz over 0.3 s, and the window's end
    assert f["energy_j"] == pytest.approx(300 * e.seconds, rel=0.1)


def test_no_nvml_for_a_gpu_is_method_none():
    with EnergyMeter("cuda:0", nvml=None, handle=None) as e:
        pass
    assert e.fields(1, 1)["energy_method"] == "none"
