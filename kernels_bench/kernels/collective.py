"""Collectives through torch.distributed: all-reduce, all-gather, reduce-scatter.

Parameters: numel, the elements of the full buffer (nccl-tests' "size": the all-reduce
buffer, the all-gather output, the reduce-scatter input; a multiple of world_size), and
world_size, the number of ranks. Backends are the process-group backends: nccl (GPUs)
and gloo (CPU).

`prepare` needs an initialised process group of `world_size` ranks, which
`kernels_bench.collectives.run_collective` provides; called anywhere else it raises
Unsupported, so a collective case reaching the single-process path is a skip that says
where it should have gone.

Bytes are declared as nccl-tests' bus bytes, size * bus factor, so that bytes / time is
the bus bandwidth, the figure comparable across world sizes and with the hardware's
link bandwidth: all-reduce 2(n-1)/n, all-gather and reduce-scatter (n-1)/n. Flops are
the additions one rank performs: (n-1)/n * numel for all-reduce and reduce-scatter
(ring reduce-scatter phase), none for all-gather.
"""
from __future__ import annotations

from dataclasses import dataclass

from kernels_bench.case import Case
from kernels_bench.kernels.base import DTYPE_BYTES, Prepared, Unsupported, compare, torch_dtype

BUS_FACTOR = {"all_reduce": lambda n: 2 * (n - 1) / n,
              "all_gather": lambda n: (n - 1) / n,
              "reduce_scatter": lambda n: (n - 1) / n}


def bus_factor(op: str, world_size: int) -> float:
    """nccl-tests' factor from algorithm bandwidth to bus bandwidth."""
    return BUS_FACTOR[op](world_size)


def size_bytes(case: Case) -> float:
    """nccl-tests' size S of the case: the full buffer in bytes."""
    return float(int(case.p["numel"]) * DTYPE_BYTES[case.dtype])


def algbw_gbps(case: Case, latency_ns: float) -> float:
    """Algorithm bandwidth: S / t, in GB/s (1e9 bytes per second)."""
    return size_bytes(case) / latency_ns


def busbw_gbps(case: Case, latency_ns: float) -> float:
    """Bus bandwidth: algorithm bandwidth times the op's bus factor, in GB/s."""
    return algbw_gbps(case, latency_ns) * bus_factor(case.kernel, int(case.p["world_size"]))


@dataclass(frozen=True)
class Collective:
    name: str
    family: str = "collective"
    backends: tuple[str, ...] = ("nccl", "gloo")

    def flops(self, case: Case) -> float:
        if self.name == "all_gather":
            return 0.0
        n = int(case.p["world_size"])
        return (n - 1) / n * int(case.p["numel"])

    def bytes(self, case: Case) -> float:
        return size_bytes(case) * bus_factor(self.name, int(case.p["world_size"]))

    def prepare(self, case: Case, device: str) -> Prepared:
        import torch
        import torch.distributed as dist

        n = int(case.p["world_size"])
        numel = int(case.p["numel"])
        if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() != n:
            raise Unsupported(f"{self.name} needs a process group of {n} ranks: "
                              "run it with kernels_bench.collectives.run_collective")
        if dist.get_backend() != case.backend:
            raise Unsupported(f"case backend {case.backend} but the process group is {dist.get_backend()}")
        if numel % n:
            raise ValueError(f"{case.label}: numel {numel} is not a multiple of world_size {n}")
        if case.dtype in ("fp8", "tf32"):
            raise Unsupported(f"collectives in {case.dtype} are not benchmarked")
        dt = torch_dtype(case.dtype)
        rank = dist.get_rank()
        chunk = numel // n
        # Timed buffers hold zeros: repeated in-place sums then never overflow to inf,
        # and the check below uses its own buffers with rank-dependent values.
        big = torch.zeros(numel, dtype=dt, device=device)
        small = torch.zeros(chunk, dtype=dt, device=device)
        gen = torch.Generator(device="cpu").manual_seed(0)
        base = torch.randn(numel, generator=gen)  # the same on every rank

        def mine(r: int):
            # Rank r contributes base * (r + 1): every rank can compute every input.
            return (base * (r + 1)).to(dtype=dt)

        if self.name == "all_reduce":
            def fn():
                return dist.all_reduce(big)

            def check():
                x = mine(rank).to(device)
                dist.all_reduce(x)
                return compare(x, sum(mine(r).double() for r in range(n)).to(device), case.dtype)
        elif self.name == "all_gather":
            gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor

            def fn():
                return gather(big, small)

            def check():
                out = torch.empty(numel, dtype=dt, device=device)
                gather(out, mine(rank)[rank * chunk:(rank + 1) * chunk].to(device))
                ref = torch.cat([mine(r)[r * chunk:(r + 1) * chunk] for r in range(n)]).double()
                return compare(out, ref.to(device), case.dtype)
        else:
            scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor

            def fn():
                return scatter(small, big)

            def check():
                out = torch.empty(chunk, dtype=dt, device=device)
                scatter(out, mine(rank).to(device))
                ref = sum(mine(r).double() for r in range(n))[rank * chunk:(rank + 1) * chunk]
                return compare(out, ref.to(device), case.dtype)

        return Prepared(fn, check)


KERNELS = tuple(Collective(op) for op in BUS_FACTOR)
