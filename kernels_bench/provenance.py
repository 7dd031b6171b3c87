"""What a shard ran on: host, device, clocks, limits and every perf-affecting version."""
from __future__ import annotations

import hashlib
import json
import os
import platform
import socket
import subprocess
from pathlib import Path

# Environment variables that change what a kernel does or how fast.
PERF_ENV = ("CUDA_VISIBLE_DEVICES", "CUBLAS_WORKSPACE_CONFIG", "NVIDIA_TF32_OVERRIDE",
            "TORCH_CUDNN_V8_API_ENABLED", "PYTORCH_CUDA_ALLOC_CONF", "NCCL_ALGO", "NCCL_PROTO",
            "OMP_NUM_THREADS", "MKL_NUM_THREADS", "CUDA_LAUNCH_BLOCKING", "TORCHINDUCTOR_MAX_AUTOTUNE")

HARDWARE_KEYS = ("device_kind", "gpu_name", "gpu_sku", "sm_count", "l2_bytes", "memory_bytes",
                 "sm_clock_default_mhz", "sm_clock_max_mhz", "power_limit_w", "ecc_enabled", "mig_enabled")
SOFTWARE_KEYS = ("driver_version", "cuda_version", "cudnn_version", "nccl_version", "torch_version",
                 "triton_version", "harness_commit")


def fingerprint(info: dict, keys: tuple[str, ...]) -> str:
    blob = json.dumps({k: info.get(k) for k in keys}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def harness_commit() -> str | None:
    """HEAD of the checkout; where the tree travelled without .git (a lent GPU machine),
    the commit its sender named in PERFLAKE_HARNESS_COMMIT; else None."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent,
                             capture_output=True, text=True, timeout=5)
        if out.returncode == 0:
            return out.stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        pass
    return os.environ.get("PERFLAKE_HARNESS_COMMIT") or None


def _versions() -> dict:
    import torch

    try:
        import triton  # noqa: F401

        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    nccl = None
    if torch.cuda.is_available() and hasattr(torch.cuda, "nccl"):
        try:
            nccl = ".".join(map(str, torch.cuda.nccl.version()))
        except Exception:
            nccl = None
    return {"torch_version": torch.__version__, "cuda_version": torch.version.cuda,
            "cudnn_version": str(cudnn) if cudnn else None, "nccl_version": nccl,
            "triton_version": triton_version}


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def collect(device: str) -> dict:
    """Provenance of this process's device, as `runs` columns."""
    info: dict = {"host": socket.gethostname(), "device": device, "python_version": platform.python_version(),
                  "harness_commit": harness_commit(),
                  "env": {k: os.environ[k] for k in PERF_ENV if k in os.environ}}
    if device.startswith("sim:"):
        from kernels_bench.hardware import hardware

        hw = hardware(device.split(":", 1)[1])
        info.update(device_kind="simulated", gpu_name=f"{hw.name} (simulated)", gpu_sku=hw.sku,
                    sm_count=hw.sm_count, l2_bytes=hw.l2_bytes, memory_bytes=hw.memory_bytes,
                    sm_clock_default_mhz=hw.sm_clock_default_mhz, sm_clock_max_mhz=hw.sm_clock_default_mhz,
                    power_limit_w=hw.board_power_w, torch_version=None, driver_version="simulated")
    elif device.startswith("cuda"):
        info.update(_versions())
        info.update(_cuda_info(device))
    else:
        info.update(_versions())
        info.update(device_kind="cpu", gpu_name=_cpu_model(), gpu_sku="cpu", sm_count=os.cpu_count())
    info["hardware_fingerprint"] = fingerprint(info, HARDWARE_KEYS)
    info["software_fingerprint"] = fingerprint(info, SOFTWARE_KEYS)
    return info


def _cuda_info(device: str) -> dict:
    import torch

    idx = torch.device(device).index or 0
    props = torch.cuda.get_device_properties(idx)
    info = {"device_kind": "gpu", "gpu_name": props.name, "gpu_uuid": str(getattr(props, "uuid", "")) or None,
            "sm_count": props.multi_processor_count, "l2_bytes": props.L2_cache_size,
            "memory_bytes": props.total_memory, "gpu_sku": _sku_for(props.name, props.total_memory)}
    try:
        import pynvml

        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(idx)
        info.update(
            driver_version=pynvml.nvmlSystemGetDriverVersion(),
            pci_bus_id=pynvml.nvmlDeviceGetPciInfo(h).busId,
            sm_clock_max_mhz=pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM),
            power_limit_w=pynvml.nvmlDeviceGetEnforcedPowerLimit(h) / 1000.0,
            ecc_enabled=bool(pynvml.nvmlDeviceGetEccMode(h)[0]),
            mig_enabled=bool(pynvml.nvmlDeviceGetMigMode(h)[0]))
        try:
            info["sm_clock_default_mhz"] = pynvml.nvmlDeviceGetDefaultApplicationsClock(h, pynvml.NVML_CLOCK_SM)
        except pynvml.NVMLError:
            info["sm_clock_default_mhz"] = info["sm_clock_max_mhz"]
    except Exception:  # NVML absent: the fields stay null rather than guessed
        pass
    return info


def _sku_for(name: str, memory: int) -> str | None:
    from kernels_bench.hardware import load_catalog

    gib = memory / 2**30
    for sku, hw in load_catalog().items():
        model = sku.split("-")[0]
        if model in name and (hw.memory_bytes is None or abs(hw.memory_bytes / 2**30 - gib) < 12):
            return sku
    return None
