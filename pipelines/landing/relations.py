"""How the tables of one shard relate: one run row that can be attributed, case results
of known kernels that the samples back, samples of that run. Each check names the row
and the field; the caller (pipelines/landing/prepare.py) sets the rows aside or refuses the shard.
"""
from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipelines.config.lake import safe_name
from pipelines.landing.values import (ABSOLUTE_ZERO_C, HOUR_NS, MAX_TEMPERATURE_C, RUN_STATUSES, clock_ceiling_mhz,
                                      repeated_keys, result_problem, sample_problem)
from schemas.tables import SAMPLES

# Columns by which a Parquet file under another name shows which table it holds.
_SIGNATURES = {"samples": {"latency_ns", "iteration"}, "case_results": {"case_id", "kernel", "status"},
               "runs": {"started_at", "hardware_fingerprint"}}
def guess_kind(path: Path) -> tuple[str | None, str | None]:
    """(the landing table a Parquet file's columns say it holds, or None; why its
    schema cannot be read, or None)."""
    try:
        with open(path, "rb") as f:
            names = set(pq.read_schema(f).names)
    except Exception as e:  # noqa: BLE001 - an unreadable footer raises several Arrow and OS errors
        return None, f"not a readable Parquet file: {type(e).__name__}: {str(e).strip().splitlines()[0][:200]}"
    kinds = [kind for kind, sig in _SIGNATURES.items() if sig <= names]
    return (kinds[0] if len(kinds) == 1 else None), None


def same_gpu(pool_sku: str, sku: str | None, name: str | None, run: dict | None = None) -> bool:
    """The shard's GPU is the pool's: the same SKU, or (where the shard names no SKU, as
    nvbench does) a GPU name that names the pool SKU's model (H100 in 'NVIDIA H100 80GB
    HBM3') and nothing the SKU is not: another form factor ('H100 PCIe', 'H100 NVL' are
    not an H100 SXM5), another memory size ('A100-PCIE-40GB' is not an A100 80GB), or,
    where the run reports them, another SM count or memory (the hardware catalog's)."""
    if sku is not None:
        return sku == pool_sku
    words = _words(name or "")
    if pool_sku.split("-")[0].lower() not in words:
        return False
    from kernels_bench.hardware import load_catalog

    hw = load_catalog().get(pool_sku)
    spec = _words(f"{pool_sku} {hw.name if hw else ''}")
    if any(form in words and form not in spec for form in _FORM_FACTORS):
        return False
    sizes, spec_sizes = _sizes_gb(words), _sizes_gb(spec)
    if sizes and spec_sizes and not sizes & spec_sizes:
        return False
    run = run or {}
    if hw and hw.sm_count and run.get("sm_count") and int(run["sm_count"]) != hw.sm_count:
        return False
    # A device reports a little less memory than its nominal size (ECC, the driver's share).
    if hw and hw.memory_bytes and run.get("memory_bytes") and not (
            0.85 * hw.memory_bytes <= int(run["memory_bytes"]) <= 1.02 * hw.memory_bytes):
        return False
    return True


_FORM_FACTORS = ("pcie", "nvl", "sxm")


def _words(text: str) -> set[str]:
    """The words of a GPU name, lower case; SXM4 and SXM5 read as one form factor, SXM."""
    return {"sxm" if w.startswith("sxm") else w for w in re.split(r"[\s\-_()/]+", text.lower()) if w}


def _sizes_gb(words: set[str]) -> set[str]:
    return {w for w in words if re.fullmatch(r"\d+gb", w)}


def run_problem(runs: pa.Table | None, shard) -> str | None:
    if runs is None:
        return "no run metadata: the shard has no readable run.parquet, so its rows cannot be attributed"
    if runs.num_rows == 0:
        return "run.parquet holds no row; a shard has exactly one (a shard that never finished?)"
    if runs.num_rows > 1:
        return (f"run.parquet holds {runs.num_rows} rows; a shard has exactly one (several shards' run files "
                "joined into one? ingest each shard's folder as the harness wrote it)")
    if shard.tables.get("case_results") is None or shard.tables["case_results"].num_rows == 0:
        return "empty shard: no case results; re-run the shard or upload its case_results.parquet"
    for name, col in zip(runs.column_names, runs.columns):
        try:
            col.to_pylist()
        except (OverflowError, ValueError):
            return (f"run.parquet row 0: {name} cannot be read as a value ({col.type}; a timestamp past "
                    f"year 9999?) (field {name}); re-export the shard from the harness")
    run = runs.to_pylist()[0]
    missing = [c for c in ("run_id", "shard", "attempt", "started_at") if run.get(c) is None]
    if missing:
        return f"run.parquet row 0: {missing} are null"
    try:
        safe_name(run["run_id"], "run.run_id (row 0)")
    except ValueError as e:
        return str(e)
    if run["attempt"] < 1 or run["shard"] < 0:
        return (f"run.parquet row 0: attempt {run['attempt']} and shard {run['shard']} (fields attempt, shard): "
                "attempts count from 1 and shards from 0")
    if run.get("status") not in RUN_STATUSES:
        return (f"run.parquet row 0: status {run.get('status')!r} is not one of {', '.join(RUN_STATUSES)} "
                "(field status)")
    if run["finished_at"] < run["started_at"]:
        return (f"run.parquet row 0: finished_at {run['finished_at'].isoformat()} is before started_at "
                f"{run['started_at'].isoformat()} (field finished_at)")
    return None


