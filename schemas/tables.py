"""The one definition of every perflake table.

Each table is a list of typed, documented columns plus its partition columns and a
version (how a table is declared: schemas/definition.py). Arrow schemas (for the harness
and landing) and Spark schemas (for the mining jobs) are derived from these definitions,
never written by hand elsewhere.

Like schemas/definition.py, it imports only pyarrow, so that a bare GPU worker can use it.
"""
from __future__ import annotations

from schemas.definition import Column, Table


def _c(name: str, type_: str, doc: str, nullable: bool = True) -> Column:
    return Column(name, type_, doc, nullable)


# Provenance shared by the landed `runs` rows and the published `runs` table.
RUNS = Table(
    name="runs",
    grain="one row per shard run",
    version=3,
    keys=("run_id", "shard", "attempt"),
    partition_by=("dt", "pool"),
    columns=(
        _c("run_id", "string", "run id of one pool's part of a sweep (<sweep>-<pool>), shared by its shards", False),
        _c("dag_run_id", "string", "Airflow DAG run id, or 'cli' outside Airflow"),
        _c("shard", "int32", "shard index within the run", False),
        _c("num_shards", "int32", "number of shards the run was split into", False),
        _c("attempt", "int32", "try number of the shard (1 = first)", False),
        _c("pool", "string", "GPU pool the shard ran on", False),
        _c("reason", "string", "nightly, backfill, rerun, manual or import", False),
        _c("suite", "string", "suite name", False),
        _c("started_at", "timestamp", "UTC start of the shard", False),
        _c("finished_at", "timestamp", "UTC end of the shard", False),
        _c("host", "string", "host name of the worker"),
        _c("device_kind", "string", "gpu, cpu or simulated", False),
        _c("device", "string", "device string given to the harness (cpu, cuda:0, sim:H100-SXM5-80GB)"),
        _c("gpu_name", "string", "GPU marketing name, or the CPU model on cpu"),
        _c("gpu_uuid", "string", "GPU UUID"),
        _c("gpu_sku", "string", "hardware catalog SKU"),
        _c("pci_bus_id", "string", "PCI bus id"),
        _c("sm_count", "int32", "streaming multiprocessors (cores on cpu)"),
        _c("l2_bytes", "int64", "L2 cache size"),
        _c("memory_bytes", "int64", "device memory"),
        _c("sm_clock_default_mhz", "int32", "default (application) SM clock"),
        _c("sm_clock_max_mhz", "int32", "maximum SM clock"),
        _c("power_limit_w", "float64", "enforced power limit"),
        _c("ecc_enabled", "bool", "ECC mode"),
        _c("mig_enabled", "bool", "MIG mode"),
        _c("driver_version", "string", "NVIDIA driver"),
        _c("cuda_version", "string", "CUDA runtime torch was built with"),
        _c("cudnn_version", "string", "cuDNN"),
        _c("nccl_version", "string", "NCCL"),
        _c("torch_version", "string", "torch"),
        _c("triton_version", "string", "triton"),
        _c("python_version", "string", "Python"),
        _c("harness_commit", "string", "git commit of the harness"),
        _c("env", "map<string,string>", "environment variables that change performance"),
        _c("hardware_fingerprint", "string", "hash of the hardware identity (sku, clocks, limits)", False),
        _c("software_fingerprint", "string", "hash of the perf-affecting software versions", False),
        _c("status", "string", "ok, partial (some cases failed) or failed", False),
        _c("cases_planned", "int32", "cases in the shard"),
        _c("cases_ok", "int32", "cases measured successfully"),
        _c("launch_overhead_ns", "float64", "cost of one kernel launch, kept out of every sample: on a GPU the "
                                            "median idle-GPU timing of a one-element add less its covered timing; "
                                            "on a CPU the timer floor; simulated: the model's; null where not "
                                            "measured (rows written before schema v2)"),
        _c("stopping", "string", "the stopping rule the shard measured with, as JSON: its suite's rule with "
                                 "the run's overrides (null in rows written before schema v3)"),
        _c("injected", "string", "the slowdowns injected into a simulated device, as JSON (null when none)"),
        _c("dt", "string", "partition: run date YYYY-MM-DD (UTC)", False),
    ),
)

