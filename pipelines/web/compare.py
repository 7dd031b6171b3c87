"""Page 5, compare: two runs, GPUs or software versions side by side (a side is a set of
KEY=VALUE filters on perf.runs, as `perflake compare` takes them), per case the ratio
B/A with its interval and the verdict, and a summary per family. The numbers are
pipelines.query.ab.compare_runs_duckdb's, the same as the CLI's."""
from __future__ import annotations

import math

from fastapi import APIRouter, Request

from pipelines.web import params
from pipelines.web.reader import Reader
from pipelines.web.render import page

router = APIRouter()
VERDICTS = ("slower", "faster", "same", "ambiguous", "unmatched")


def side(text: str | None, param: str):
    """A `Side` from 'KEY=VALUE KEY=VALUE' (a bare run id means run_id=...), or None if empty."""
    from pipelines.query.ab import Side

    if not text or not text.strip():
        return None
    items = text.split()
    if len(items) > 6:
        raise params.BadParameter(param, text, "at most 6 KEY=VALUE filters")
    items = [i if "=" in i else f"run_id={i}" for i in items]
    for item in items:
        key, _, value = item.partition("=")
        params.name(value, f"{param} ({key})")
    try:
        return Side.parse(items)
    except ValueError as e:
        raise params.BadParameter(param, text, str(e)) from None


def compared(reader: Reader, a, b) -> list[dict]:
    """compare_runs_duckdb's rows with each case's family, once per pair of sides and copy of the lake."""
    return reader.memo(("compare", str(a), str(b)), lambda: _compared(reader, a, b))


# Samples one side of one request may load (measured before the bound: a side of every
# simulated run, 3.8 M samples, took 45 s and 2.6 GB of the shared server's memory).
MAX_SIDE_SAMPLES = 500_000


def _compared(reader: Reader, a, b) -> list[dict]:
    from pipelines.query.ab import MixedKinds, SideTooLarge, compare_runs_duckdb

    cur = reader.cursor()
    try:
        rows = compare_runs_duckdb(cur, a, b, max_samples=MAX_SIDE_SAMPLES)
    except ValueError as e:  # a side too large or of two device kinds (400), or that selects no run (404)
        which = "a" if "side A" in str(e) else "b"
        raise params.BadParameter(which, str(a if which == "a" else b), str(e),
                                  status=400 if isinstance(e, (SideTooLarge, MixedKinds)) else 404) from None
    finally:
        cur.close()
    families = dict(reader.frame("SELECT case_id, family FROM perf.cases WHERE list_contains(?, case_id)",
                                 [[r["case_id"] for r in rows]]).values.tolist()) if reader.has("cases") else {}
    for r in rows:
        r["family"] = families.get(r["case_id"])
    return rows


def by_family(rows: list[dict]) -> list[dict]:
    """Per family: cases per verdict and the geometric mean of B/A over the cases with a ratio."""
    out = {}
    for r in rows:
        f = out.setdefault(r["family"] or "-", {"family": r["family"] or "-", "cases": 0, "logs": [],
                                                 **{v: 0 for v in VERDICTS}})
        f["cases"] += 1
        f[r["verdict"] if r["verdict"] in VERDICTS else "ambiguous"] += 1
        if r["ratio"] and r["ratio"] > 0:
            f["logs"].append(math.log(r["ratio"]))
    for f in out.values():
        logs = f.pop("logs")
        f["geomean"] = math.exp(sum(logs) / len(logs)) if logs else None
    return sorted(out.values(), key=lambda f: f["family"])


def side_kinds(rows: list[dict], side: str) -> list[str]:
    """The device kinds one side's cases were measured on (gpu, cpu, simulated)."""
    return sorted({k for r in rows for k in (r[f"kind_{side}"] or "").split(",") if k})


def recent_runs(reader: Reader, limit: int = 60) -> list[dict]:
    if not reader.has("runs"):
        return []
    return reader.rows("SELECT run_id, any_value(dt) AS dt, any_value(pool) AS pool, any_value(gpu_sku) AS gpu_sku, "
                       "any_value(torch_version) AS torch_version FROM perf.runs GROUP BY run_id "
                       "ORDER BY dt DESC, run_id LIMIT ?", [limit])


@router.get("/compare")
def compare_page(request: Request, a: str | None = None, b: str | None = None, verdict: str | None = None):
    from pipelines.query.ab import mixed_kinds

    side_a, side_b = side(a, "a"), side(b, "b")
    only = params.choice(verdict, "verdict", VERDICTS, "") or None
    reader: Reader = request.app.state.reader
    rows = compared(reader, side_a, side_b) if side_a and side_b else []
    shown = [r for r in rows if only is None or r["verdict"] == only]
    chart = [{"case": f"{r['kernel']} {r['dtype']} {r['shape']}", "ratio": r["ratio"], "lo": r["ci_low"],
              "hi": r["ci_high"], "verdict": r["verdict"]} for r in shown if r["ratio"] is not None]
    kinds = {"a": side_kinds(rows, "a"), "b": side_kinds(rows, "b")}
    return page(request, "compare.html", current="compare", a=a or "", b=b or "", side_a=side_a, side_b=side_b,
                rows=shown, total=len(rows), families=by_family(rows), verdict=only, verdicts=VERDICTS,
                runs=recent_runs(reader), chart=chart[:400], kinds=kinds, mixed=mixed_kinds(rows),
                simulated=any("simulated" in k for k in kinds.values()))
