"""Which cells to run: the selection options, validated, expanded into cells.

Every option takes a comma-separated list. A bad value raises UsageError
with one line naming the valid values; the caller turns it into a usage error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path

from xfbench import machine
from xfbench.adapters import DATA_MODES, PRECISIONS, Cell, get_adapter
from xfbench.errors import UsageError
from xfbench.frameworks import FRAMEWORKS
from xfbench.harness.presets import PRESETS, Preset
from xfbench.harness.threads import allowed_cpus
from xfbench.models import DECODERS, NETWORKS, geometry

# Modes and precisions a suite runs beyond the adapters' (plugin.Suite's `modes` and
# `precisions`, accepted here once it is declared): --mode and --precision take them.
# Network adapters do not list them, so network cells asked for them skip with that reason.
SUITE_MODES: dict[str, tuple[str, ...]] = {}  # framework -> modes
SUITE_PRECISIONS: tuple[str, ...] = ()


def accept(modes: dict[str, tuple[str, ...]], precisions: tuple[str, ...]) -> None:
    """A suite's own modes (framework -> modes) and precisions, valid in every selection."""
    global SUITE_PRECISIONS
    for framework, own in modes.items():
        SUITE_MODES[framework] = tuple(dict.fromkeys((*SUITE_MODES.get(framework, ()), *own)))
    SUITE_PRECISIONS = tuple(dict.fromkeys((*SUITE_PRECISIONS, *precisions)))


@dataclass(frozen=True, kw_only=True)
class Selection:
    frameworks: tuple[str, ...]
    frameworks_explicit: bool  # named by --framework (else: every installed one)
    networks: tuple[str, ...]
    modes: tuple[str, ...] | None  # None: every mode of each framework that runs on the device
    precisions: tuple[str, ...]
    precisions_explicit: bool = True  # named by --precision (else: fp32, a suite's default)
    devices: tuple[str, ...]
    threads: int
    batch_size: int | None  # None: the preset's (Table 7's, or the smoke batch)
    preset: Preset
    data: str
    data_dir: str | None = None  # --data real: the folder of the data sets (docs/data.md)
    data_workers: int = 0  # --data real: the input pipeline's workers

    def geometry(self, network: str, device: str) -> tuple[int | None, int]:
        """(sequence length or None, batch) of a network's cells on device: --batch-size,
        else the preset's (Table 7's, the smoke batch, or a transformer's geometry there)."""
        tokens, batch = geometry(network, self.preset.scale, device)
        return tokens, self.batch_size or batch


def comma_list(value: str | None) -> list[str]:
    """The items of a comma-separated option value, stripped (None or "": none). Every
    option that takes a list, in every suite and the runner, is split here."""
    return [v.strip() for v in (value or "").split(",") if v.strip()]


def option_list(option: str, value: str | None) -> list[str]:
    """The items of a named option the user gave. Not given (None) is none, and the caller
    uses its default; given but empty, or naming an item twice, is an error: an empty
    value silently becoming the default would start a full sweep, a repeated one would
    measure a cell twice."""
    if value is None:
        return []
    items = comma_list(str(value))
    if not items:
        raise UsageError(f"--{option} is empty: name at least one value, or leave it out")
    repeated = [v for v in dict.fromkeys(items) if items.count(v) > 1]
    if repeated:
        raise UsageError(f"--{option} names {repeated[0]!r} more than once")
    return items


def token_lengths(value: str | None) -> list[tuple[int, int]]:
    """--lengths: a decoder's prompt/new token pairs, e.g. 128/128,256/64 (not given:
    none, and the caller uses its default)."""
    out = []
    for item in option_list("lengths", value):
        isl, _, osl = item.partition("/")
        if not (isl.isdigit() and osl.isdigit() and int(isl) > 0 and int(osl) > 1):
            raise UsageError(
                f"--lengths takes prompt/new token pairs like 128/128 (new tokens at least "
                f"2: one from the prefill, one or more decoded), not {item!r}"
            )
        out.append((int(isl), int(osl)))
    return out


def fit_positions(pairs: list[tuple[int, int]], name: str, positions: int, scale: str) -> None:
    """UsageError where a pair's prompt and new tokens are more than a decoder's positions
    (name: what the message calls it)."""
    for isl, osl in pairs:
        if isl + osl > positions:
            raise UsageError(
                f"--lengths {isl}/{osl}: {isl + osl} positions is more than {name}'s "
                f"{positions}{' at smoke size' if scale == 'smoke' else ''}"
            )


