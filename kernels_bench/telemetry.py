"""Telemetry observers: what the device was doing while a sample was taken.

An observer is told before a case, asked for a reading after each sample, and told
after the case. Readings a device cannot give are None, never invented. A sample whose
SM clock is under 75 % of the default clock is marked throttled (and kept).
"""
from __future__ import annotations

from dataclasses import dataclass

THROTTLE_FRACTION = 0.75


@dataclass(frozen=True)
class Reading:
    sm_clock_mhz: int | None = None
    temperature_c: float | None = None
    power_w: float | None = None


class Observer:
    """No telemetry: the CPU path, and the base of the others."""

    default_clock_mhz: int | None = None

    def before_case(self) -> None:
        pass

    def reading(self) -> Reading:
        return Reading()

    def energy_mj(self) -> float | None:
        """The device's cumulative energy counter in millijoules, or None without one."""
        return None

    def after_case(self) -> None:
        pass

    def throttled(self, r: Reading) -> bool:
        if r.sm_clock_mhz is None or not self.default_clock_mhz:
            return False
        return r.sm_clock_mhz < THROTTLE_FRACTION * self.default_clock_mhz


class NvmlObserver(Observer):
    """NVML readings for one GPU (needs the nvidia-ml-py package)."""

    def __init__(self, device_index: int):
        import pynvml

        pynvml.nvmlInit()
        self.nvml = pynvml
        self.handle = pynvml.nvmlDeviceGetHandleByIndex(device_index)
        try:
            self.default_clock_mhz = pynvml.nvmlDeviceGetDefaultApplicationsClock(self.handle, pynvml.NVML_CLOCK_SM)
        except pynvml.NVMLError:
            self.default_clock_mhz = pynvml.nvmlDeviceGetMaxClockInfo(self.handle, pynvml.NVML_CLOCK_SM)

    def reading(self) -> Reading:
        n, h = self.nvml, self.handle
        return Reading(
            sm_clock_mhz=int(n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM)),
            temperature_c=float(n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU)),
            power_w=n.nvmlDeviceGetPowerUsage(h) / 1000.0,
        )

    def energy_mj(self) -> float | None:
        try:  # Volta and newer; older GPUs have no counter and get null energy columns
            return float(self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle))
        except self.nvml.NVMLError:
            return None


def observer_for(device: str) -> Observer:
    if device.startswith("cuda"):
        try:
            index = int(device.split(":")[1]) if ":" in device else 0
            return NvmlObserver(index)
        except Exception:  # no NVML on this worker: measure without telemetry
            return Observer()
    return Observer()
