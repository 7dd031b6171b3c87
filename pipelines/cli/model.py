"""`perflake model`: an LLM's step time, throughput and energy on a catalog GPU, projected
from the lake's kernel measurements, each kernel call's source named (measured,
interpolated between measured shapes, or roofline). Reads through DuckDB (no JVM)
unless --save writes perf.workload_projections.

  perflake model --list                                            # presets and catalog GPUs
  perflake model llama-8b --gpu H100-SXM5-80GB --phase decode --batch 32 --context 4096 --tp 8
  perflake model llama-70b --gpu all --phase prefill --prompt 2048 --tp 8      # every catalog GPU
  perflake model mixtral-8x7b --gpu H200-SXM-141GB --tp 8 --ep 8 --calls       # one row per kernel call
  perflake model llama-8b --gpu H100-SXM5-80GB --vs-gpu B200-SXM-180GB          # side by side
  perflake model llama-8b --gpu H100-SXM5-80GB --torch 2.12.0 --vs-torch 2.13.0
  perflake model llama-8b --gpu H100-SXM5-80GB --history                        # per night
  perflake model llama-8b --gpu B200-SXM-180GB --save    # before the B200 is measured: scored once it is
  perflake model --scores                            # the saved projections scored against their GPU's data
  perflake model --write-suite                       # regenerate kernels_bench/suites/llm-models.yaml
"""
from __future__ import annotations

import argparse
import json
import math

from pipelines.cli.args import date_arg, positive_int
from pipelines.config.lake import Lake


