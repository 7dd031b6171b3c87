"""`perflake ingest`: land benchmark results produced elsewhere, and say what became of
every file.

Accepted inputs, each PATH a file or a folder (walked recursively):
- harness output in the landing schema (`samples.parquet`, `case_results.parquet`,
  `run.parquet` as `python -m kernels_bench run --out DIR` writes them); the files of
  one folder form one shard, wherever that folder is;
- nvbench `--json` output, recognised by its structure: one state becomes one case
  result; per-sample times land as samples where the JSON points at its
  `nv/cold/sample_times` binary file.

What the lake promises (docs/ingest.md has the user's side):
- a shard is (run_id, shard); it lands once, whatever date, pool, file name or encoding
  it arrives under. The same rows again are skipped; a later attempt replaces an earlier
  one where it landed; more rows of the same attempt complete it; fewer or other rows
  are a conflict, kept aside under landing/_conflicts/ and never over the landed copy;
- a shard with any member file unreadable, refused or short of the samples its case
  results claim lands nothing, and what had landed stays;
- the pool's GPU SKU and device kind match the shard's own (`--force-pool` overrides,
  logged in the report and the manifest);
- rows that cannot be measurements (impossible values, repeated keys with other values,
  rows of another run) are quarantined one by one with the row and field named, and
  the rest of the shard lands;
- every file ends in exactly one outcome (pipelines/landing/report.py), and one bad file
  never stops its neighbours.

Ingest is pyarrow only (no Spark).
"""
from __future__ import annotations

import datetime as dt_
import hashlib
import json
import traceback
from collections import Counter
from pathlib import Path

from pipelines.config.lake import Lake, safe_date, safe_name
from pipelines.landing import reading
from pipelines.landing.files import LAND_ORDER, atomic_write, shard_lock
from pipelines.landing.identity import LandedCopy, compare, landed_copies, run_nights
from pipelines.landing.inputs import Shard, discover
from pipelines.landing.prepare import prepare
from pipelines.landing.records import (identity_lock, manifest_has, one_line, quarantine_records, record_landed,
                                       record_set_aside, remove_dead_temporaries, set_aside_when_landed, sha256_file,
                                       write_atomic, write_quarantine)
from pipelines.landing.report import IngestReport, Issue

__all__ = ["ingest", "IngestReport", "Issue"]


# --------------------------------------------------------------------------- entry point


def ingest(paths: list[str | Path], lake: Lake, *, pool: str | None = None, date: str | None = None,
           registry: dict | None = None, now: dt_.datetime | None = None, force_pool: bool = False,
           verbose: bool = False) -> IngestReport:
    """Land every valid shard found in `paths`; report every file's outcome and
    quarantine what was refused. Raises ArgumentError only for arguments that make the
    whole call unlandable (an unknown --pool, a malformed --date)."""
    from pipelines.config.pools import load_pools

    registry = registry if registry is not None else load_pools()
    now = now or dt_.datetime.now(dt_.timezone.utc)
    try:
        if any(not str(p).strip() for p in paths):
            raise ValueError("an empty PATH (an unset shell variable?): name the files or folders to ingest "
                             "('.' for the current folder)")
        if pool is not None and safe_name(pool, "pool") not in registry:
            raise ValueError(f"unknown pool {pool!r}; registered pools: {sorted(registry)} "
                             f"(add it to pools.yaml or $PERFLAKE_POOLS)")
        if date is not None:
            safe_date(date)
    except ValueError as e:
        raise ArgumentError(str(e)) from None
    for folder in (lake.landing / "_ingested", lake.quarantine / "ingest"):
        remove_dead_temporaries(folder)
    report = IngestReport()
    ctx = _Call(lake, report, pool, date, registry, now, force_pool, verbose)
    files = discover(paths, report)
    if not files:
        report.issues.append(Issue(", ".join(map(str, paths)) or "(no paths)",
                                   "nothing to ingest: no files found (ingest takes harness Parquet files, "
                                   "nvbench --json output, or folders holding them)"))
        return report
    shards = reading.read(ctx, files)
    for shard in shards:
        ctx.guard(shard, shard.source, prepare, ctx, shard)
    _one_night_per_run([s for s in shards if s.refusal is None and s.run])
    # Whole copies first, then later attempts, then fuller copies: a partial or shorter copy
    # of one shard in the same call is judged against the whole or fuller one (as it would
    # be in a later call), not the other way round.
    order = sorted(shards, key=lambda s: (s.refusal is not None, bool(s.rejects), -_attempt_of(s), -_rows_of(s)))
    for shard in order:
        if shard.refusal is None:
            ctx.guard(shard, shard.source, ctx.land, shard)
        if shard.refusal is not None:
            ctx.refuse_shard(shard)
    ctx.finish()
    return report


