"""Where everything lives under the lake root ($PERFLAKE_HOME, default ./data)."""
from __future__ import annotations

import datetime
import os
import re
from dataclasses import dataclass
from pathlib import Path

# Names that become path segments: pools, suites, run ids. No separators, no dots first.
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def safe_name(value: str, what: str) -> str:
    """`value` if it is safe as one path segment; otherwise a ValueError naming `what`."""
    if not isinstance(value, str) or not _SAFE_NAME.match(value) or ".." in value:
        raise ValueError(f"{what} {value!r} is not a valid name (letters, digits, '_', '-', '.'; no '..' or '/')")
    return value


def safe_date(value: str) -> str:
    """`value` if it is a calendar date written YYYY-MM-DD (it becomes a dt= partition);
    otherwise a ValueError: 2026-13-45 would land rows under a night that never was."""
    if not isinstance(value, str) or not _DATE.match(value):
        raise ValueError(f"date {value!r} is not YYYY-MM-DD")
    try:
        datetime.date.fromisoformat(value)
    except ValueError:
        raise ValueError(f"date {value!r} is not a calendar date (YYYY-MM-DD)") from None
    return value


@dataclass(frozen=True)
class Lake:
    root: Path

    @classmethod
    def from_env(cls, root: str | Path | None = None) -> "Lake":
        return cls(Path(root or os.environ.get("PERFLAKE_HOME", "data")).resolve())

    @property
    def landing(self) -> Path:
        return self.root / "landing"

    @property
    def warehouse(self) -> Path:
        return self.root / "warehouse"

    @property
    def metastore(self) -> Path:
        return self.root / "metastore"

    @property
    def reports(self) -> Path:
        return self.root / "reports"

    @property
    def quarantine(self) -> Path:
        return self.root / "quarantine"

    def landing_file(self, kind: str, dt: str, pool: str, run_id: str, shard: int) -> Path:
        """landing/<kind>/dt=/pool=/run_id=/shard-<i>.parquet: one file per shard, so a
        retried shard replaces exactly its own rows."""
        return (self.landing / safe_name(kind, "landing kind") / f"dt={safe_date(dt)}"
                / f"pool={safe_name(pool, 'pool')}" / f"run_id={safe_name(run_id, 'run id')}"
                / f"shard-{int(shard)}.parquet")

    def table_path(self, table: str) -> Path:
        return self.warehouse / safe_name(table, "table")