# One row per case x attempt in a shard: what was run and how it ended. Failures land
# here with their error, so nothing that was attempted is ever silently missing.
CASE_RESULTS = Table(
    name="case_results",
    grain="one row per case attempt in a shard run",
    version=1,
    keys=("run_id", "case_id", "attempt"),
    partition_by=("dt", "pool"),
    columns=(
        _c("run_id", "string", "sweep run id", False),
        _c("shard", "int32", "shard index", False),
        _c("case_id", "string", "stable hash of kernel and parameters", False),
        _c("attempt", "int32", "shard try number", False),
        _c("suite", "string", "suite the case came from"),
        _c("family", "string", "gemm, attention, memory, norm, collective", False),
        _c("kernel", "string", "kernel name, e.g. matmul", False),
        _c("backend", "string", "implementation, e.g. torch, sdpa-flash", False),
        _c("dtype", "string", "data type", False),
        _c("params", "map<string,string>", "all case parameters as strings", False),
        _c("flops_per_call", "float64", "floating point operations per call"),
        _c("bytes_per_call", "float64", "bytes moved per call (compulsory traffic)"),
        _c("status", "string", "ok, failed, skipped, timeout, oom, crashed, stopped (the shard was stopped first)", False),
        _c("error", "string", "error text when status is not ok"),
        _c("correct", "bool", "result matched the higher-precision reference"),
        _c("max_abs_error", "float64", "max absolute error against the reference"),
        _c("max_rel_error", "float64", "max relative error against the reference"),
        _c("tolerance", "float64", "tolerance used for the correctness check"),
        _c("stop_reason", "string", "why sampling stopped: noise, max_samples, timeout, ..."),
        _c("n_samples", "int32", "samples measured"),
        _c("energy_per_call_j", "float64", "joules per call from the device's energy counter (null without one)"),
        _c("avg_power_w", "float64", "average board power over the energy window (null without a counter)"),
        _c("dt", "string", "partition: run date", False),
        _c("pool", "string", "partition: pool", False),
    ),
)

SAMPLES = Table(
    name="samples",
    grain="one row per timed iteration",
    version=1,
    keys=("run_id", "case_id", "attempt", "iteration"),
    partition_by=("dt", "pool"),
    columns=(
        _c("run_id", "string", "sweep run id", False),
        _c("case_id", "string", "case hash", False),
        _c("attempt", "int32", "shard try number", False),
        _c("iteration", "int32", "0-based timed iteration", False),
        _c("latency_ns", "int64", "measured time of one call in nanoseconds", False),
        _c("sm_clock_mhz", "int32", "SM clock during the sample, where measured"),
        _c("temperature_c", "float64", "GPU temperature, where measured"),
        _c("power_w", "float64", "board power, where measured"),
        _c("throttled", "bool", "SM clock under 75 % of default during the sample", False),
        _c("outlier", "bool", "robust outlier within its case (set by mining; null when landed)"),
        _c("device_kind", "string", "gpu, cpu or simulated", False),
        _c("dt", "string", "partition: run date", False),
        _c("pool", "string", "partition: pool", False),
    ),
)

# Published tables below are written by the Spark jobs.
CASES = Table(
    name="cases",
    grain="one row per benchmark case",
    version=1,
    keys=("case_id",),
    columns=(
        _c("case_id", "string", "stable hash of kernel and parameters", False),
        _c("family", "string", "kernel family", False),
        _c("kernel", "string", "kernel", False),
        _c("backend", "string", "backend", False),
        _c("dtype", "string", "data type", False),
        _c("params", "map<string,string>", "parameters", False),
        _c("m", "int64", "GEMM M (promoted from params)"),
        _c("n", "int64", "GEMM N"),
        _c("k", "int64", "GEMM K"),
        _c("batch", "int64", "batch size"),
        _c("flops_per_call", "float64", "flops per call"),
        _c("bytes_per_call", "float64", "bytes per call"),
    ),
)