def _one_night_per_run(shards: list[Shard]) -> None:
    """The shards of one run in this call land on one night, the earliest any of them
    names: a run whose shards started either side of midnight would otherwise land on two
    nights, and each night's mine would publish its cases (`_Call.land` does the same
    against the shards of the run that landed before)."""
    nights: dict[str, str] = {}
    for s in shards:
        rid = s.run["run_id"]
        nights[rid] = min(nights.get(rid, s.dt), s.dt)
    for s in shards:
        night = nights[s.run["run_id"]]
        if s.dt != night:
            s.notices.append(f"{s.source}: lands on night {night} with the other shards of run "
                             f"{s.run['run_id']} in this call (it names {s.dt}): a run is mined on one night")
            s.dt = night


class ArgumentError(ValueError):
    """An argument that makes the whole call unlandable (an unknown --pool, a bad --date)."""


def _attempt_of(s: Shard) -> int:
    return (s.run or {}).get("attempt") or 0


def _rows_of(s: Shard) -> int:
    return sum(t.num_rows for t in s.tables.values())


class _Call:
    """The state of one ingest call: its options, its report and its quarantine; the
    outcome of each file; and landing a prepared shard (pipelines/landing/reading.py
    reads the shards, pipelines/landing/prepare.py checks them)."""

    def __init__(self, lake, report, pool, date, registry, now, force_pool, verbose):
        self.lake, self.report, self.pool, self.date = lake, report, pool, date
        self.registry, self.now, self.force_pool, self.verbose = registry, now, force_pool, verbose
        self.file_rejects: list[tuple[str, str, dict]] = []
        self.outcomes: dict[Path, list[tuple[str, str, str]]] = {}  # file -> [(outcome, reason, shard)]
        self.order: list[Path] = []

    # ---------------------------------------------------------------- outcomes

    def mark(self, path: Path, outcome: str, reason: str = "", shard: str = "") -> None:
        if path not in self.outcomes:
            self.order.append(path)
        self.outcomes.setdefault(path, []).append((outcome, reason, shard))

    def refuse_file(self, path: Path, reason: str) -> None:
        self.report.issues.append(Issue(str(path), reason))
        self.file_rejects.append((str(path), reason, {}))
        self.mark(path, "quarantined", reason)

    def guard(self, shard: Shard | None, where: str, fn, *args):
        """Run one step for one input; any failure becomes that input's refusal, named,
        never the call's (the traceback only with verbose)."""
        try:
            return fn(*args)
        except Exception as e:  # noqa: BLE001 - one bad input must not stop its neighbours
            why = f"could not be ingested: {one_line(e)}"
            if self.verbose:
                why += "\n" + traceback.format_exc()
            if shard is None:
                self.refuse_file(Path(where), why)
            else:
                shard.refusal = shard.refusal or why
            return None

    def finish(self) -> None:
        rank = {"quarantined": 0, "conflict": 1, "landed": 2, "skipped": 3}
        for path in self.order:
            entries = sorted(self.outcomes[path], key=lambda e: rank[e[0]])
            outcome = entries[0][0]
            reason = "; ".join(dict.fromkeys(r for o, r, _ in entries if r and o == outcome))
            shard = ", ".join(dict.fromkeys(s for _, _, s in entries if s))
            self.report.outcome(path, outcome, reason, shard)
        write_quarantine(self.lake, self.report, self.file_rejects, self.date or self.now.date().isoformat(),
                         self.now)

    # ---------------------------------------------------------------- landing

    def land(self, shard: Shard) -> None:
        run = shard.run
        rid, sh, attempt = run["run_id"], run["shard"], run["attempt"]
        label = f"{rid}/{sh}/{attempt}"
        ignore = ("started_at", "finished_at") if shard.nvbench else ()
        with identity_lock(self.lake, rid, sh):
            copies = landed_copies(self.lake, rid, sh)
            same = [c for c in copies if compare(shard.tables, c.tables, ignore) == "same"]
            if same:
                return self.settle(shard, label, same[0])
            target: LandedCopy | None = None
            if len(copies) > 1:
                return self.conflict(shard, label, copies, "the lake holds this shard more than once already")
            if copies:
                target = copies[0]
                landed_attempt = target.attempt or 0
                where = target.where(self.lake, rid, sh)
                hw = self.hardware_of(target.pool)
                if hw and hw != self.hardware_of(shard.pool) and not self.force_pool:
                    return self.conflict(shard, label, copies, f"the landed copy is in pool {target.pool!r} "
                                         f"({hw}), this one is for pool {shard.pool!r}")
                unfinished = target.attempts
                if len(unfinished) > 1 and attempt < max(unfinished):
                    return self.conflict(shard, label, copies, (
                        f"the copy in {where} is a replacement by attempt {max(unfinished)} that did not finish "
                        f"(its files hold attempts {sorted(unfinished)}); ingest attempt {max(unfinished)} again "
                        "to finish it"))
                if attempt < landed_attempt:
                    partial = set_aside_when_landed(self.lake, rid, sh, landed_attempt)
                    if partial and not shard.rejects:
                        return self.conflict(shard, label, copies, (
                            f"attempt {landed_attempt}, landed in {where}, had {partial} rows set aside; this "
                            f"attempt {attempt} is whole, so neither replaces the other unasked"))
                    return self.skipped(shard, label, f"superseded: attempt {landed_attempt} of this shard "
                                                      f"landed in {where}; this is attempt {attempt}")
                if attempt == landed_attempt:
                    how = compare(shard.tables, target.tables, ignore)
                    if how != "more":
                        return self.conflict(shard, label, copies, (
                            "holds fewer rows than" if how == "less" else "holds other rows than") +
                            f" the copy of attempt {attempt} landed in {where}")
                    shard.notices.append(f"{shard.source}: completes the copy of {label} in {where} "
                                         "(every landed row and more)")
                elif shard.rejects:
                    return self.conflict(shard, label, copies, (
                        f"attempt {attempt} had {len(shard.rejects)} rows set aside (see issues); it does not "
                        f"replace attempt {landed_attempt}, landed whole in {where}"))
                else:
                    shard.notices.append(f"{shard.source}: attempt {attempt} replaces attempt {landed_attempt} "
                                         f"in {where}")
                shard.dt, shard.pool = target.dt, target.pool
            else:  # a shard new to the lake lands on the night its run's other shards landed on
                nights = run_nights(self.lake, rid)
                if nights and shard.dt not in nights:
                    shard.notices.append(f"{shard.source}: lands on night {nights[0]}, where run {rid}'s other "
                                         f"shards landed (it names {shard.dt}): a run is mined on one night")
                    shard.dt = nights[0]
            self.write(shard, label)

    def hardware_of(self, pool: str | None) -> tuple[str, str] | None:
        p = self.registry.get(pool or "")
        return (p.sku, p.device_kind) if p else None

    def write(self, shard: Shard, label: str) -> None:
        run = shard.run
        rid, sh = run["run_id"], run["shard"]
        written, unrecorded = {}, []
        # Samples first and the run row last, as land_shard does: a run row implies its data.
        try:
            with shard_lock(self.lake, dt=shard.dt, pool=shard.pool, run_id=rid, shard=sh):
                for kind in LAND_ORDER:
                    write_atomic(shard.tables[kind], self.lake.landing_file(kind, shard.dt, shard.pool, rid, sh))
                    written[kind] = shard.tables[kind].num_rows
                try:  # under the lock, as the data: an older attempt arriving meanwhile reads both
                    record_set_aside(self.lake, rid, sh, run["attempt"], len(shard.rejects))
                except OSError as e:
                    unrecorded.append(e)
        except OSError as e:  # a full disk, a read-only lake: nothing published past the failure
            files = " and ".join(written)
            shard.refusal = f"could not be written to the lake ({one_line(e)})" + (
                f"; its {files} file{'s' * (len(written) > 1)} landed before the failure, withheld from mining "
                "until the shard is ingested again" if written else "")
            return
        # Landed: what follows is bookkeeping, and its failure must not report the shard as not landed.
        for path in shard.members:
            self.mark(path, "landed", "", label)
        self.report.landed.append({"source": shard.source, "run_id": rid, "shard": sh, "attempt": run["attempt"],
                                   "dt": shard.dt, "pool": shard.pool, **written})
        self.report.notices += shard.notices
        if shard.rejects:
            counts = Counter((src, why) for src, why, _ in shard.rejects)
            self.report.issues += [Issue(src, why, n) for (src, why), n in counts.items()]
        try:
            for path in shard.members:
                record_landed(self.lake, path, shard.dt, shard.pool, rid, sh, self.now, shard.override,
                              shard.read_sha256.get(path))
        except OSError as e:
            unrecorded.append(e)
        if unrecorded:
            self.report.issues.append(Issue(shard.source, f"landed, but its ingest manifest could not be written "
                                                          f"({one_line(unrecorded[0])})"))
        write_quarantine(self.lake, self.report, shard.rejects, shard.dt, self.now, shard_key=(rid, sh, run["attempt"]))

    def settle(self, shard: Shard, label: str, copy: LandedCopy) -> None:
        """The same rows are landed already: skip them, and do again what an ingest killed
        between publishing them and its bookkeeping left undone (its quarantine file is
        named by the shard and its rows, so writing it again replaces it; the manifest is
        written where it is missing). A copy landed by --force-pool in a pool of other
        hardware is said so."""
        run = shard.run
        where = copy.where(self.lake, run["run_id"], run["shard"])
        why = f"already landed: the same rows are in {where}; skipped"
        override = shard.override
        own, theirs = self.hardware_of(shard.pool), self.hardware_of(copy.pool)
        if own and theirs and own != theirs:
            override = override or (f"landed in pool {copy.pool!r} ({theirs[0]}, {theirs[1]}), not of this shard's "
                                    f"hardware ({own[0]}, {own[1]}); --force-pool put it there")
            why += f" (note: that is pool {copy.pool!r}, of other hardware than this shard's; see the manifest)"
        self.skipped(shard, label, why)
        if shard.rejects:
            counts = Counter((src, reason) for src, reason, _ in shard.rejects)
            self.report.issues += [Issue(src, reason, n) for (src, reason), n in counts.items()]
            write_quarantine(self.lake, self.report, shard.rejects, copy.dt, self.now,
                             shard_key=(run["run_id"], run["shard"], run["attempt"]))
        try:
            for path in shard.members:
                sha = shard.read_sha256.get(path) or sha256_file(path)
                if not manifest_has(self.lake, sha):
                    record_landed(self.lake, path, copy.dt, copy.pool, run["run_id"], run["shard"], self.now,
                                  override, sha)
        except OSError as e:
            self.report.issues.append(Issue(shard.source, f"its ingest manifest could not be written ({one_line(e)})"))

    def skipped(self, shard: Shard, label: str, why: str) -> None:
        self.report.duplicates += [f"{p}: {why.replace('already landed', 'already ingested', 1)}"
                                   for p in shard.members]
        self.report.notices.append(f"{shard.source}: {why}")
        for path in shard.members:
            self.mark(path, "skipped", why, label)

    def conflict(self, shard: Shard, label: str, copies: list[LandedCopy], why: str) -> None:
        run = shard.run
        rid, sh = run["run_id"], run["shard"]
        body = json.dumps({k: t.to_pylist() for k, t in sorted(shard.tables.items())}, default=str, sort_keys=True)
        kept = (self.lake.landing / "_conflicts" / f"run_id={rid}" / f"shard-{sh}"
                / f"attempt-{run['attempt']}-{hashlib.sha256(body.encode()).hexdigest()[:12]}")
        for kind in LAND_ORDER:
            write_atomic(shard.tables[kind], kept / f"{kind}.parquet")
        landed = [c.where(self.lake, rid, sh) for c in copies]
        entry = {"run_id": rid, "shard": sh, "attempt": run["attempt"], "source": shard.source,
                 "landed": landed, "kept": str(kept), "reason": why}
        atomic_write(kept / "conflict.json", lambda tmp: tmp.write_text(json.dumps(entry, indent=1)))
        self.report.conflicts.append(entry)
        text = (f"conflict: {why}; the landed copy is untouched and this one is kept in {kept}. Compare them, "
                "then remove the wrong one (docs/ingest.md)")
        for path in shard.members:
            self.mark(path, "conflict", text, label)

    def refuse_shard(self, shard: Shard) -> None:
        label = (f"{shard.run['run_id']}/{shard.run['shard']}/{shard.run['attempt']}" if shard.run else "")
        for path in shard.members:
            why = shard.refused_files.get(path)
            if why:
                self.report.issues.append(Issue(str(path), why))
        self.report.issues.append(Issue(shard.source, shard.refusal))
        for path in shard.members:
            why = shard.refused_files.get(path)
            self.mark(path, "quarantined", why or f"not landed: {shard.refusal}", label)
        for kind, table in shard.tables.items():
            shard.rejects += [(f"{shard.source} [{kind}]", shard.refusal, r) for r in quarantine_records(table)]
        shard.rejects += [(str(p), why, {}) for p, why in shard.refused_files.items()]
        write_quarantine(self.lake, self.report, shard.rejects, self.date or self.now.date().isoformat(), self.now,
                         shard.members)
