"""A workload's step as the kernel calls one GPU makes, each a `kernels_bench` case, and
the suite that measures exactly those cases every night.

The layer is a serving engine's (vLLM-style) decoder layer, on each of `tp` GPUs:

    norm -> fused QKV GEMM -> attention (SDPA) -> O GEMM -> all-reduce -> residual add
    norm -> FFN (fused gate-up GEMM -> activation -> down GEMM) -> all-reduce -> residual add

with the embedding before the layers, and the final norm, the LM head (last token of
each sequence only) and the all-gather of its logits after them. Tensor parallelism
splits heads and FFN columns `tp` ways (KV heads are replicated when there are fewer
than GPUs). A mixture of experts replaces the FFN by a router GEMM, a softmax over
experts and, per active expert on this GPU, gate-up, activation and down on the tokens
routed to it: routing is assumed balanced (ceil(tokens x top-k / experts) tokens each);
expert parallelism `ep` puts experts / ep experts on each GPU, each split tp / ep ways,
the tokens replicated over the TP group (no all-to-all; the all-reduce combines).

What is not modelled (the gap docs/model.md names): rotary embeddings and the KV cache
write (small memory-bound ops), MoE token gather/scatter and top-k, sampling, launch
gaps between kernels and any fusion or overlap an engine makes.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from kernels_bench.case import Case
from kernels_bench.kernels import kernel_for
from pipelines.projection.workload import Scenario, Workload, load_workload

# Op classes, in the order reports list them.
OP_CLASSES = ("gemm", "attention", "norm", "activation", "elementwise", "communication")
COMMUNICATION_BACKEND = "nccl"
# The presets the generated suite measures, and the scenarios it covers for each.
SUITE_NAME = "llm-models"
SUITE_PRESETS = ("llama-8b", "llama-70b", "mixtral-8x7b")
SUITE_SCENARIOS = tuple(
    [Scenario("prefill", 1, s, tp) for s in (512, 2048, 8192) for tp in (1, 8)]
    + [Scenario("decode", b, c, tp) for b in (1, 8, 32, 128) for c in (1024, 4096, 16384) for tp in (1, 8)])


@dataclass(frozen=True)
class Call:
    """`count` calls of one kernel case per step on one GPU (`layer`: made in every
    layer, `count` covering all of them)."""

    op: str
    op_class: str
    case: Case
    count: int
    layer: bool

    @property
    def flops(self) -> float:
        """Flops of one call (the harness's cost model)."""
        return kernel_for(self.case.kernel).flops(self.case)

    @property
    def bytes(self) -> float:
        """Bytes of one call (bus bytes for a collective)."""
        return kernel_for(self.case.kernel).bytes(self.case)


def _case(kernel: str, backend: str, dtype: str, **params) -> Case:
    return Case.make(kernel_for(kernel).family, kernel, backend, dtype, **params)


def decompose(w: Workload, s: Scenario) -> list[Call]:
    """The kernel calls of one step of `s` on one of its GPUs."""
    s.check(w)
    dt, L, H, t = w.dtype, w.layers, w.hidden, s.tokens

    def gemm(op, m, n, k, count=1, layer=True):
        return Call(op, "gemm", _case("matmul", "torch", dt, m=m, n=n, k=k), count * (L if layer else 1), layer)

    def norm(op, rows, layer=True):
        return Call(op, "norm", _case(w.norm, "torch", dt, rows=rows, hidden=H), L if layer else 1, layer)

    def all_reduce(op):
        return Call(op, "communication", _case("all_reduce", COMMUNICATION_BACKEND, dt, numel=t * H, world_size=s.tp),
                    L, True)

    def residual(op):
        return Call(op, "elementwise", _case("add", "torch", dt, numel=t * H), L, True)

    heads, kv = w.heads // s.tp, s.kv_heads_per_gpu(w)
    prefill = s.phase == "prefill"
    attention = _case("sdpa", w.attention_backend, dt, batch=s.batch, heads=heads, kv_heads=kv,
                      q_len=s.seq if prefill else 1, kv_len=s.seq, head_dim=w.head_dim, causal=prefill)
    calls = [Call("embedding", "elementwise", _case("copy", "torch", dt, numel=t * H), 1, False),
             norm("attn_norm", t),
             gemm("qkv_proj", t, (heads + 2 * kv) * w.head_dim, H),
             Call("attention", "attention", attention, L, True),
             gemm("o_proj", t, H, heads * w.head_dim)]
    if s.tp > 1:
        calls.append(all_reduce("attn_all_reduce"))
    calls += [residual("attn_residual"), norm("ffn_norm", t)]
    calls += _moe(w, s) if w.moe else _ffn(w, s, t, s.tp, 1, gemm)
    if s.tp > 1:
        calls.append(all_reduce("ffn_all_reduce"))
    calls += [residual("ffn_residual"), norm("final_norm", t, layer=False),
              gemm("lm_head", s.batch, w.vocab // s.tp, H, layer=False)]
    if s.tp > 1:
        calls.append(Call("logits_all_gather", "communication",
                          _case("all_gather", COMMUNICATION_BACKEND, dt, numel=s.batch * w.vocab, world_size=s.tp),
                          1, False))
    return calls


def _ffn(w: Workload, s: Scenario, rows: int, split: int, count: int, gemm, prefix: str = "") -> list[Call]:
    """Gate-up, activation and down of one FFN (of width ffn / split) on `rows` tokens,
    made `count` times per layer."""
    f = w.ffn // split
    return [gemm(f"{prefix}gate_up_proj", rows, w.ffn_up // split, w.hidden, count),
            Call(f"{prefix}activation", "activation", _case(w.activation, "torch", w.dtype, rows=rows, hidden=f),
                 count * w.layers, True),
            gemm(f"{prefix}down_proj", rows, w.hidden, f, count)]


def _moe(w: Workload, s: Scenario) -> list[Call]:
    """Router, its softmax, and the active experts of this GPU (balanced routing)."""
    t, L = s.tokens, w.layers

    def gemm(op, m, n, k, count=1):
        return Call(op, "gemm", _case("matmul", "torch", w.dtype, m=m, n=n, k=k), count * L, True)

    routed = t * w.experts_per_token
    per_expert = math.ceil(routed / w.experts)
    local = min(w.experts // s.ep, routed)  # an expert no token reached is not called
    return [gemm("router", t, w.experts, w.hidden),
            Call("router_softmax", "norm", _case("softmax", "torch", w.dtype, rows=t, hidden=w.experts), L, True),
            *_ffn(w, s, per_expert, s.tp // s.ep, local, gemm, prefix="expert_")]


def step_flops(calls: list[Call]) -> float:
    """Flops one GPU performs in a step (collectives' additions included)."""
    return sum(c.flops * c.count for c in calls)


# --- the generated suite ----------------------------------------------------------------

def suite_cases(presets=SUITE_PRESETS, scenarios=SUITE_SCENARIOS) -> list[Case]:
    """Every distinct case the presets' scenarios call (a scenario a preset cannot run,
    e.g. tp 8 over fewer heads, is left out)."""
    from pipelines.projection.workload import WorkloadError

    seen: dict[str, Case] = {}
    for name in presets:
        w = load_workload(name)
        for s in scenarios:
            if w.moe and s.tp > 1:
                variants = [s, Scenario(s.phase, s.batch, s.seq, s.tp, s.tp)]  # experts split or placed
            else:
                variants = [s]
            for v in variants:
                try:
                    calls = decompose(w, v)
                except WorkloadError:
                    continue
                for c in calls:
                    seen.setdefault(c.case.case_id, c.case)
    return list(seen.values())


def suite_document(cases: list[Case], presets=SUITE_PRESETS) -> dict:
    """The suite YAML (kernels_bench/suites/llm-models.yaml) measuring `cases`: one group
    per kernel, backend and dtype, its shapes listed."""
    groups: dict[tuple, list[dict]] = {}
    for c in cases:
        groups.setdefault((c.kernel, c.backend, c.dtype), []).append(c.p)
    doc_groups = []
    for (kernel, backend, dtype), shapes in sorted(groups.items()):
        shapes = sorted(shapes, key=lambda p: sorted(p.items()))
        doc_groups.append({"kernel": kernel, "backends": [backend], "dtypes": [dtype], "axes": {"shape": shapes},
                           "tags": ["llm", "model"]})
    return {"name": SUITE_NAME, "groups": doc_groups}


def suite_text(presets=SUITE_PRESETS, scenarios=SUITE_SCENARIOS) -> str:
    """The generated suite file's text, header included."""
    import yaml

    cases = suite_cases(presets, scenarios)
    header = (f"# GENERATED by `perflake model suite --write` from the workload presets {', '.join(presets)}\n"
              f"# (pipelines/projection/presets) and the scenarios of pipelines/projection/decompose.py:\n"
              f"# every kernel call their prefill and decode steps make, on 1 and 8 GPUs. Do not edit;\n"
              f"# change the presets or scenarios and regenerate. {len(cases)} cases; collectives over more\n"
              f"# GPUs than a pool has are recorded as skipped.\n")
    return header + yaml.safe_dump(suite_document(cases, presets), sort_keys=False, default_flow_style=None,
                                   width=120)