CASE_STATS = Table(
    name="case_stats",
    grain="one row per run x case x attempt",
    version=2,
    keys=("run_id", "case_id", "attempt"),
    partition_by=("dt", "pool"),
    columns=(
        _c("run_id", "string", "sweep run id", False),
        _c("case_id", "string", "case hash", False),
        _c("attempt", "int32", "shard try number", False),
        _c("family", "string", "kernel family"),
        _c("kernel", "string", "kernel"),
        _c("backend", "string", "backend"),
        _c("dtype", "string", "dtype"),
        _c("device_kind", "string", "gpu, cpu or simulated"),
        _c("gpu_sku", "string", "hardware SKU"),
        _c("status", "string", "ok, failed, skipped, timeout, oom, crashed, stopped (the shard was stopped first)", False),
        _c("error", "string", "error when not ok"),
        _c("correct", "bool", "correctness check passed"),
        _c("n", "int64", "samples measured"),
        _c("n_kept", "int64", "samples kept after throttle and outlier filtering"),
        _c("median_ns", "float64", "median latency of kept samples"),
        _c("p10_ns", "float64", "10th percentile"),
        _c("p90_ns", "float64", "90th percentile"),
        _c("iqr_ns", "float64", "interquartile range"),
        _c("mean_ns", "float64", "mean"),
        _c("stdev_ns", "float64", "sample standard deviation"),
        _c("rel_noise", "float64", "IQR / median"),
        _c("median_ci_low_ns", "float64", "95 % order-statistic CI of the median, low"),
        _c("median_ci_high_ns", "float64", "95 % order-statistic CI of the median, high"),
        _c("flops_per_call", "float64", "flops per call"),
        _c("bytes_per_call", "float64", "bytes per call"),
        _c("tflops", "float64", "TFLOP/s at the median"),
        _c("gbps", "float64", "GB/s at the median"),
        _c("pct_of_peak", "float64", "percent of the hardware's roofline bound at the median"),
        _c("stable", "bool", "rel_noise under the stability threshold"),
        _c("max_abs_error", "float64", "max absolute error against the higher-precision reference"),
        _c("max_rel_error", "float64", "max error normalised by max |reference|"),
        _c("tolerance", "float64", "normalised error accepted for the dtype"),
        _c("energy_per_call_j", "float64", "joules per call (null where the device has no energy counter)"),
        _c("avg_power_w", "float64", "average board power while running the case back to back"),
        _c("tflops_per_watt", "float64", "TFLOP/s per watt = TFLOP per joule"),
        _c("joules_per_tflop", "float64", "energy per 10^12 floating point operations"),
        _c("shard", "int32", "the run's shard that measured the case (its hardware and software; null in "
                             "rows mined before version 2)"),
        _c("dt", "string", "partition: run date", False),
        _c("pool", "string", "partition: pool", False),
    ),
)

SERIES = Table(
    name="series",
    grain="one row per case x hardware x perf-affecting context",
    version=2,
    keys=("series_key",),
    columns=(
        _c("series_key", "string", "hash of case_id, gpu_sku, hardware_fingerprint and device_kind", False),
        _c("case_id", "string", "case", False),
        _c("pool", "string", "pool of the latest run"),
        _c("gpu_sku", "string", "hardware SKU"),
        _c("hardware_fingerprint", "string", "hardware identity (clocks, limits)"),
        _c("device_kind", "string", "gpu, cpu or simulated"),
        _c("family", "string", "kernel family"),
        _c("kernel", "string", "kernel"),
        _c("dtype", "string", "dtype"),
        _c("first_run_id", "string", "first run in the series"),
        _c("first_dt", "string", "date of the first run"),
        _c("first_started_at", "timestamp", "UTC start of the first run"),
        _c("last_run_id", "string", "latest run"),
        _c("last_dt", "string", "date of the latest run"),
        _c("n_runs", "int64", "runs with a successful measurement"),
        _c("last_median_ns", "float64", "median of the latest run"),
        _c("baseline_ns", "float64", "median of the run medians over the last BASELINE_RUNS runs before the latest"),
        _c("baseline_mad_ns", "float64", "MAD of those run medians (run-to-run noise)"),
        # v2: what a night's mine carries forward instead of reading the whole history again
        _c("history_cut_dt", "string", "a mine reads the series' runs from this date on; the ones before it are "
                                       "summarised in the next two columns (null: read the whole history)"),
        _c("runs_before_cut", "int64", "runs with a successful measurement dated before history_cut_dt"),
        _c("last_started_before_cut", "timestamp", "UTC start of the latest of those runs"),
    ),
)

