"""Energy: joules per call from the machine's power counters, or an estimate from a stated power, labelled as such.

Taught in notebook `estimating_a_job`.

- On Linux, Intel and AMD CPUs expose RAPL ("running average power limit") energy counters under
  ``/sys/class/powercap`` (``intel-rapl:N/energy_uj``, microjoules, wrapping at ``max_energy_range_uj``): a package
  counter covers the whole processor (its cores and uncore), so whatever else runs on it is counted too. The memory
  modules are a domain of their own, outside the package: servers expose it as a sub-zone named ``dram``
  (``intel-rapl:N:M``), which :func:`rapl_counters` adds where it is present (Intel SDM vol. 3B, "RAPL Interfaces":
  the package, PP0/PP1 and DRAM domains; the Linux powercap documentation). Reading them often needs root; virtual
  machines usually hide them.
- On an NVIDIA GPU, NVML's ``nvmlDeviceGetTotalEnergyConsumption`` counts millijoules since the driver loaded
  (Volta and later), through the ``pynvml`` module of ``nvidia-ml-py`` where it is installed.
- Where neither is readable, :func:`measure_energy` multiplies the measured seconds by ``assumed_watts`` and says
  so in its ``source``: an estimate, never presented as a measurement.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from ..core import checks
from ..core.device import sync
from ..core.result import Result

RAPL_ROOT = "/sys/class/powercap"  # elsewhere (macOS, Windows): no such folder, so no counters and no RAPL reading


def rapl_counters(root: str | Path = RAPL_ROOT) -> dict[str, tuple[Path, int]]:
    """Readable RAPL counters to add up: {name: (energy_uj file, wrap-around range in µJ)}; empty where none are.

    Each package (``intel-rapl:N``, named ``package-N``) and, where the machine exposes one, its DRAM sub-zone (named
    ``dram``, listed as ``package-N dram``): the memory modules' energy is not part of the package's. The package's
    other sub-zones (``core``, ``uncore``) are parts of it and are skipped, and so is a ``psys`` zone (client
    platforms), which covers the whole platform, the package included: adding either would count joules twice.
    """
    zones = {}
    for zone in sorted(Path(root).glob("intel-rapl:[0-9]*")):
        try:
            (zone / "energy_uj").read_text()
            name = (zone / "name").read_text().strip()
            wrap = int((zone / "max_energy_range_uj").read_text())
        except (OSError, ValueError):
            continue
        zones[zone.name] = (name, zone / "energy_uj", wrap)
    found = {}
    for zone_id, (name, path, wrap) in zones.items():
        parent = zone_id.rsplit(":", 1)[0]
        if parent == "intel-rapl":  # a top-level zone: a package, or psys
            if name != "psys":
                found[name] = (path, wrap)
        elif name == "dram":  # a package's sub-zone: only DRAM lies outside the package
            found[f"{zones[parent][0] if parent in zones else parent} dram"] = (path, wrap)
    return found


def _coverage(counters: dict[str, tuple[Path, int]]) -> str:
    """What :func:`rapl_counters`' counters cover, for the record's source: the packages, with or without DRAM."""
    drams = sum(name.endswith("dram") for name in counters)
    packages = len(counters) - drams
    what = "whole package" if packages == 1 else f"{packages} whole packages"
    if drams == 0:
        return f"{what}, without DRAM: this machine exposes no DRAM counter"
    if drams < packages:
        return f"{what}, and the DRAM of {drams} of them (the others expose no DRAM counter)"
    return f"{what} and DRAM"


def _read_rapl(counters: dict[str, tuple[Path, int]]) -> dict[str, int]:
    return {name: int(path.read_text()) for name, (path, _) in counters.items()}


def _nvml_energy_mj(device: torch.device) -> Callable[[], int] | None:
    """A reader of the GPU's total-energy counter (mJ), or None where NVML or the counter is missing."""
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(device.index or 0)
        pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)
    except Exception:  # no nvidia-ml-py, no driver, or a GPU older than Volta
        return None
    return lambda: int(pynvml.nvmlDeviceGetTotalEnergyConsumption(handle))


@dataclass
class EnergyRecord(Result):
    """Energy of ``calls`` calls in ``seconds``: measured by a counter, or estimated (``measured`` says which)."""

    label: str
    joules: float
    seconds: float
    calls: int
    measured: bool
    source: str

    @property
    def joules_per_call(self) -> float:
        return self.joules / self.calls

    @property
    def watts(self) -> float:
        """Average power over the calls."""
        return self.joules / self.seconds

    def __str__(self) -> str:
        kind = "measured" if self.measured else "ESTIMATED"
        return (
            f"{self.label}: {self.joules_per_call:.4g} J per call, {self.watts:.1f} W over {self.calls} calls "
            f"({kind}: {self.source})"
        )


def measure_energy(
    fn: Callable,
    *args,
    device: torch.device | str = "cpu",
    assumed_watts: float | None = None,
    min_run_s: float = 0.5,
    label: str | None = None,
    rapl_root: str | Path = RAPL_ROOT,
) -> EnergyRecord:
    """Call ``fn(*args)`` repeatedly for at least ``min_run_s`` and return the energy it took, per call.

    Taught in notebook `estimating_a_job`. On a CPU the RAPL counters of :func:`rapl_counters` (the packages, and
    their DRAM where exposed: the source says which) are read before and after, on a GPU
    NVML's energy counter; a long enough run spans many counter updates (RAPL's every millisecond or so, NVML's
    about every 100 ms). Where no counter can be read the energy is ``assumed_watts`` × seconds, and the record
    says it is an estimate; with no counter and no ``assumed_watts`` it is an error that says which to give.
    """
    if not callable(fn):
        raise TypeError(f"measure_energy() needs a callable, got {type(fn).__name__}")
    checks.positive("min_run_s", min_run_s)
    if assumed_watts is not None:
        checks.positive("assumed_watts", assumed_watts)
    device = torch.device(device)
    label = label or str(getattr(fn, "__name__", "fn"))
    rapl = rapl_counters(rapl_root) if device.type == "cpu" else {}
    nvml = _nvml_energy_mj(device) if device.type == "cuda" else None
    if not rapl and nvml is None and assumed_watts is None:
        where = "RAPL (/sys/class/powercap)" if device.type == "cpu" else "NVML (pip install nvidia-ml-py)"
        raise ValueError(
            f"no power counter is readable on this {device.type} ({where}); pass assumed_watts= (e.g. the "
            "processor's stated power) to get an estimate, labelled as one"
        )
    fn(*args)  # warm-up, not counted
    sync(device)
    before_rapl = _read_rapl(rapl) if rapl else {}
    before_nvml = nvml() if nvml else 0
    calls, start = 0, time.perf_counter()
    while True:
        fn(*args)
        calls += 1
        if calls % 4 == 0 or calls == 1:
            sync(device)
            if time.perf_counter() - start >= min_run_s:
                break
    seconds = time.perf_counter() - start
    if rapl:
        after = _read_rapl(rapl)
        joules = sum((after[n] - before_rapl[n]) % rapl[n][1] for n in rapl) / 1e6  # each wraps at its range
        return EnergyRecord(label, joules, seconds, calls, True, f"RAPL counters {', '.join(rapl)} ({_coverage(rapl)})")
    if nvml:
        return EnergyRecord(label, (nvml() - before_nvml) / 1e3, seconds, calls, True, "NVML total energy (whole GPU)")
    assert assumed_watts is not None
    return EnergyRecord(
        label,
        assumed_watts * seconds,
        seconds,
        calls,
        False,
        f"no power counter readable here: {assumed_watts:g} W assumed x the measured seconds",
    )