def _one(option: str, value: str | None) -> str | None:
    """A single-valued option: None when not given, else its value, never empty."""
    if value is None:
        return None
    if not str(value).strip():
        raise UsageError(f"--{option} is empty: give a value, or leave it out")
    return str(value).strip()


def present_devices() -> list[str]:
    """The devices this machine has, without starting a framework: the host, NVIDIA GPUs
    (NVML) and TPU chips (the kernel's /dev/accel* devices)."""
    return (
        ["cpu"]
        + [f"cuda:{i}" for i in range(machine.gpu_count())]
        + [f"tpu:{i}" for i in range(machine.tpu_chip_count())]
    )


def _check(option: str, values: list[str], valid) -> None:
    for v in values:
        if v not in valid:
            raise UsageError(f"unknown {option} {v!r}; valid: {', '.join(valid)}")


def normalize_device(name: str) -> str:
    """cpu, cuda[:N] (or gpu[:N]), tpu[:N] -> cpu, cuda:N, tpu:N."""
    m = re.fullmatch(r"(cpu|cuda|gpu|tpu)(?::(\d+))?", name.strip().lower())
    if not m:
        raise UsageError(f"unknown device {name!r}; valid: cpu, cuda:N (or gpu:N), tpu:N")
    kind, index = m.group(1), m.group(2)
    if kind == "cpu":
        if index not in (None, "0"):
            raise UsageError(f"unknown device {name!r}; the host is 'cpu'")
        return "cpu"
    return f"{'cuda' if kind == 'gpu' else kind}:{index or 0}"


def _positive(option: str, value: str | None) -> int | None:
    if value is None:
        return None
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 1:
        raise UsageError(f"{option} must be a positive whole number, not {value!r}")
    return n


def _count(option: str, value) -> int:
    """A whole number, 0 or more."""
    try:
        n = int(value)
    except (TypeError, ValueError):
        n = -1
    if n < 0:
        raise UsageError(f"{option} must be a whole number, 0 or more, not {value!r}")
    return n


def _with_rounds(preset, rounds):
    """The preset, or with exactly --rounds timed rounds a cell (no adaptive rounds)."""
    if rounds is None:
        return preset
    n = _positive("--rounds", rounds)
    return replace(preset, min_rounds=n, max_rounds=n, budget_s=0.0, time_cap_s=0.0)


def _frameworks(framework) -> list[str]:
    """--framework's frameworks, else every installed one run by default."""
    frameworks = option_list("framework", framework) or [
        f for f in FRAMEWORKS if FRAMEWORKS[f].default and get_adapter(f).import_error() is None
    ]
    _check("framework", frameworks, list(FRAMEWORKS))
    if not frameworks:
        raise UsageError("no framework is installed; see README.md for the install command")
    return frameworks


def _modes(mode, frameworks: list[str]) -> list[str] | None:
    """--mode's modes, each one of the frameworks' (or one a suite runs it in: JAX's loop)."""
    modes = option_list("mode", mode) or None
    if modes:
        known = {m: f for f in frameworks for m in (*get_adapter(f).modes, *SUITE_MODES.get(f, ()))}
        valid = ", ".join(f"{m} ({f})" for m, f in known.items())
        for m in modes:
            if m not in known:
                raise UsageError(f"unknown mode {m!r} for {', '.join(frameworks)}; valid: {valid}")
    return modes


def _devices(device, skip_missing_devices: bool) -> list[str]:
    """--device's devices, each present (unless skip_missing_devices), else the CPU and
    every GPU."""
    devices = [normalize_device(d) for d in option_list("device", device)]
    if len(set(devices)) < len(devices):  # gpu:0 and cuda:0 are one device
        raise UsageError(f"--device {device!r} names one device more than once")
    if devices and not skip_missing_devices:
        present = present_devices()
        for d in devices:
            if d not in present:
                raise UsageError(
                    f"device {d} is not present on this machine (present: {', '.join(present)}); "
                    "--skip-missing-devices records its cells as skipped instead"
                )
    return devices or ["cpu"] + [f"cuda:{i}" for i in range(machine.gpu_count())]