# Recomputed from the whole history by every mine; the lifecycle (status, first seen,
# acknowledgement) is carried over from the table's previous state by key.
REGRESSIONS = Table(
    name="regressions",
    grain="one row per detected level change in one metric of a series",
    version=2,
    keys=("series_key", "metric", "change_run_id"),
    columns=(
        _c("regression_id", "string", "short stable id (hash of series_key, metric, change_run_id): perflake triage"),
        _c("series_key", "string", "series the change is in (perf.series)", False),
        _c("metric", "string", "latency (median_ns) or energy (energy_per_call_j); higher is worse for both; "
                               "null in rows written before schema v2 = latency"),
        _c("unit", "string", "unit of before_value and after_value: ns or J"),
        _c("case_id", "string", "case", False),
        _c("pool", "string", "pool of the change run"),
        _c("gpu_sku", "string", "hardware SKU"),
        _c("device_kind", "string", "gpu, cpu or simulated"),
        _c("family", "string", "kernel family"),
        _c("kernel", "string", "kernel"),
        _c("backend", "string", "backend"),
        _c("dtype", "string", "dtype"),
        _c("change_run_id", "string", "first run at the new level (first bad run)", False),
        _c("change_dt", "string", "date of the change run", False),
        _c("last_good_run_id", "string", "last run at the old level", False),
        _c("last_good_dt", "string", "date of the last good run", False),
        _c("before_ns", "float64", "old latency level: median of up to 10 run medians before the change (for an "
                                   "energy change, the latency on the same runs: did the speed hold?)", False),
        _c("after_ns", "float64", "new latency level: median of the run medians since the change (to the next "
                                  "change)", False),
        _c("before_value", "float64", "old level of the metric, in unit"),
        _c("after_value", "float64", "new level of the metric, in unit"),
        _c("change_pct", "float64", "(after_value - before_value) / before_value x 100; positive = worse (slower, "
                                    "or more energy per call)", False),
        _c("sigmas", "float64", "|after - before| in robust run-to-run noise units"),
        _c("p_value", "float64", "two-sided rank test, corrected for autocorrelation and search (the detector's "
                                  "when it reports the change this mine, else between the neighbouring segments)"),
        _c("q_value", "float64", "Benjamini-Hochberg q over the series measured on the change night"),
        _c("direction", "string", "regression (worse: slower, more energy) or improvement", False),
        _c("status", "string", "provisional, confirmed, cleared, acknowledged or closed (perflake triage close: "
                               "triage finished; final, and the change stays a known level of its series)", False),
        _c("runs_after", "int64", "runs at or after the change run seen so far (reruns included)", False),
        _c("confirmed_by_run_id", "string", "the later run or rerun that agreed with the change run"),
        _c("detected_by", "string", "significance (the detector's test), gradual (significant, but a step at this "
                                    "run cannot be told from a drift across the runs either side), newest-runs (its "
                                    "newest-runs floors) or tracked (known from an earlier mine, not reported now)"),
        _c("cause", "string", "what differs between the last good and the change run, e.g. 'torch 2.12.0 -> 2.13.0'"),
        _c("attribution", "map<string,string>", "each differing run attribute -> 'old -> new'"),
        _c("first_seen_at", "timestamp", "UTC time of the mine that first reported it", False),
        _c("status_since", "timestamp", "UTC time of the mine that set the current status", False),
        _c("acknowledged_by", "string", "who acknowledged it"),
        _c("acknowledged_at", "timestamp", "UTC time of the acknowledgement"),
        _c("note", "string", "free text from the acknowledgement"),
        _c("owner", "string", "owning team, routed by the owners file when first seen and kept (pipelines/config/owners.py)"),
        _c("triage_due_dt", "string", "triage due date (YYYY-MM-DD): the owner's working days (default 2) after "
                                      "first seen, weekends skipped; kept"),
        _c("closed_by", "string", "who closed it (perflake triage close)"),
        _c("closed_at", "timestamp", "UTC time it was closed"),
        _c("close_note", "string", "free text from the close"),
    ),
)

QUARANTINE = Table(
    name="quarantine",
    grain="one row per rejected row or file",
    version=1,
    partition_by=("dt", "stage"),
    columns=(
        _c("source", "string", "file or table the record came from", False),
        _c("reason", "string", "why it was rejected", False),
        _c("record", "string", "the raw record as JSON", False),
        _c("ingested_at", "timestamp", "UTC time of rejection", False),
        _c("dt", "string", "partition: date of the batch", False),
        _c("stage", "string", "partition: where it was rejected (mine, ingest)", False),
    ),
)

