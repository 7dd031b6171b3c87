"""The perf.runs columns a side of an A/B comparison may be selected by
(`perflake compare --a KEY=VALUE`). A module of its own so that the command line can name
them in its help without importing what a comparison needs (Spark, pandas, scipy: about
3 s of every `perflake` command's start on two cores)."""

SELECTABLE = ("run_id", "pool", "dt", "reason", "suite", "host", "device_kind", "gpu_sku", "gpu_name",
              "driver_version", "cuda_version", "cudnn_version", "nccl_version", "torch_version",
              "triton_version", "python_version", "harness_commit", "hardware_fingerprint", "software_fingerprint")