def unmet_claims(shard) -> str | None:
    """Why the shard is short of samples its case results claim (None when it is not).
    A sample counts once per (run_id, case, attempt, iteration): a repeat does not stand in
    for one that is missing (it lands once, and the case would land short). A row set
    aside for a value (another run_id among them) still counts: it is named in the
    quarantine with its reason."""
    src = shard.kind_files.get("case_results")
    held = _held_samples(shard)
    for i, r in enumerate(shard.tables["case_results"].to_pylist()):
        claimed = r.get("n_samples") or 0
        have = held.get((r["case_id"], r["attempt"]), 0)
        if claimed > have:
            unread = [why for where, why, _ in shard.rejects if where.endswith("[samples]")]
            also = (f" ({len(unread)} sample rows could not be read, first: {unread[0]})" if unread else "")
            rows = shard.present.get(r["case_id"], 0)
            other = f" ({rows} rows, counting repeats)" if rows != have else ""
            return (f"incomplete shard: {src} row {i} (case {r['case_id']}, status {r['status']}) claims "
                    f"n_samples {claimed} (field n_samples), the samples file holds {have} distinct samples "
                    f"for it{other}{also}; upload the complete samples file")
    return None


def _held_samples(shard) -> Counter:
    """{(case_id, attempt): samples}: its distinct (run_id, iteration) keys, and its rows
    whose values could not be stored (set aside with their reason). In Arrow: a shard may
    hold a million samples (benchmarks/NOTES-scale.md)."""
    t = shard.tables.get("samples")
    if t is None or t.num_rows == 0:
        return Counter()
    keys = ["run_id", "case_id", "attempt", "iteration"]
    unstored = np.zeros(t.num_rows, dtype=bool)
    unstored[sorted(shard.skip.get("samples", ()))] = True
    k = t.select(keys)
    stored = k.filter(pa.array(~unstored))
    distinct = stored.filter(pc.is_valid(stored["iteration"])).group_by(keys).aggregate([])
    held = Counter()
    for part in (distinct, k.filter(pa.array(unstored))):
        counts = part.group_by(["case_id", "attempt"]).aggregate([([], "count_all")])
        for case_id, attempt, n in zip(*(counts.column(c).to_pylist() for c in ("case_id", "attempt", "count_all"))):
            held[(case_id, attempt)] += n
    return held


def filter_results(shard, run: dict) -> pa.Table:
    from kernels_bench.kernels import KERNELS
    from kernels_bench.kernels.base import DTYPE_BYTES

    def problem(r: dict, i: int) -> str | None:
        why = mismatch(r, run, i, "case_results") or result_problem(r, i, run)
        if why is None and r["family"] != "nvbench":  # nvbench benchmarks are outside our registry
            if r["kernel"] not in KERNELS:
                why = f"row {i}: unknown kernel {r['kernel']!r} (field kernel); known: {sorted(KERNELS)}"
            elif r["dtype"] not in DTYPE_BYTES:
                why = f"row {i}: unknown dtype {r['dtype']!r} (field dtype); known: {sorted(DTYPE_BYTES)}"
            elif (described := described_case_id(r)) != r["case_id"]:
                why = (f"row {i}: case_id {r['case_id']!r} is not the id of the case the row describes "
                       f"({r['kernel']}[{r['backend']},{r['dtype']}] with its params is {described!r}) (field "
                       "case_id); its rows would be published as another case's: re-export it from the harness")
        return why

    table = _no_reading(shard, shard.tables["case_results"], "case_results")
    keep = _keep(shard, "case_results", table.to_pylist(), ("run_id", "case_id", "attempt"), problem)
    return pa.Table.from_pylist(keep, schema=table.schema)


def described_case_id(r: dict) -> str:
    """The case id of the case a case_results row describes: its family, kernel, backend,
    dtype and params, the params read back from the strings the harness wrote them as
    (`kernels_bench.case.Case.case_id` hashes the values: 128, False, 1e-06)."""
    from kernels_bench.case import Case

    params = r.get("params") or {}
    items = params.items() if isinstance(params, dict) else params
    return Case.make(r["family"], r["kernel"], r["backend"], r["dtype"],
                     **{k: _param_value(v) for k, v in items}).case_id