HARDWARE = Table(
    name="hardware",
    grain="one row per GPU model",
    version=1,
    keys=("sku",),
    columns=(
        _c("sku", "string", "catalog SKU", False),
        _c("name", "string", "marketing name"),
        _c("device_kind", "string", "gpu or cpu"),
        _c("peak_tflops", "map<string,string>", "dense peak TFLOP/s per dtype"),
        _c("memory_bandwidth_gbps", "float64", "peak DRAM bandwidth GB/s"),
        _c("l2_bytes", "int64", "L2 size"),
        _c("sm_count", "int32", "SMs"),
        _c("memory_bytes", "int64", "memory size"),
        _c("board_power_w", "float64", "board power limit"),
        _c("source", "string", "where the figures come from"),
    ),
)

# One row per validation of one batch against one data-quality suite (schemas/expectations.py).
DQ_RESULTS = Table(
    name="dq_results",
    grain="one row per suite x batch validation",
    version=1,
    keys=("suite", "batch"),  # a re-validation of a batch replaces its row
    partition_by=("dt",),
    columns=(
        _c("suite", "string", "data-quality suite: samples, runs, case_results, case_stats", False),
        _c("batch", "string", "what was validated, e.g. 'samples dt=2026-11-22 pool=sim-h100'", False),
        _c("success", "bool", "every expectation passed", False),
        _c("hard_failures", "int32", "failed expectations tagged hard (the partition is withheld)", False),
        _c("soft_failures", "int32", "failed expectations tagged soft (warnings)", False),
        _c("failed_expectations", "string", "JSON list of {expectation, column, severity, observed}", False),
        _c("evaluated", "int32", "expectations evaluated", False),
        _c("rows", "int64", "rows in the batch"),
        _c("run_at", "timestamp", "UTC time of the validation", False),
        _c("dt", "string", "partition: date of the batch", False),
    ),
)

# Written by pipelines/projection/roofline.py (`perflake project`): a projection is kept as first
# made; the measured columns are filled in when the target hardware's data lands.
PROJECTIONS = Table(
    name="projections",
    grain="one row per case x target hardware x calibration hardware x device kind",
    version=1,
    keys=("case_id", "target_sku", "source_sku", "device_kind"),
    columns=(
        _c("case_id", "string", "case (perf.cases)", False),
        _c("target_sku", "string", "catalog SKU projected onto", False),
        _c("source_sku", "string", "catalog SKU whose measurements calibrated the model", False),
        _c("device_kind", "string", "kind of the calibration data: gpu or simulated (never mixed)", False),
        _c("family", "string", "kernel family"),
        _c("kernel", "string", "kernel"),
        _c("backend", "string", "backend"),
        _c("dtype", "string", "dtype"),
        _c("shape", "string", "the case's parameters as k=v,..."),
        _c("flops_per_call", "float64", "flops per call"),
        _c("bytes_per_call", "float64", "bytes per call"),
        _c("regime", "string", "roof that binds on the target at peak: compute, memory or launch (empty call)"),
        _c("bound_ns", "float64", "roofline bound on the target: max(flops / peak, bytes / bandwidth)"),
        _c("efficiency", "float64", "share of the binding roof assumed reached (calibrated)"),
        _c("launch_ns", "float64", "fixed cost per call assumed (calibrated)"),
        _c("projected_ns", "float64", "projected time per call: launch_ns + bound_ns / efficiency"),
        _c("projected_tflops", "float64", "projected TFLOP/s"),
        _c("projected_gbps", "float64", "projected GB/s"),
        _c("model", "string", "model name and version, e.g. roofline-efficiency-v1", False),
        _c("calibration_level", "string", "case, family-dtype curve, family curve, regime curve, launch, uncalibrated"),
        _c("calibration_source", "string", "hardware, cases, dates and runs the calibration came from", False),
        _c("source_median_ns", "float64", "the case's median on the calibration hardware, where measured"),
        _c("note", "string", "why a projection is missing, when it is"),
        _c("projected_at", "timestamp", "UTC time the projection was made", False),
        _c("measured_ns", "float64", "median measured on the target since (null until measured)"),
        _c("measured_run_id", "string", "run of that measurement"),
        _c("measured_dt", "string", "date of that measurement"),
        _c("error_pct", "float64", "(projected - measured) / measured x 100"),
        _c("scored_at", "timestamp", "UTC time the measured columns were filled in"),
    ),
)

