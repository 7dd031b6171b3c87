"""Sweeps: run ids, planning a sweep into shards per pool, leasing a device, running a shard."""