def _param_value(text: str):
    for parse in (int, float):
        try:
            return parse(text)
        except (TypeError, ValueError):
            pass
    return {"True": True, "False": False, "None": None}.get(text, text)


# Telemetry a device may not report: NaN there is "no reading", landed as null.
_OPTIONAL_READINGS = {"samples": ("temperature_c", "power_w"), "case_results": ("energy_per_call_j", "avg_power_w")}


def _no_reading(shard, table: pa.Table, kind: str) -> pa.Table:
    """`table` with NaN in its optional readings as null, each column's count noticed."""
    for col in _OPTIONAL_READINGS[kind]:
        if col in table.column_names and pa.types.is_floating(table.schema.field(col).type):
            nan = pc.fill_null(pc.is_nan(table[col]), False)
            n_nan = pc.sum(nan).as_py() or 0
            if n_nan:
                table = table.set_column(table.column_names.index(col), col,
                                         pc.if_else(nan, pa.scalar(None, table.schema.field(col).type), table[col]))
                shard.notices.append(f"{shard.kind_files.get(kind, shard.source)} [{kind}]: {n_nan} rows "
                                     f"have NaN in {col}, read as no reading (null)")
    return table


def filter_samples(shard, run: dict, results: pa.Table) -> pa.Table:
    schema = SAMPLES.arrow_schema(with_partitions=False)
    table = shard.tables.get("samples")
    if table is None:
        return schema.empty_table()
    table = _no_reading(shard, table, "samples")
    cases = set(results.column("case_id").to_pylist())
    owners = shard.sample_owners
    ceiling = clock_ceiling_mhz(run.get("gpu_sku"))

    def problem(r: dict, i: int) -> str | None:
        why = mismatch(r, run, i, "samples")
        if why is None and r["case_id"] not in cases:
            why = f"row {i}: case_id {r['case_id']!r} has no accepted case result in this shard"
        if why is None and owners is not None and owners[i] not in shard.landing_rows.get("case_results", ()):
            # nvbench: two states of one case; the samples of the one set aside go with it
            why = (f"row {i}: measured for case result row {owners[i]} (case_id {r['case_id']!r}), which was set "
                   "aside; its samples go with it")
        return why or sample_problem(r, i, run, ceiling)

    if owners is None:
        passing = _passing_samples(table, run, cases, ceiling)
        if passing is not None:
            landed = _land_in_arrow(shard, table, passing, schema, problem)
            if landed is not None:
                return landed
    keep = _keep(shard, "samples", table.to_pylist(), SAMPLE_KEYS, problem)
    return pa.Table.from_pylist(keep, schema=schema)


SAMPLE_KEYS = ("run_id", "case_id", "attempt", "iteration")


def _land_in_arrow(shard, table: pa.Table, passing: np.ndarray, schema: pa.Schema, problem) -> pa.Table | None:
    """The samples that land, judged without a Python object per row where possible.

    A row that passes every rule in Arrow (`_passing_samples`) and whose key no other
    row of the file has lands as it is: the row-by-row path would keep it whatever it
    decided about the others. Only the doubtful rows (a rule failed, a repeated key, set
    aside when the file was read) go row by row (`_keep`), which names each reason, so a
    shard of millions of rows with a few bad ones costs a Python object per bad row, not
    per row (~1.5 KB each). None where the rows are not of the landing types: the caller
    judges them all row by row."""
    doubt = ~passing
    doubt[np.fromiter(shard.skip.get("samples", ()), dtype=np.int64)] = True
    doubt[_repeated_key_rows(table, SAMPLE_KEYS)] = True
    clean_rows = np.flatnonzero(~doubt)
    try:
        clean = _as_landing(table.take(clean_rows) if len(clean_rows) < table.num_rows else table, schema)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None  # not the landing types: row by row, as any other doubt
    doubtful = np.flatnonzero(doubt)
    if not len(doubtful):
        shard.landing_rows["samples"] = set(range(table.num_rows))
        return clean
    index = doubtful.tolist()
    keep, kept_rows = _judge(shard, "samples", table.take(doubtful).to_pylist(), SAMPLE_KEYS, problem, index)
    shard.landing_rows["samples"].update(clean_rows.tolist())
    kept = pa.Table.from_pylist(keep, schema=schema)
    order = np.concatenate([clean_rows, np.asarray(kept_rows, dtype=np.int64)])
    both = pa.concat_tables([clean, kept])
    return both.take(np.argsort(order, kind="stable"))  # the file's row order, as the row path keeps it


def _as_landing(t: pa.Table, schema: pa.Schema) -> pa.Table:
    return pa.table([t[f.name].cast(f.type) if f.name in t.column_names else pa.nulls(t.num_rows, f.type)
                     for f in schema], schema=schema)


