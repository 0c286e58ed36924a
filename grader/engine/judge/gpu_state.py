"""The GPU's state around each timed window, from NVML (nvidia-ml-py): clocks, heat, power, throttling.

A ratio is only as good as the clocks it was measured at. Each alternation of a shape is
bracketed by two samples; when a slowdown reason (hardware slowdown, thermal, power brake) is set
at either edge, or the thermal violation counter moved in between, the alternation is timed
again; if it stays throttled the shape is marked in the record and the report (never silently
scored). The samples' extremes go into the record, so an appeal is settled from data.

Without NVML (no driver, the package missing, a CPU machine) `Monitor.sample` returns None and
nothing is checked: the record then carries no GPU state.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from grader.engine.records.model import GpuState

#: NVML's clock event (throttle) reason bits (nvml.h, nvmlClocksEventReason*)
SLOWDOWNS = {0x8: "hw_slowdown", 0x20: "sw_thermal_slowdown", 0x40: "hw_thermal_slowdown", 0x80: "hw_power_brake"}
BENIGN = {0x1: "gpu_idle", 0x2: "applications_clocks", 0x4: "sw_power_cap", 0x10: "sync_boost", 0x100: "display_clocks"}
SLOWDOWN_MASK = sum(SLOWDOWNS)
#: a window is timed again at most this many times for a slowdown
MAX_RETIMES = 2


@dataclass(frozen=True)
class Sample:
    sm_mhz: int
    memory_mhz: int
    temperature_c: int
    power_w: float
    reasons: int
    #: NVML's cumulative time in thermal violation (ns), where the driver reports it
    thermal_ns: int | None = None


def reason_names(mask: int) -> list[str]:
    names = {**BENIGN, **SLOWDOWNS}
    return [name for bit, name in sorted(names.items()) if mask & bit]


def slowed(before: Sample | None, after: Sample | None) -> bool:
    """A slowdown around one window: a reason set at either edge, or thermal violation time in between."""
    if before is None or after is None:
        return False
    if (before.reasons | after.reasons) & SLOWDOWN_MASK:
        return True
    return before.thermal_ns is not None and after.thermal_ns is not None and after.thermal_ns > before.thermal_ns


class Monitor:
    """NVML's view of the current CUDA device; `sample()` is None where NVML is not there."""

    def __init__(self) -> None:
        self.nvml: Any = None
        self.handle: Any = None
        try:
            import pynvml
            import torch

            pynvml.nvmlInit()
            uuid = str(torch.cuda.get_device_properties(torch.cuda.current_device()).uuid)
            try:
                self.handle = pynvml.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith("GPU-") else f"GPU-{uuid}")
            except pynvml.NVMLError:
                self.handle = pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())
            self.nvml = pynvml
        except Exception:  # no driver, no package, no GPU: no GPU state, nothing checked
            self.nvml = self.handle = None

    def sample(self) -> Sample | None:
        nvml, handle = self.nvml, self.handle
        if nvml is None:
            return None
        try:
            reasons_of = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or (
                nvml.nvmlDeviceGetCurrentClocksThrottleReasons
            )
            try:
                thermal: int | None = int(nvml.nvmlDeviceGetViolationStatus(handle, 1).violationTime)  # 1: thermal
            except Exception:
                thermal = None
            return Sample(
                sm_mhz=int(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)),
                memory_mhz=int(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_MEM)),
                temperature_c=int(nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU)),
                power_w=nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0,
                reasons=int(reasons_of(handle)),
                thermal_ns=thermal,
            )
        except Exception:
            return None


@functools.cache
def monitor() -> Monitor:
    """This process's Monitor: NVML is initialised and the device found once, not once per shape."""
    return Monitor()


def summary(samples: list[Sample | None], retimed: int, throttled: bool) -> GpuState | None:
    """The record's GpuState from one shape's samples (None when NVML gave none)."""
    seen = [s for s in samples if s is not None]
    if not seen:
        return None
    mask = 0
    for s in seen:
        mask |= s.reasons
    sm = [s.sm_mhz for s in seen]
    memory = [s.memory_mhz for s in seen]
    return GpuState(
        sm_clock_mhz=[min(sm), max(sm)],
        memory_clock_mhz=[min(memory), max(memory)],
        temperature_c=max(s.temperature_c for s in seen),
        power_w=round(max(s.power_w for s in seen), 1),
        throttle_reasons=reason_names(mask),
        retimed_windows=retimed,
        throttled=throttled,
    )
