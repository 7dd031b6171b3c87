"""The simulated device: samples from a roofline model of a catalog GPU, with realistic
noise, for demos, scale benchmarks and the tests of history-based features.

Every number it produces is labelled `device_kind = simulated`. What it models:
- the time of a call as the CUDA timer samples it: roofline bound / efficiency + the
  GPU's fixed cost of a kernel between two events, where efficiency grows with problem
  size and carries a per-SKU, per-family factor (the "truth" that projections must
  recover), and each family's scale and fixed cost are calibrated on a real H200
  night (`CALIBRATION`). The CPU's launch cost is not in a sample (the
  timer keeps it out); it is the run's `launch_overhead_ns` (`HOST_LAUNCH_NS`);
- per-sample noise: log-normal jitter plus a heavy right tail (preemption-like spikes);
- bimodality: some cases land in one of two modes per run (e.g. a tile heuristic);
- throttling episodes: a stretch of samples at a lower SM clock, slower, flagged;
- run-to-run drift: a small per-run factor;
- injected regressions with known ground truth: `Injection(match, since, factor)`, and
  injected power changes at the same speed (`power_factor`).
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field

import numpy as np

from kernels_bench.case import Case
from kernels_bench.hardware import Hardware, hardware
from kernels_bench.kernels import kernel_for
from kernels_bench.kernels.base import DTYPE_BYTES
from kernels_bench.measure import CaseOutcome
from kernels_bench.stopping import StoppingRule

# The fixed cost of a kernel between two events, for families the real GPU night did not
# calibrate (below); the launch cost is a typical eager torch op's on a server CPU (an
# H200 host measured 10-11 us: benchmarks/NOTES-harness.md).
KERNEL_FLOOR_NS = 2_500.0
HOST_LAUNCH_NS = 6_000.0
# Per family, (scale, floor_ns), (compute scale, memory scale, floor_ns) or (compute
# scale, memory scale, floor_ns, SM bytes per clock): a call takes the slowest of its
# compute and memory terms at the modelled efficiency, each times its scale, and (with
# the fourth) of its bytes at that rate per SM per clock; plus floor_ns
# (`calibrated_ns`). Fitted on the REAL nights (kernels_bench/reference/) by `python
# benchmarks/gpu_night.py sim --fit`: the least median absolute log error per family
# (with two GPU models, the mean of each one's median); `selftest`, a no-op and a planted
# error, is not a kernel family to calibrate.
# gemm, memory and norm: one scale and a floor, fitted on the first H200 night
# (2026-11-26); what they stand for: eager norms run several kernels and compute half
# precision in fp32 (8 us); cuBLAS below a few hundred us pays a set-up a roofline does
# not see (7.3 us). (The fit with two scales moves their scales by 6 % at most and
# gemm's floor by 0.8 us; not applied.) Their scales were rescaled when the efficiency
# factor became per chip (`efficiency`), so that the H200's model is what it was.
# Attention: 256 cases of five leases (four on an H200, one on an H100, 2026-11-26 and
# -27), per backend ("family/backend" keys, `calibration_for`), on the attention work
# model of `work`: cuDNN reaches about the modelled share of peak and of HBM with a 15 us
# floor (several kernels per call); torch's flash about 0.37 of peak and, in decode, at
# most 10.4 bytes per SM per clock (2.7 TB/s on 132 SMs at 1980 MHz: an H200's HBM is
# not the bound, an H100's nearly is); the memory-efficient kernel half flash's compute
# rate, bound in the SMs the same way; the math backend, three unfused ops moving the
# score matrix, x8 of a roofline on that traffic and at most 1.4 bytes per SM per clock.
# Held out by shard (fitted on every other shard, both GPU models), the median error is
# 5.8 % on the H100's shards and 5.5 % on the H200's: benchmarks/NOTES-harness.md.
# The pooled "attention" entry is a fallback for a backend not measured (36 % off).
CALIBRATION = {"gemm": (0.949, 7_300.0), "memory": (1.021, 2_300.0), "norm": (1.516, 8_000.0),
               "attention": (0.95, 1.02, 10_000.0, 11.81),
               "attention/sdpa-cudnn": (0.78, 0.86, 14_750.0),
               "attention/sdpa-flash": (1.62, 1.09, 11_250.0, 10.37),
               "attention/sdpa-efficient": (3.11, 1.01, 14_750.0, 10.37),
               "attention/sdpa-math": (8.07, 8.07, 2_000.0, 1.38)}
THROTTLE_CLOCK_FRACTION = 0.6
ATTENTION_TILE = 128  # query and key rows per tile of the fused attention kernels (FlashAttention-2's)


def _unit(*parts: object) -> float:
    """A deterministic number in [0, 1) from the parts (stable across processes)."""
    h = hashlib.sha256("|".join(map(str, parts)).encode()).digest()
    return int.from_bytes(h[:8], "big") / 2**64


def _seed(*parts: object) -> int:
    return int(_unit(*parts) * 2**63)


@dataclass(frozen=True)
class Injection:
    """Make matching cases `factor` times slower from date `since` (YYYY-MM-DD) on, and
    optionally noisier (`jitter`: extra log-normal sigma per sample, an unstable
    measurement). `reasons` limits it to runs of those reasons (e.g. ["nightly"], so
    that a confirmation rerun sees the clean device). `power_factor` scales the board
    power the case draws (still capped at the SKU's board limit) without changing its
    latency: the same speed for more energy per call."""

    match: dict
    since: str
    factor: float = 1.0
    jitter: float = 0.0
    reasons: tuple[str, ...] | None = None
    power_factor: float = 1.0

    def applies(self, case: Case, dt: str, reason: str | None = None) -> bool:
        if self.reasons is not None and reason not in self.reasons:
            return False
        flat = {"family": case.family, "kernel": case.kernel, "backend": case.backend,
                "dtype": case.dtype, **case.p}
        return dt >= self.since and all(str(flat.get(k)) == str(v) for k, v in self.match.items())


@dataclass(frozen=True)
class NoiseModel:
    jitter_sigma: float = 0.006       # log-normal sigma of each sample
    tail_prob: float = 0.02           # chance of a spike per sample
    tail_scale: float = 0.15          # mean relative size of a spike
    bimodal_share: float = 0.10       # share of cases with two modes across runs
    bimodal_gap: float = 0.03         # distance between the modes
    throttle_prob: float = 0.03       # chance of a throttling episode per case run
    drift_sigma: float = 0.002        # run-to-run drift


def efficiency(hw: Hardware, case: Case) -> tuple[float, float]:
    """Fractions of peak compute and of peak bandwidth reached: both grow with problem
    size (tile and wave quantisation, launch ramp), scaled per chip and family."""
    p = case.p
    # per chip, not per SKU: a real H100 and H200 (one chip, other memory) ran attention
    # bound in the SMs at the same speed (benchmarks/NOTES-harness.md, "Fourth lease")
    sku_factor = 0.85 + 0.15 * _unit("sku-eff", hw.chip or hw.sku, case.family)
    size_bytes = kernel_for(case.kernel).bytes(case)
    memory = 0.92 * size_bytes / (size_bytes + 8e6)
    if case.family == "gemm":
        size = min(int(p["m"]), int(p["n"]), int(p["k"]))
        compute = 0.88 * size / (size + 96.0)
    else:
        compute = 0.6
    return compute * sku_factor, memory * sku_factor


def work(hw: Hardware, case: Case) -> tuple[float, float]:
    """(flops, bytes) the GPU does for one call: the kernel's own counts, except for
    attention, whose backends do different work for the same call (measured on three
    H200 leases, benchmarks/NOTES-harness.md, "Third H200 lease"):
    - the fused backends compute causal attention tile by tile: the tiles on the diagonal
      are computed whole, so n tiles a side cost (n + 1) / 2n of the square, not half
      (prefill 512 causal takes 0.8 of its non-causal time, not 0.5);
    - the math backend is three unfused ops: it computes every score (a causal mask is
      applied after), moves the score matrix four times (written by the first matmul,
      read and written by the softmax, read by the second matmul) and, with grouped-query
      heads, reads K and V once per query head;
    - torch's memory-efficient kernel does not split the keys across blocks: with fewer
      query blocks (batch x heads x q_len / 64) than SMs, only that share of the GPU
      works (a decode of batch 1 and 32 heads runs on 32 of 132 SMs, 3-7x slower than
      flash's split-KV decode, the longer the KV cache the more)."""
    k = kernel_for(case.kernel)
    flops, nbytes = k.flops(case), k.bytes(case)
    if case.family != "attention":
        return flops, nbytes
    from kernels_bench.kernels.attention import Shape

    s = Shape.of(case)
    square = s.causal and s.q_len == s.kv_len  # the kernel counts half of the square's flops
    if case.backend == "sdpa-math":
        scores = s.batch * s.heads * s.q_len * s.kv_len * DTYPE_BYTES[case.dtype]
        # grouped-query heads: the matmuls read K and V once per query head (a GQA decode
        # takes as long as with as many kv heads as query heads: 12.3 ms against 11.4)
        expanded = 2 * s.batch * (s.heads - s.kv_heads) * s.kv_len * s.head_dim * DTYPE_BYTES[case.dtype]
        return (2 * flops if square else flops), nbytes + 4 * scores + expanded
    if square:
        tiles = math.ceil(s.q_len / ATTENTION_TILE)
        flops *= (tiles + 1) / tiles
    if case.backend == "sdpa-efficient":
        blocks = s.batch * s.heads * math.ceil(s.q_len / 64)
        share = min(1.0, blocks / (hw.sm_count or blocks))
        flops, nbytes = flops / share, nbytes / share
    return flops, nbytes


def roofline_terms_ns(hw: Hardware, case: Case) -> tuple[float, float, float]:
    """(compute ns, memory ns, SM ns) of one call, unscaled: its flops at the modelled
    share of peak, its bytes at the modelled share of the HBM bandwidth, and its bytes at
    one byte per SM per clock. The third is the rate at which the SMs themselves take data
    in: kernels that cannot keep enough loads in flight (a decode with few blocks per SM)
    are bound there, and it is the same on two SKUs of one chip whatever their memory (a
    real H100 ran flash decode as fast as an H200 with 1.43x its bandwidth)."""
    flops, nbytes = work(hw, case)
    eff_c, eff_m = efficiency(hw, case)
    peak = hw.peak_tflops.get(case.dtype) or hw.peak_tflops["fp32"]
    per_clock = (hw.sm_count or 0) * (hw.sm_clock_default_mhz or 0) / 1e3  # SM-clocks per ns
    return (flops / (peak * 1e3 * max(eff_c, 1e-3)), nbytes / (hw.memory_bandwidth_gbps * max(eff_m, 1e-3)),
            nbytes / per_clock if per_clock else 0.0)


def mean_latency_ns(hw: Hardware, case: Case, calibration: dict | None = None) -> float:
    """The model's mean latency of one call; `calibration` (default CALIBRATION; {} for
    the uncalibrated roofline) maps a family to its entry (`calibration_for`)."""
    entry = calibration_for(case, CALIBRATION if calibration is None else calibration)
    return calibrated_ns(roofline_terms_ns(hw, case), entry)


def calibrated_ns(terms: tuple[float, float, float], entry: tuple[float, float, float, float | None]) -> float:
    """A call's modelled time from its `roofline_terms_ns` and a calibration entry: the
    slowest of its scaled compute and memory terms and, where the entry has an SM rate,
    its bytes at that many bytes per SM per clock; plus the floor."""
    compute_ns, memory_ns, sm_ns = terms
    compute_scale, memory_scale, floor, sm_bytes_per_clock = entry
    slowest = max(compute_scale * compute_ns, memory_scale * memory_ns)
    if sm_bytes_per_clock:
        slowest = max(slowest, sm_ns / sm_bytes_per_clock)
    return slowest + floor


def calibration_for(case: Case, calibration: dict) -> tuple[float, float, float, float | None]:
    """(compute scale, memory scale, floor_ns, SM bytes per clock or None) for `case`: its
    family and backend's entry ("attention/sdpa-math") where the real nights measured that
    backend, else its family's, else none; a (scale, floor_ns) entry scales both terms
    alike, and one without an SM rate sets no bound there."""
    entry = calibration.get(f"{case.family}/{case.backend}") or calibration.get(case.family, (1.0, KERNEL_FLOOR_NS))
    if len(entry) == 2:
        return entry[0], entry[0], entry[1], None
    return (*entry, None) if len(entry) == 3 else tuple(entry)


@dataclass
class SimDevice:
    sku: str
    noise: NoiseModel = field(default_factory=NoiseModel)
    injections: tuple[Injection, ...] = ()

    def __post_init__(self):
        self.hw = hardware(self.sku)

    @property
    def launch_overhead_ns(self) -> float:
        """The run's launch cost, as `kernels_bench.timing.launch_overhead_ns` measures it."""
        return HOST_LAUNCH_NS

    def measure(self, case: Case, rule: StoppingRule, run_id: str, dt: str, attempt: int = 1,
                reason: str | None = None) -> CaseOutcome:
        nm, hw = self.noise, self.hw
        rng = np.random.default_rng(_seed("samples", self.sku, case.case_id, run_id, attempt))
        level = mean_latency_ns(hw, case)
        level *= math.exp(rng.normal(0.0, nm.drift_sigma))
        if _unit("bimodal", case.case_id) < nm.bimodal_share and rng.random() < 0.5:
            level *= 1.0 + nm.bimodal_gap
        jitter = nm.jitter_sigma
        power_factor = 1.0
        for inj in self.injections:
            if inj.applies(case, dt, reason):
                level *= inj.factor
                jitter = math.hypot(jitter, inj.jitter)
                power_factor *= inj.power_factor
        n = min(rule.max_samples, max(rule.min_samples, int(rule.min_time_s * 1e9 / level) + 1))
        lat = level * np.exp(rng.normal(0.0, jitter, n))
        spikes = rng.random(n) < nm.tail_prob
        lat[spikes] *= 1.0 + rng.exponential(nm.tail_scale, spikes.sum())
        clock = np.full(n, float(hw.sm_clock_default_mhz or 1500)) * (1 + rng.normal(0, 0.003, n))
        if rng.random() < nm.throttle_prob and n >= 4:
            start = int(rng.integers(0, n // 2))
            stop = min(n, start + max(2, n // 4))
            clock[start:stop] *= THROTTLE_CLOCK_FRACTION
            lat[start:stop] /= THROTTLE_CLOCK_FRACTION
        stop_reason = self._stop_reason(lat, rule)
        temp = 55.0 + 25.0 * _unit("temp", case.case_id) + rng.normal(0, 0.5, n)
        board = min(self._power(case, level) * power_factor, self.hw.board_power_w or 500.0)
        power = board * (1 + rng.normal(0, 0.02, n))
        default_clock = hw.sm_clock_default_mhz or 1500
        samples = [{"iteration": i, "latency_ns": int(lat[i]), "sm_clock_mhz": int(clock[i]),
                    "temperature_c": float(temp[i]), "power_w": float(power[i]),
                    "throttled": bool(clock[i] < 0.75 * default_clock)} for i in range(n)]
        return CaseOutcome(status="ok", correct=True, max_abs_error=0.0, max_rel_error=0.0, tolerance=0.0,
                           stop_reason=stop_reason, samples=samples, avg_power_w=board,
                           energy_per_call_j=board * float(np.median(lat)) * 1e-9)

    def _power(self, case: Case, level_ns: float) -> float:
        # Busier kernels (closer to their roofline) draw closer to the board limit.
        limit = self.hw.board_power_w or 500.0
        return limit * (0.35 + 0.6 * max(efficiency(self.hw, case)))

    @staticmethod
    def _stop_reason(lat: np.ndarray, rule: StoppingRule) -> str:
        if len(lat) >= rule.max_samples:
            return "max_samples"
        mean, sd = lat.mean(), lat.std(ddof=1) if len(lat) > 1 else math.inf
        return "noise" if sd / mean <= rule.max_noise else "min_time"
