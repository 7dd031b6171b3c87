"""Workloads as data: a transformer model described by its dimensions (a preset YAML in
pipelines/projection/presets/), and a scenario to run it in (prefill or decode, batch,
prompt or context length, tensor and expert parallelism).

    name: llama-8b
    hidden: 4096            # model width
    layers: 32
    heads: 32               # query heads
    kv_heads: 8             # < heads is grouped-query attention
    head_dim: 128
    ffn: 14336              # FFN width (of one expert, for a mixture of experts)
    activation: silu_mul    # silu_mul (gated, SwiGLU: the up projection is 2 x ffn) or gelu
    norm: rms_norm          # rms_norm or layer_norm
    vocab: 128256
    dtype: bf16
    experts: 8              # optional (default 1): a mixture of experts
    experts_per_token: 2    # optional (default 1)
    attention_backend: sdpa-flash   # optional: the kernels_bench sdpa backend

Both are validated once, at load, with errors that name the file and the field.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kernels_bench.kernels.attention import BACKENDS as ATTENTION_BACKENDS
from kernels_bench.kernels.base import DTYPE_BYTES
from kernels_bench.yaml_file import load_yaml

PRESETS_DIR = Path(__file__).parent / "presets"
ACTIVATIONS = ("silu_mul", "gelu")
NORMS = ("rms_norm", "layer_norm")
PHASES = ("prefill", "decode")
_INTS = ("hidden", "layers", "heads", "kv_heads", "head_dim", "ffn", "vocab", "experts", "experts_per_token")
_REQUIRED = ("name", "hidden", "layers", "heads", "kv_heads", "head_dim", "ffn", "activation", "norm", "vocab",
             "dtype")
_OPTIONAL = ("description", "experts", "experts_per_token", "attention_backend")


class WorkloadError(ValueError):
    """A preset or scenario that cannot describe a model run; the message says where."""


@dataclass(frozen=True)
class Workload:
    """A decoder-only transformer's shape."""

    name: str
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    activation: str
    norm: str
    vocab: int
    dtype: str
    experts: int = 1
    experts_per_token: int = 1
    attention_backend: str = "sdpa-flash"
    description: str = ""
    source: str = ""

    @property
    def moe(self) -> bool:
        return self.experts > 1

    @property
    def ffn_up(self) -> int:
        """Output width of the (fused) up projection: gate and up for a gated activation."""
        return 2 * self.ffn if self.activation == "silu_mul" else self.ffn

    def layer_params(self, *, active: bool = False) -> int:
        """Weights of one layer's linear maps (attention and FFN; norms left out). With
        `active`, only the experts one token uses (plus the router)."""
        attn = self.hidden * (self.heads + 2 * self.kv_heads) * self.head_dim + self.heads * self.head_dim * self.hidden
        expert = self.hidden * self.ffn_up + self.ffn * self.hidden
        if not self.moe:
            return attn + expert
        used = self.experts_per_token if active else self.experts
        return attn + used * expert + self.hidden * self.experts

    def params(self, *, active: bool = False) -> int:
        """Weights of every linear map plus the embedding and the (untied) output head."""
        return self.layers * self.layer_params(active=active) + 2 * self.vocab * self.hidden

    @property
    def weight_bytes(self) -> int:
        return self.params() * DTYPE_BYTES[self.dtype]


