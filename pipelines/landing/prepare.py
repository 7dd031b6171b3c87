"""`perflake ingest`, checking a shard that read whole: relate its tables (one run row,
results of that run, samples of those results), decide its pool (the GPU its run row
names) and its night, and set aside the rows that do not fit. What cannot be fixed by
setting rows aside refuses the shard (`shard.refusal`), naming the file and field."""
from __future__ import annotations

import datetime as dt_

import pyarrow as pa

from pipelines.landing import relations
from pipelines.landing.inputs import Shard

# Clocks of remote workers drift; a run "in the future" by more than this is refused.
CLOCK_SKEW = dt_.timedelta(minutes=10)
# No GPU kernel benchmark ran before this: a run that says so comes from a clock never set.
EARLIEST_RUN = dt_.datetime(2000, 1, 1, tzinfo=dt_.timezone.utc)


def prepare(call, shard: Shard) -> None:
    """Relate the shard's tables; decide its pool and date; set aside rows that do not fit."""
    if shard.refusal:
        return
    runs = shard.tables.get("runs")
    reason = relations.run_problem(runs, shard)
    if reason:
        shard.refusal = reason
        return
    run = runs.to_pylist()[0]
    shard.run = run
    pool_name, reason = pool_for(call, run, shard)
    if reason:
        shard.refusal = reason
        return
    future = [c for c in ("started_at", "finished_at") if run[c] > call.now + CLOCK_SKEW]
    if future:
        shard.refusal = (f"run.{future[0]} {run[future[0]].isoformat()} is in the future (now "
                         f"{call.now.isoformat()}): the worker's clock is wrong; fix it and re-run the shard")
        return
    if run["started_at"] < EARLIEST_RUN:
        shard.refusal = (f"run.started_at {run['started_at'].isoformat()} is before "
                         f"{EARLIEST_RUN.date().isoformat()}: the worker's clock was never set; fix it and re-run "
                         "the shard")
        return
    shard.pool = pool_name
    started = (call.now if shard.nvbench else run["started_at"]).astimezone(dt_.timezone.utc).date()
    shard.dt = call.date or started.isoformat()
    if call.date and not shard.nvbench and abs((dt_.date.fromisoformat(call.date) - started).days) > 1:
        shard.notices.append(f"{shard.source}: labelled night {call.date} as --date asks, but the run started "
                             f"{started.isoformat()}; a mislabelled night? (a shard that landed stays where it "
                             "landed)")
    results = relations.filter_results(shard, run)
    if not shard.nvbench:
        short = relations.unmet_claims(shard)
        if short:
            shard.refusal = short
            return
    if results.num_rows == 0:
        shard.refusal = ("nothing of this shard can be accepted: every case result was set aside (first: "
                         f"{next((why for _, why, _ in shard.rejects), '?')})")
        return
    shard.tables["case_results"] = results
    shard.tables["samples"] = relations.filter_samples(shard, run, results)
    run["reason"] = "import"
    shard.tables["runs"] = pa.Table.from_pylist([run], schema=runs.schema)

def pool_for(call, run: dict, shard: Shard) -> tuple[str | None, str | None]:
    """(pool, None) where the pool's hardware is the shard's own, else (None, why not)."""
    sku, kind, name = run.get("gpu_sku"), run["device_kind"], run.get("gpu_name")
    said = f"sku {sku!r}" if sku else f"gpu_name {name!r} (no gpu_sku)"
    if call.pool is None:
        match = [p.name for p in call.registry.values() if p.device_kind == kind and relations.same_gpu(p.sku, sku, name, run)]
        if len(match) != 1:
            return None, (f"unknown pool: {'no' if not match else 'more than one'} registered pool has {said} and "
                          f"device_kind {kind!r} (pools: {sorted(call.registry)}{'; matching: ' + str(match) if match else ''}); "
                          "pass --pool")
        p = call.registry[match[0]]
    else:
        p = call.registry[call.pool]
    mismatch = []
    if p.device_kind != kind:
        mismatch.append(f"device_kind {kind!r}, pool's {p.device_kind!r}")
    if not relations.same_gpu(p.sku, sku, name, run):
        mismatch.append(f"{said}, pool's sku {p.sku!r}")
    if mismatch:
        what = (f"hardware mismatch: the shard's run metadata says {'; '.join(mismatch)} (pool {p.name!r}, "
                f"from {shard.kind_files.get('runs', shard.source)})")
        if not call.force_pool:
            return None, what + "; pass the --pool of that hardware, or --force-pool to land it there anyway"
        shard.notices.append(f"{shard.source}: OVERRIDE (--force-pool): {what}; landed in pool {p.name!r} "
                             "as asked")
        shard.override = what
    elif sku is None and p.sku:
        run["gpu_sku"] = p.sku
        shard.notices.append(f"{shard.source}: gpu_sku {p.sku!r} taken from pool {p.name!r} "
                             f"(the file names the GPU {name!r})")
    return p.name, None
