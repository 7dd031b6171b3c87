"""When to stop taking samples: nvbench's relative-noise rule.

Stop once at least `min_samples` samples and `min_time_s` of measured time are in and
the relative noise (stdev / mean) is under `max_noise`; give up at `timeout_s` of wall
time or `max_samples`. The reason is recorded with the results.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass(frozen=True)
class StoppingRule:
    min_samples: int = 10
    min_time_s: float = 0.5
    max_noise: float = 0.005
    timeout_s: float = 15.0
    max_samples: int = 100_000

    @classmethod
    def from_dict(cls, d: dict | None) -> "StoppingRule":
        """The rule from a mapping (a suite file, `--stopping`, a DAG run's `stopping`):
        ValueError naming the key for one that is unknown, of the wrong type, or out of
        LIMITS (a budget that would crash the measurement, hold a GPU for hours or fill
        the memory)."""
        d = dict(d or {})
        unknown = set(d) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"stopping rule: unknown keys {sorted(unknown)}; the keys are "
                             f"{sorted(cls.__dataclass_fields__)}")
        for key, value in d.items():
            low, high = LIMITS[key]
            whole = key.endswith("_samples")
            number = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
            if not number or (whole and value != int(value)):
                raise ValueError(f"stopping.{key} is {value!r}: expected {'a whole number' if whole else 'a number'}")
            if not low <= value <= high:
                raise ValueError(f"stopping.{key} is {value!r}: expected {low} to {high}")
            d[key] = int(value) if whole else float(value)
        rule = cls(**d)
        if rule.max_samples < rule.min_samples:
            raise ValueError(f"stopping.max_samples {rule.max_samples} is below stopping.min_samples {rule.min_samples}")
        return rule


# What a rule may ask: at least one sample, at most a million a case (each is kept), and
# no case longer than three hours (a shard's task times out after two).
LIMITS = {"min_samples": (1, 1_000_000), "max_samples": (1, 1_000_000), "min_time_s": (0.0, 10_800.0),
          "timeout_s": (0.001, 10_800.0), "max_noise": (0.0, 1.0)}


@dataclass
class StoppingState:
    """Running state of one case's sampling; `reason` is None until it should stop."""

    rule: StoppingRule
    n: int = 0
    measured_s: float = 0.0
    _sum: float = 0.0
    _sumsq: float = 0.0
    reason: str | None = field(default=None)

    def add(self, seconds: float, wall_elapsed_s: float) -> None:
        self.n += 1
        self.measured_s += seconds
        self._sum += seconds
        self._sumsq += seconds * seconds
        self.reason = self._decide(wall_elapsed_s)

    @property
    def rel_noise(self) -> float:
        if self.n < 2 or self._sum <= 0:
            return math.inf
        mean = self._sum / self.n
        var = max(self._sumsq / self.n - mean * mean, 0.0) * self.n / (self.n - 1)
        return math.sqrt(var) / mean

    def _decide(self, wall_elapsed_s: float) -> str | None:
        r = self.rule
        if self.n >= r.max_samples:
            return "max_samples"
        if wall_elapsed_s >= r.timeout_s:
            return "timeout"
        if self.n >= r.min_samples and self.measured_s >= r.min_time_s and self.rel_noise <= r.max_noise:
            return "noise"
        return None