def _repeated_key_rows(t: pa.Table, keys: tuple[str, ...]) -> np.ndarray:
    """Positions of the rows whose key another row of `t` has too."""
    if not t.num_rows:
        return np.zeros(0, dtype=np.int64)
    with_pos = t.select(list(keys)).append_column("_pos", pa.array(np.arange(t.num_rows)))
    groups = with_pos.group_by(list(keys)).aggregate([("_pos", "count"), ("_pos", "list")])
    repeated = groups.filter(pc.greater(groups["_pos_count"], 1))
    return np.asarray(pc.list_flatten(repeated["_pos_list"]).to_numpy(zero_copy_only=False), dtype=np.int64)


def _passing_samples(t: pa.Table, run: dict, cases: set, ceiling: float | None) -> np.ndarray | None:
    """Per sample row, whether it passes `mismatch`, the case check and `sample_problem`
    (the same rules, column by column; a null where a value is needed is no pass). None
    where a column or type is not what the rules expect: the rows are judged one by one."""
    def absent_or(col: str, ok: pa.ChunkedArray) -> pa.ChunkedArray:
        return pc.or_kleene(pc.is_null(t[col]), ok)

    try:
        checks = [
            pc.equal(t["run_id"], run["run_id"]), pc.equal(t["attempt"], run["attempt"]),
            pc.is_in(t["case_id"], value_set=pa.array(sorted(cases), t.schema.field("case_id").type)),
            pc.greater_equal(t["iteration"], 0),
            pc.and_(pc.greater(t["latency_ns"], 0), pc.less_equal(t["latency_ns"], HOUR_NS)),
            pc.equal(t["device_kind"], run["device_kind"])]
        if "sm_clock_mhz" in t.column_names:
            clock = t["sm_clock_mhz"]
            ok = pc.greater_equal(clock, 0) if ceiling is None else pc.and_(pc.greater_equal(clock, 0),
                                                                              pc.less_equal(clock, ceiling))
            checks.append(absent_or("sm_clock_mhz", ok))
        if "temperature_c" in t.column_names:
            temp = pc.cast(t["temperature_c"], pa.float64())
            checks.append(absent_or("temperature_c", pc.and_(pc.is_finite(temp), pc.and_(
                pc.greater_equal(temp, ABSOLUTE_ZERO_C), pc.less_equal(temp, MAX_TEMPERATURE_C)))))
        if "power_w" in t.column_names:
            power = pc.cast(t["power_w"], pa.float64())
            checks.append(absent_or("power_w", pc.and_(pc.is_finite(power), pc.greater_equal(power, 0))))
    except (KeyError, pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None
    passing = np.ones(t.num_rows, dtype=bool)
    for c in checks:
        passing &= np.asarray(pc.fill_null(c, False).to_numpy(zero_copy_only=False), dtype=bool)
    return passing


def _keep(shard, kind: str, rows: list[dict], keys: tuple[str, ...], problem) -> list[dict]:
    """The rows of `kind` that land; the others go to shard.rejects with their reason. Each
    row's own problems are judged first and repeated keys only among the rows that pass,
    so that a bad first copy of a key never costs a valid repeat of it its place."""
    return _judge(shard, kind, rows, keys, problem, range(len(rows)))[0]


def _judge(shard, kind: str, rows: list[dict], keys: tuple[str, ...], problem,
           index) -> tuple[list[dict], list[int]]:
    """`_keep` for rows that are some of the file's: index[j] is row j's position in the
    file (what reasons name, what shard.skip and shard.landing_rows hold). Returns the
    rows kept and their positions."""
    src = f"{shard.kind_files.get(kind, shard.source)} [{kind}]"
    skip = shard.skip.get(kind, set())  # set aside already, when the file was read
    problems = {i: why for i, r in zip(index, rows) if i not in skip and (why := problem(r, i))}
    exact, differing, n_exact = repeated_keys(rows, keys, kind, skip | problems.keys(), index)
    if n_exact:
        shard.notices.append(f"{src}: {n_exact} rows repeat another row exactly; each landed once")
    keep, kept, landing = [], [], set(exact)  # an exact repeat lands once, as its first copy
    for i, r in zip(index, rows):
        if i in exact or i in skip:
            continue
        why = problems.get(i) or differing.get(i)
        if why:
            shard.rejects.append((src, why, r))
        else:
            keep.append(r)
            kept.append(i)
            landing.add(i)
    shard.landing_rows[kind] = landing
    return keep, kept


def mismatch(row: dict, run: dict, i: int, kind: str) -> str | None:
    for col in ("run_id", "attempt"):
        if row[col] != run[col]:
            return (f"row {i}: {kind}.{col} {row[col]!r} does not match the shard's run metadata "
                    f"({col} {run[col]!r}); the files of different runs were mixed")
    return None