WORKLOAD_PROJECTIONS = Table(
    name="workload_projections",
    grain="one row per workload x scenario x target GPU x device kind x software x as-of night",
    version=2,
    keys=("workload", "scenario", "target_sku", "device_kind", "software", "as_of_dt"),
    columns=(
        _c("workload", "string", "workload preset (pipelines/projection/presets)", False),
        _c("scenario", "string", "phase, batch, prompt or context length, tp, ep", False),
        _c("target_sku", "string", "catalog SKU projected onto", False),
        _c("device_kind", "string", "kind of the measurements used: gpu or simulated ('' for none)", False),
        _c("software", "string", "torch version the measurements were limited to ('' for the newest of any)", False),
        _c("as_of_dt", "string", "newest night of the measurements used ('' for none)", False),
        _c("phase", "string", "prefill or decode"),
        _c("batch", "int64", "sequences per step"),
        _c("seq", "int64", "prompt tokens (prefill) or KV cache tokens (decode)"),
        _c("tp", "int64", "tensor-parallel GPUs"),
        _c("ep", "int64", "expert-parallel ways within them"),
        _c("step_ns", "float64", "projected time of one step on one GPU"),
        _c("tokens_per_step", "int64", "tokens one step computes"),
        _c("tokens_per_s", "float64", "tokens per second of the tp GPUs together"),
        _c("per_layer_ns", "float64", "time of one transformer layer"),
        _c("gemm_ns", "float64", "time in GEMMs per step"),
        _c("attention_ns", "float64", "time in attention per step"),
        _c("norm_ns", "float64", "time in norms (and the router softmax) per step"),
        _c("activation_ns", "float64", "time in FFN activations per step"),
        _c("elementwise_ns", "float64", "time in residual adds and the embedding per step"),
        _c("communication_ns", "float64", "time in collectives per step"),
        _c("compute_bound_pct", "float64", "percent of the step in compute-bound calls"),
        _c("memory_bound_pct", "float64", "percent of the step in memory-bound calls"),
        _c("communication_bound_pct", "float64", "percent of the step in link-bound collectives"),
        _c("latency_bound_pct", "float64", "percent of the step in calls bound by their fixed cost"),
        _c("model_tflop", "float64", "model flops of the step over all tp GPUs, in TFLOP"),
        _c("mfu_pct", "float64", "model flops utilisation: model flops / (step x peak x tp)"),
        _c("energy_per_token_j", "float64", "joules per token over the tp GPUs (measured energy, the rest at "
                                            "the measured calls' mean power)"),
        _c("energy_covered_pct", "float64", "percent of the step time whose energy was measured or interpolated"),
        _c("measured_pct", "float64", "percent of the step time priced from measured medians"),
        _c("interpolated_pct", "float64", "percent priced by interpolating measured neighbouring shapes"),
        _c("roofline_pct", "float64", "percent priced by the roofline projection"),
        _c("memory_per_gpu_gb", "float64", "weights / tp plus the KV cache, GB per GPU"),
        _c("fits", "bool", "that memory fits in the GPU's"),
        _c("simulated", "bool", "the measurements used come from the simulated device"),
        _c("model", "string", "model name and version, e.g. workload-sum-v1", False),
        _c("context", "string", "what the figures rest on: measurements, nights, calibration"),
        _c("projected_at", "timestamp", "UTC time the projection was made", False),
        # Scored (pipelines/projection/workload_table.py): a projection made from none of its
        # target's own measurements (as_of_dt '') is compared, once the lake measures the
        # target, with the same workload priced from those measurements; it stays as made.
        _c("scored_as_of_dt", "string", "newest night of the target's own measurements it was scored against"),
        _c("scored_step_ns", "float64", "the step priced from the target's own measurements"),
        _c("scored_measured_pct", "float64", "percent of that step priced from the target's measured medians"),
        _c("error_pct", "float64", "(step_ns - scored_step_ns) / scored_step_ns x 100"),
        _c("scored_at", "timestamp", "UTC time the scored columns were filled in"),
    ),
)

ALL_TABLES = {t.name: t for t in (RUNS, CASE_RESULTS, SAMPLES, CASES, CASE_STATS, SERIES, REGRESSIONS, QUARANTINE,
                                  HARDWARE, DQ_RESULTS, PROJECTIONS, WORKLOAD_PROJECTIONS)}