def _threads(threads) -> int:
    """--threads: one count, at most the CPUs this process may use (their number by
    default)."""
    cpus = len(allowed_cpus())
    n_threads = threads if isinstance(threads, int) else None
    if n_threads is None and threads is not None:
        if "," in str(threads):
            raise UsageError(
                "--threads takes one count per pytest process; sweep thread "
                "counts with one pytest invocation per count"
            )
        n_threads = _positive("--threads", threads)
    n_threads = n_threads or cpus
    if n_threads > cpus:
        raise UsageError(f"--threads {n_threads} is more than the {cpus} CPUs this process may use")
    return n_threads


def _data(data, data_dir) -> tuple[str, str | None]:
    """--data's mode and --data-dir's folder, which only --data real reads (and needs)."""
    data_mode = _one("data", data) or "resident"
    _check("data mode", [data_mode], DATA_MODES)
    folder = _one("data-dir", data_dir)
    if data_mode == "real" and not folder:
        raise UsageError("--data real needs --data-dir PATH, the folder of the data sets")
    if folder and data_mode != "real":
        raise UsageError("--data-dir is read only with --data real")
    if folder and not Path(folder).is_dir():
        raise UsageError(f"--data-dir {folder}: not a folder (xfbench data check explains)")
    return data_mode, folder


def parse(
    framework=None,
    model=None,
    mode=None,
    precision=None,
    device=None,
    threads=None,
    batch_size=None,
    preset=None,
    data=None,
    skip_missing_devices=False,
    data_dir=None,
    data_workers=None,
    rounds=None,
    decoders=False,
) -> Selection:
    """Validate raw option strings (None = default) into a Selection. A device named but
    not present is an error listing those present, unless skip_missing_devices: then its
    cells are skipped with that reason. decoders: --model may name the decoders only the
    generation suite runs (models.DECODERS) beside the networks."""
    frameworks = _frameworks(framework)
    preset_name = _one("preset", preset) or "paper"
    _check("preset", [preset_name], list(PRESETS))
    networks = option_list("model", model) or list(PRESETS[preset_name].networks or NETWORKS)
    _check("model", networks, [*NETWORKS, *(DECODERS if decoders else ())])
    modes = _modes(mode, frameworks)
    precisions = option_list("precision", precision) or ["fp32"]
    _check("precision", precisions, PRECISIONS + SUITE_PRECISIONS)
    devices = _devices(device, skip_missing_devices)
    n_threads = _threads(threads)
    data_mode, folder = _data(data, data_dir)
    # the loader's workers share the cell's CPUs (its affinity): by default one per
    # thread, at most 4
    workers = min(4, n_threads) if data_workers is None else _count("--data-workers", data_workers)
    return Selection(
        frameworks=tuple(frameworks),
        frameworks_explicit=framework is not None,
        networks=tuple(networks),
        modes=tuple(modes) if modes else None,
        precisions=tuple(precisions),
        precisions_explicit=precision is not None,
        devices=tuple(dict.fromkeys(devices)),
        threads=n_threads,
        batch_size=_positive("--batch-size", batch_size),
        preset=_with_rounds(PRESETS[preset_name], rounds),
        data=data_mode,
        data_dir=str(Path(folder).resolve()) if folder else None,
        data_workers=workers,
    )


def cells(sel: Selection, task: str) -> list[Cell]:
    """Every cell of the selection for one task. Modes that cannot run on a device, and
    tasks a framework does not do, are left out when modes or frameworks were not named,
    and kept (to be skipped with their reason) when they were."""
    out = []
    for fw in sel.frameworks:
        adapter = get_adapter(fw)
        if task not in adapter.tasks and not sel.frameworks_explicit:
            continue  # an inference-only framework is in a training run only when named
        for device in sel.devices:
            modes = [m for m in (sel.modes or adapter.modes) if m in adapter.modes]
            if sel.modes is None:
                modes = [m for m in modes if adapter.mode_reason(m, device) is None]
                if sel.preset.one_mode and modes:
                    chosen = FRAMEWORKS[fw].table7_mode
                    modes = [chosen if chosen in modes else modes[0]]
            for network in sel.networks:
                tokens, batch = sel.geometry(network, device)
                for mode in modes:
                    if sel.modes is None and not adapter.mode_applies(mode, network):
                        continue
                    for precision in sel.precisions:
                        out.append(
                            Cell(
                                network=network,
                                framework=fw,
                                mode=mode,
                                precision=precision,
                                device=device,
                                threads=sel.threads,
                                batch_size=batch,
                                task=task,
                                data=sel.data,
                                scale=sel.preset.scale,
                                tokens=tokens,
                            )
                        )
    return out