def register(sub) -> None:
    p = sub.add_parser("model", help="project an LLM's step time, tokens/s and energy on a GPU from the lake",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("preset", nargs="?", help="workload preset name (perflake model --list) or a YAML path")
    p.add_argument("--gpu", action="append", help="catalog SKU, repeatable, or 'all' (default: every catalog GPU)")
    p.add_argument("--phase", choices=["prefill", "decode"], default="decode")
    p.add_argument("--batch", type=positive_int, default=1, help="sequences per step (default 1)")
    p.add_argument("--prompt", type=positive_int, default=2048, help="prefill: prompt tokens (default 2048)")
    p.add_argument("--context", type=positive_int, default=4096, help="decode: KV cache tokens (default 4096)")
    p.add_argument("--tp", type=positive_int, default=1, help="tensor-parallel GPUs (default 1)")
    p.add_argument("--ep", type=positive_int, default=1, help="MoE: expert-parallel ways within the tp GPUs (default 1)")
    p.add_argument("--device-kind", choices=["gpu", "simulated"],
                   help="which measurements (never mixed; default: the real ones where a GPU has both)")
    p.add_argument("--torch", help="only measurements of runs with this torch version")
    p.add_argument("--date", action="append", type=date_arg, help="only measurements of these nights (repeatable)")
    p.add_argument("--vs-gpu", help="compare: the same workload on this SKU (side B)")
    p.add_argument("--vs-torch", help="compare: the same GPU with this torch version (side B)")
    p.add_argument("--calls", action="store_true", help="list every kernel call with its time and source")
    p.add_argument("--history", action="store_true", help="the step time projected from each night's newest "
                                                          "measurements")
    p.add_argument("--save", action="store_true", help="also write the summaries to perf.workload_projections "
                                                       "(starts Spark)")
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.add_argument("--list", action="store_true", help="list the presets and the catalog GPUs")
    p.add_argument("--scores", action="store_true", help="the saved projections made before their GPU was measured, "
                                                         "scored against its measurements since")
    p.add_argument("--write-suite", action="store_true", help="regenerate kernels_bench/suites/llm-models.yaml")
    p.set_defaults(func=_cmd_model)


def _cmd_model(args) -> int:
    if args.list:
        return _list()
    if args.write_suite:
        return _write_suite()
    if args.scores:
        return _scores(args.format)
    if not args.preset:
        raise ValueError("name a workload preset (perflake model --list shows them)")
    from kernels_bench.hardware import load_catalog
    from pipelines.projection.model import compare, history, project_workload
    from pipelines.projection.workload import Scenario, load_workload
    from pipelines.warehouse.frames import Frames

    _check_modes(args)
    w = load_workload(args.preset)
    seq = args.prompt if args.phase == "prefill" else args.context
    s = Scenario(args.phase, args.batch, seq, args.tp, args.ep).check(w)
    gpus = args.gpu or ["all"]
    if "all" in gpus:
        gpus = [sku for sku, hw in load_catalog().items() if hw.device_kind == "gpu"]
    lake = Lake.from_env()
    with Frames(lake) as frames:
        def lookup(sku, torch=args.torch):
            from pipelines.projection.lookup import load_lookup

            return load_lookup(frames, sku, device_kind=args.device_kind, torch_version=torch, dates=args.date)

        if args.vs_gpu or args.vs_torch:
            if len(gpus) != 1:
                raise ValueError("compare takes one --gpu (side A) and --vs-gpu or --vs-torch (side B)")
            a = project_workload(w, s, lookup(gpus[0]))
            b = project_workload(w, s, lookup(args.vs_gpu or gpus[0], args.vs_torch or args.torch))
            return _print_compare(w, s, a, b, compare(a, b), args.format)
        if args.history:
            nights = []
            for sku in gpus:
                lk = lookup(sku)
                nights.append((sku, lk.context, history(w, s, lk)))
            if args.format == "json":
                print(json.dumps([{"gpu": sku, "context": context, "nights": table.to_dict("records")}
                                  for sku, context, table in nights], indent=2, default=_plain))
                return 0
            for sku, context, table in nights:
                print(f"{w.name} {s.label} on {sku}, per night ({context}):")
                print(table.round(3).to_string(index=False) if not table.empty else "  no measured night")
            return 0
        results = [(sku, *project_workload(w, s, lookup(sku))) for sku in gpus]
    if args.save:
        from pipelines.projection.workload_table import write_workload_projections

        write_workload_projections(lake, [summary for _, _, summary in results])
    if args.format == "json":
        print(json.dumps([{"summary": summary, "calls": calls.to_dict("records") if args.calls else None}
                          for _, calls, summary in results], indent=2, default=_plain))
        return 0
    print(f"{w.name} ({w.description}), {s.label}: {w.params() / 1e9:.1f} B parameters"
          + (f", {w.params(active=True) / 1e9:.1f} B active" if w.moe else ""))
    for sku, calls, summary in results:
        _print_summary(summary)
        if args.calls:
            _print_calls(calls)
    return 0


def _check_modes(args) -> None:
    """One answer per command: a projection (with --calls, --save), a comparison
    (--vs-gpu, --vs-torch) or a history (--history). Options of one mode given to another
    were ignored without a word."""
    mode = ("--vs-gpu/--vs-torch" if args.vs_gpu or args.vs_torch else None,
            "--history" if args.history else None)
    given = [m for m in mode if m]
    if len(given) > 1:
        raise ValueError(f"{given[0]} and {given[1]} are two answers; ask for one at a time")
    for option, on in (("--calls", args.calls), ("--save", args.save)):
        if on and given:
            raise ValueError(f"{option} goes with a projection, not with {given[0]}")


def _plain(v):
    if hasattr(v, "item"):
        return v.item()
    return str(v)


def _fmt(v, digits=2) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:,.{digits}f}"


def _print_summary(r: dict) -> None:
    sim = " [SIMULATED data]" if r["simulated"] else ""
    print(f"\n{r['target_sku']}{sim}: step {_fmt(r['step_ns'] / 1e6, 3)} ms, {_fmt(r['tokens_per_s'], 0)} tokens/s, "
          f"per layer {_fmt(r['per_layer_ns'] / 1e3, 1)} us, MFU {_fmt(r['mfu_pct'], 1)} %, "
          f"energy/token {_fmt(r['energy_per_token_j'], 4)} J"
          + (f" ({_fmt(r['energy_covered_pct'], 0)} % of the time measured)" if r["energy_covered_pct"] else ""))
    classes = [(c, r[f"{c}_ns"]) for c in ("gemm", "attention", "norm", "activation", "elementwise",
                                           "communication") if r[f"{c}_ns"]]
    print("  by op:    " + ", ".join(f"{c} {v / r['step_ns'] * 100:.0f} %" for c, v in classes))
    print("  bound:    " + ", ".join(f"{b} {r[f'{b}_bound_pct']:.0f} %" for b in
                                     ("compute", "memory", "communication", "latency") if r[f"{b}_bound_pct"] >= 0.5))
    print(f"  sources:  measured {r['measured_pct']:.0f} %, interpolated {r['interpolated_pct']:.0f} %, "
          f"roofline {r['roofline_pct']:.0f} % of the step time")
    print(f"  memory:   {_fmt(r['memory_per_gpu_gb'], 1)} GB per GPU (weights / tp + KV cache)"
          + ("" if r["fits"] else "  -- DOES NOT FIT in this GPU's memory"))
    print(f"  from:     {r['context']}")


