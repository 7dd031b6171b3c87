"""The hardware catalog (kernels_bench/hardware.yaml): peak figures of named GPUs."""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from kernels_bench.errors import UsageError
from kernels_bench.yaml_file import load_yaml

CATALOG_PATH = Path(__file__).parent / "hardware.yaml"
_REQUIRED = ("name", "peak_tflops", "memory_bandwidth_gbps", "source")


@dataclass(frozen=True)
class Hardware:
    sku: str
    name: str
    device_kind: str
    peak_tflops: dict[str, float]
    memory_bandwidth_gbps: float
    l2_bytes: int | None
    sm_count: int | None
    memory_bytes: int | None
    board_power_w: float | None
    sm_clock_default_mhz: int | None
    source: str
    # Per-direction GPU-to-GPU bandwidth (NVLink, else PCIe): the roof of a collective's
    # bus bandwidth (nccl-tests' busbw), None where the catalog does not say.
    link_bandwidth_gbps: float | None = None
    # The GPU chip (die) of the SKU: SKUs of one chip (the H100 and H200 are both GH100)
    # have the same SMs and clocks and differ in memory only.
    chip: str | None = None

    def roofline_ns(self, flops: float, bytes_: float, dtype: str) -> float:
        """Lower bound of a call's time: the slower of compute and memory traffic."""
        peak = self.peak_tflops.get(dtype) or self.peak_tflops.get("fp32")
        compute, memory = roofs_ns(flops or 0.0, bytes_ or 0.0, peak, self.memory_bandwidth_gbps)
        return max(compute, memory)


def roofs_ns(flops, bytes_, peak_tflops, bandwidth_gbps):
    """(compute-bound ns, memory-bound ns) of a call at the roofs: its flops at the peak
    TFLOP/s and its bytes at the peak GB/s (1 TFLOP/s = 1e3 flop/ns, 1 GB/s = 1 byte/ns).
    Arithmetic only, so the one formula serves floats, numpy arrays and Spark columns;
    the caller takes the slower bound and decides what a missing roof means."""
    return flops / (peak_tflops * 1e3), bytes_ / bandwidth_gbps


@lru_cache(maxsize=4)
def load_catalog(path: str | None = None) -> dict[str, Hardware]:
    p = Path(path) if path else CATALOG_PATH
    doc = load_yaml(p) or {}
    out = {}
    for sku, spec in doc.items():
        missing = [k for k in _REQUIRED if k not in (spec or {})]
        if missing:
            raise ValueError(f"{p}: {sku}: missing {missing}")
        out[sku] = Hardware(
            sku=sku, name=spec["name"], device_kind=spec.get("device_kind", "gpu"),
            peak_tflops={k: float(v) for k, v in spec["peak_tflops"].items()},
            memory_bandwidth_gbps=float(spec["memory_bandwidth_gbps"]),
            l2_bytes=spec.get("l2_bytes"), sm_count=spec.get("sm_count"),
            memory_bytes=spec.get("memory_bytes"), board_power_w=_float(spec.get("board_power_w")),
            sm_clock_default_mhz=spec.get("sm_clock_default_mhz"), source=spec["source"],
            link_bandwidth_gbps=_float(spec.get("link_bandwidth_gbps")), chip=spec.get("chip"))
    return out


def _float(v) -> float | None:
    return None if v is None else float(v)


class UnknownSku(UsageError, KeyError):
    """A SKU the catalog lacks: a KeyError to the code that looks SKUs up, and a
    UsageError (one line, exit 2) to the harness's command line."""

    def __str__(self) -> str:  # the message itself, not KeyError's repr of it
        return str(self.args[0]) if self.args else "unknown GPU SKU"


def hardware(sku: str) -> Hardware:
    cat = load_catalog()
    if sku not in cat:
        raise UnknownSku(f"unknown GPU SKU {sku!r}; the catalog has {sorted(cat)}")
    return cat[sku]
