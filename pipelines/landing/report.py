"""What one `perflake ingest` call did: every file with its one outcome, and why.

Outcomes (docs/ingest.md says what a user does about each):
- landed: its rows are in the lake (some rows may have been set aside, see issues);
- skipped: its rows were in the lake already (or a later attempt of its shard is);
- quarantined: refused, with the reason; nothing of its shard landed from this call;
- conflict: the lake holds other rows for the same shard and attempt; kept aside
  under landing/_conflicts/ for a person to resolve, the landed copy untouched.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

OUTCOMES = ("landed", "skipped", "quarantined", "conflict")


@dataclass(frozen=True)
class Issue:
    source: str  # the file
    reason: str  # what was wrong and where (row, field); what to do where it is not obvious
    rows: int = 0  # rows set aside (0: the whole file or shard was refused)


@dataclass
class FileOutcome:
    path: str
    outcome: str            # one of OUTCOMES
    reason: str = ""        # why (for every outcome but a plain landing)
    shard: str = ""         # run_id/shard/attempt the file belonged to, where known


@dataclass
class IngestReport:
    files: list[FileOutcome] = field(default_factory=list)
    landed: list[dict] = field(default_factory=list)    # one per shard: ids, dt, pool, row counts
    duplicates: list[str] = field(default_factory=list)  # skipped files, why
    conflicts: list[dict] = field(default_factory=list)  # one per shard kept aside
    issues: list[Issue] = field(default_factory=list)    # everything refused: files, shards and rows
    notices: list[str] = field(default_factory=list)     # lossless conversions, repeats landed once, overrides
    quarantine_files: list[str] = field(default_factory=list)

    def outcome(self, path, outcome: str, reason: str = "", shard: str = "") -> None:
        assert outcome in OUTCOMES, outcome
        self.files.append(FileOutcome(str(path), outcome, reason, shard))

    @property
    def counts(self) -> dict[str, int]:
        return {o: sum(f.outcome == o for f in self.files) for o in OUTCOMES}

    @property
    def ok(self) -> bool:
        """Nothing was refused (no issue, no conflict) and something was found."""
        return bool(self.files) and not self.issues and not self.conflicts

    def to_dict(self) -> dict:
        return {"ok": self.ok, "counts": self.counts, "files": [asdict(f) for f in self.files],
                "landed": self.landed, "duplicates": self.duplicates, "conflicts": self.conflicts,
                "issues": [asdict(i) for i in self.issues], "notices": self.notices,
                "quarantine_files": self.quarantine_files}

    def summary(self) -> str:
        """One line per file, then the counts: for a person at a terminal."""
        lines = [f"{f.outcome:<11} {f.path}" + (f"  [{f.shard}]" if f.shard else "") + (f": {f.reason}" if f.reason
                                                                                          else "")
                 for f in self.files]
        lines += [f"issue       {i.source}: {i.reason}" + (f" ({i.rows} rows)" if i.rows else "")
                  for i in self.issues if not any(f.path == i.source and f.reason == i.reason for f in self.files)]
        lines.append(", ".join(f"{n} {o}" for o, n in self.counts.items()) + f"; exit {0 if self.ok else 1}")
        return "\n".join(lines)