def _print_calls(calls) -> None:
    cols = ["op", "count", "case", "ns_per_call", "total_ns", "source", "bound", "roof_pct", "how"]
    view = calls[cols].copy()
    view["ns_per_call"] = view["ns_per_call"].round(0)
    view["total_ns"] = view["total_ns"].round(0)
    view["roof_pct"] = view["roof_pct"].round(1)
    print(view.to_string(index=False))


def _print_compare(w, s, a, b, table, fmt: str) -> int:
    (_, sa), (_, sb) = a, b
    if fmt == "json":
        print(json.dumps({"a": sa, "b": sb, "table": table.to_dict("records")}, indent=2, default=_plain))
        return 0

    def side(r):
        return (f"{r['target_sku']}" + (f" torch {r['software']}" if r["software"] else "")
                + (" [SIMULATED]" if r["simulated"] else ""))

    print(f"{w.name}, {s.label}: A = {side(sa)}, B = {side(sb)}")
    print(table.round(4).to_string(index=False))
    print(f"A from: {sa['context']}\nB from: {sb['context']}")
    return 0


def _list() -> int:
    from kernels_bench.hardware import load_catalog
    from pipelines.projection.workload import load_workload, preset_names

    print("presets:")
    for name in preset_names():
        w = load_workload(name)
        print(f"  {name:<14} {w.params() / 1e9:6.1f} B params  {w.dtype:<5} {w.description}")
    print("GPUs:    " + ", ".join(sku for sku, hw in load_catalog().items() if hw.device_kind == "gpu"))
    return 0


def _scores(fmt: str) -> int:
    """The rows of perf.workload_projections that have been scored (workload_table.score)."""
    from pipelines.warehouse.frames import Frames

    with Frames(Lake.from_env()) as frames:
        rows = frames.table("workload_projections") if frames.has("workload_projections") else None
    if rows is not None and "scored_step_ns" in rows:  # a table written before scoring existed has no such column
        rows = rows[rows["scored_step_ns"].notna()]
    if rows is None or "scored_step_ns" not in rows or rows.empty:
        print("no workload projection scored yet: save one onto a GPU the lake has not measured "
              "(perflake model PRESET --gpu SKU --save); it is scored by the first mine that measures that GPU")
        return 0
    rows = rows.sort_values(["target_sku", "workload", "phase", "scenario"])
    if fmt == "json":
        cols = ["workload", "scenario", "target_sku", "device_kind", "software", "step_ns", "scored_step_ns",
                "scored_measured_pct", "error_pct", "scored_as_of_dt", "projected_at", "scored_at", "simulated"]
        print(json.dumps(rows[cols].to_dict("records"), indent=2, default=_plain))
        return 0
    view = rows.assign(projected_ms=rows["step_ns"] / 1e6, scored_ms=rows["scored_step_ns"] / 1e6,
                       data=rows["simulated"].map({True: "SIMULATED", False: "measured"}))
    cols = ["workload", "scenario", "target_sku", "data", "projected_ms", "scored_ms", "scored_measured_pct",
            "error_pct", "scored_as_of_dt"]
    print("Projections made before their GPU was measured, against the same step priced from its measurements "
          "(scored_measured_pct: the share of that step on measured medians; the rest interpolated or roofline):")
    print(view[cols].round({"projected_ms": 3, "scored_ms": 3, "scored_measured_pct": 0, "error_pct": 1})
          .to_string(index=False))
    print(f"median |error| {rows['error_pct'].abs().median():.1f} % over {len(rows)} projections")
    return 0


def _write_suite() -> int:
    from kernels_bench.suite import SUITES_DIR
    from pipelines.projection.decompose import SUITE_NAME, suite_text

    path = SUITES_DIR / f"{SUITE_NAME}.yaml"
    path.write_text(suite_text())
    print(f"wrote {path}")
    return 0