@dataclass(frozen=True)
class Scenario:
    """One step of a run: prefill (`batch` prompts of `seq` tokens) or decode (one new
    token for each of `batch` sequences, against a KV cache of `seq` tokens), over `tp`
    GPUs in tensor parallel, the experts split `ep` ways within them."""

    phase: str
    batch: int
    seq: int
    tp: int = 1
    ep: int = 1

    @property
    def tokens(self) -> int:
        """Tokens one step computes: the whole prompts in prefill, one per sequence in decode."""
        return self.batch * self.seq if self.phase == "prefill" else self.batch

    @property
    def label(self) -> str:
        length = "prompt" if self.phase == "prefill" else "context"
        return (f"{self.phase} batch={self.batch} {length}={self.seq} tp={self.tp}"
                + (f" ep={self.ep}" if self.ep > 1 else ""))

    def check(self, w: Workload) -> "Scenario":
        """This scenario, or WorkloadError saying what does not fit `w`."""
        where = f"scenario for {w.name}"
        if self.phase not in PHASES:
            raise WorkloadError(f"{where}: phase {self.phase!r}; use one of {', '.join(PHASES)}")
        for name in ("batch", "seq", "tp", "ep"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise WorkloadError(f"{where}: {name} must be a positive integer, got {getattr(self, name)!r}")
        if w.heads % self.tp:
            raise WorkloadError(f"{where}: tp {self.tp} does not divide the {w.heads} query heads")
        if w.kv_heads % self.tp and self.tp % w.kv_heads:
            raise WorkloadError(f"{where}: tp {self.tp} and {w.kv_heads} kv heads: one must divide the other")
        if self.ep > 1 and not w.moe:
            raise WorkloadError(f"{where}: ep {self.ep} needs a mixture of experts; {w.name} is dense")
        if self.tp % self.ep or w.experts % self.ep:
            raise WorkloadError(f"{where}: ep {self.ep} must divide tp ({self.tp}) and the experts ({w.experts})")
        if w.ffn % (self.tp // self.ep):
            raise WorkloadError(f"{where}: the FFN width {w.ffn} does not split {self.tp // self.ep} ways")
        if w.vocab % self.tp:
            raise WorkloadError(f"{where}: tp {self.tp} does not divide the vocabulary ({w.vocab})")
        return self

    def kv_heads_per_gpu(self, w: Workload) -> int:
        """KV heads each GPU holds: split while there are enough, else replicated (one each)."""
        return max(1, w.kv_heads // self.tp)


def preset_path(name_or_path: str) -> Path:
    """The YAML of a preset name (presets/NAME.yaml) or a path to one."""
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml"):
        if not p.exists():
            raise WorkloadError(f"{p}: no such workload file")
        return p
    p = PRESETS_DIR / f"{name_or_path}.yaml"
    if not p.exists():
        raise WorkloadError(f"no workload preset {name_or_path!r}; presets: {', '.join(preset_names())} "
                            f"(or give a path to a YAML file)")
    return p


def preset_names() -> list[str]:
    return sorted(p.stem for p in PRESETS_DIR.glob("*.yaml"))


def load_workload(name_or_path: str) -> Workload:
    """The workload of a preset name or YAML path, validated (WorkloadError naming the
    file and the field otherwise)."""
    path = preset_path(name_or_path)
    try:
        doc = load_yaml(path)
    except ValueError as e:
        raise WorkloadError(str(e)) from None
    return parse_workload(doc, str(path))


def parse_workload(doc, where: str) -> Workload:
    """A workload from a parsed YAML document; `where` names it in errors."""
    if not isinstance(doc, dict):
        raise WorkloadError(f"{where}: a workload is a mapping of field to value")
    unknown = sorted(set(doc) - set(_REQUIRED) - set(_OPTIONAL))
    if unknown:
        raise WorkloadError(f"{where}: unknown fields {unknown}; allowed: {sorted(_REQUIRED + _OPTIONAL)}")
    missing = [k for k in _REQUIRED if k not in doc]
    if missing:
        raise WorkloadError(f"{where}: missing fields {missing}")
    for k in _INTS:
        if k in doc and (isinstance(doc[k], bool) or not isinstance(doc[k], int) or doc[k] < 1):
            raise WorkloadError(f"{where}: {k}: a positive integer, got {doc[k]!r}")
    choices = {"activation": ACTIVATIONS, "norm": NORMS, "dtype": tuple(DTYPE_BYTES),
               "attention_backend": ATTENTION_BACKENDS}
    for k, allowed in choices.items():
        if k in doc and doc[k] not in allowed:
            raise WorkloadError(f"{where}: {k}: {doc[k]!r} is not one of {', '.join(allowed)}")
    w = Workload(**{k: doc[k] for k in _REQUIRED + _OPTIONAL if k in doc}, source=where)
    if w.heads % w.kv_heads:
        raise WorkloadError(f"{where}: heads ({w.heads}) must be a multiple of kv_heads ({w.kv_heads})")
    if w.experts_per_token > w.experts:
        raise WorkloadError(f"{where}: experts_per_token ({w.experts_per_token}) exceeds experts ({w.experts})")
    return w
