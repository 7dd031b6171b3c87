"""A benchmark case: what is measured, independent of which suite asked for it."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Case:
    """One kernel with one set of parameters. Its id is stable across suites and runs."""

    family: str
    kernel: str
    backend: str
    dtype: str
    params: tuple[tuple[str, Any], ...]

    @classmethod
    def make(cls, family: str, kernel: str, backend: str, dtype: str, **params: Any) -> "Case":
        return cls(family, kernel, backend, dtype, tuple(sorted(params.items())))

    @property
    def p(self) -> dict[str, Any]:
        return dict(self.params)

    @property
    def case_id(self) -> str:
        ident = {"family": self.family, "kernel": self.kernel, "backend": self.backend,
                 "dtype": self.dtype, "params": self.p}
        blob = json.dumps(ident, sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    @property
    def label(self) -> str:
        shape = ",".join(f"{k}={v}" for k, v in self.params)
        return f"{self.kernel}[{self.backend},{self.dtype},{shape}]"

    def to_dict(self) -> dict[str, Any]:
        return {"family": self.family, "kernel": self.kernel, "backend": self.backend,
                "dtype": self.dtype, "params": self.p}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Case":
        return cls.make(d["family"], d["kernel"], d["backend"], d["dtype"], **d["params"])
