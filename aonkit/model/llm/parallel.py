"""How a training job is split: :class:`Parallelism` (TP, SP, CP, PP with virtual stages, DP with ZeRO, EP).

Ranks are laid out as Megatron-LM does, innermost first: tensor (``tp``), then
context (``cp``), then data (``dp``), then pipeline (``pp``). Expert
parallelism (``ep``) takes its ranks from the data and context ranks next to
the expert tensor ranks, so experts are sharded ``ep * expert_tp`` ways and
their gradients are reduced over ``tp * cp * dp / (ep * expert_tp)`` ranks.
A rank holds ``ceil(l / p)`` layers (Llama 3 405B splits 126 layers over 16
stages with one fewer on the first and last). A group fits on NVLink when
``stride * size <= gpus_per_node`` (stride: the product of the sizes inside it).
"""

from __future__ import annotations

from dataclasses import dataclass

from .config import TransformerConfig
from .flops import recompute_mode


@dataclass(frozen=True)
class Parallelism:
    """Parallel layout and schedule of one training job.

    Parameters
    ----------
    tp : int
        Tensor-parallel size (Megatron column/row-parallel layers).
    pp : int
        Pipeline stages; the schedule is 1F1B, interleaved when ``vpp > 1``.
    dp : int
        Data-parallel size (not counting ``cp``).
    cp : int
        Context-parallel size: each rank holds ``seq / cp`` tokens of every sequence.
    ep : int
        Expert-parallel size (MoE models).
    sp : bool
        Sequence parallelism inside the tensor-parallel group (Korthikanti et al. 2022).
    vpp : int
        Virtual stages (model chunks) per pipeline rank, ``v`` of the interleaved schedule.
    micro_batch : int
        Sequences per micro-batch ``b``.
    zero : int
        ZeRO stage 0-3 over the data-parallel ranks (3 is FSDP full sharding).
    recompute : bool or {"none", "selective", "full"}
        Activation recomputation.
    expert_tp : int, optional
        Tensor-parallel size of the experts (default ``tp``).
    """

    tp: int = 1
    pp: int = 1
    dp: int = 1
    cp: int = 1
    ep: int = 1
    sp: bool = False
    vpp: int = 1
    micro_batch: int = 1
    zero: int = 0
    recompute: bool | str = "none"
    expert_tp: int | None = None

    def __post_init__(self) -> None:
        sizes = {k: getattr(self, k) for k in ("tp", "pp", "dp", "cp", "ep", "vpp", "micro_batch")}
        bad = {k: v for k, v in sizes.items() if not isinstance(v, int) or v < 1}
        if bad:
            raise ValueError(f"Parallelism: {bad} must be positive integers")
        if self.zero not in (0, 1, 2, 3):
            raise ValueError(f"Parallelism: zero must be 0, 1, 2 or 3 (3 = FSDP), not {self.zero!r}")
        if self.vpp > 1 and self.pp == 1:
            raise ValueError("Parallelism: vpp > 1 (interleaved schedule) needs pp > 1")
        object.__setattr__(self, "recompute", recompute_mode(self.recompute))
        object.__setattr__(self, "expert_tp", self.expert_tp or self.tp)
        if (self.tp * self.cp * self.dp) % (self.ep * self.expert_tp):
            raise ValueError(f"Parallelism: ep * expert_tp ({self.ep} * {self.expert_tp}) must divide "
                             f"tp * cp * dp ({self.tp * self.cp * self.dp})")  # fmt: skip

    @property
    def gpus(self) -> int:
        """``tp * cp * dp * pp``."""
        return self.tp * self.cp * self.dp * self.pp

    @property
    def expert_dp(self) -> int:
        """Ranks that hold the same experts and reduce their gradients."""
        return self.tp * self.cp * self.dp // (self.ep * self.expert_tp)

    def micro_batches(self, global_batch: int) -> int:
        """Micro-batches per pipeline per iteration, ``m = global_batch / (micro_batch * dp)``."""
        per = self.micro_batch * self.dp
        if global_batch % per:
            raise ValueError(f"global_batch ({global_batch}) is not a multiple of micro_batch * dp ({per})")
        return global_batch // per

    def check(self, config: TransformerConfig, global_batch: int | None = None) -> None:
        """Raise ValueError when this layout cannot run ``config`` (and ``global_batch``)."""
        n = config.name or "model"
        if config.layers < self.pp * self.vpp:
            raise ValueError(f"{n}: fewer layers ({config.layers}) than pipeline chunks ({self.pp * self.vpp})")
        if config.heads % self.tp:
            raise ValueError(f"{n}: heads ({config.heads}) not divisible by tp ({self.tp})")
        if config.seq % self.cp:
            raise ValueError(f"{n}: seq ({config.seq}) not divisible by cp ({self.cp})")
        if self.ep > 1 and (config.experts == 1 or config.experts % self.ep):
            raise ValueError(f"{n}: ep ({self.ep}) must divide the number of experts ({config.experts})")
        if global_batch is not None:
            m = self.micro_batches(global_batch)
            if self.vpp > 1 and m % self.pp:
                raise ValueError(f"interleaved schedule: micro-batches ({m}) must be a multiple of pp ({self.pp})")

    def stage_layers(self, config: TransformerConfig) -> int:
        """Layers on the fullest pipeline rank, ``ceil(l / p)`` (uneven splits are paced by it)."""
        return -(-config.layers // self.pp)

    def bubble_fraction(self, micro_batches: int) -> float:
        """Pipeline bubble over ideal time, ``(p - 1) / (v * m)`` (Narayanan et al. 2021, section 2.2)."""
        return (self.pp - 1) / (self.vpp * micro_batches)

    def in_flight(self, micro_batches: int | None = None) -> float:
        """Micro-batches whose activations the first stage holds, in units of one stage's layers.

        1F1B: ``min(p, m)`` micro-batches of one stage's layers each. The interleaved
        schedule holds ``p * (1 + (p - 1)/(p * v))`` (Korthikanti et al. 2022, section 4.2.3).
        """
        p = self.pp
        held = float(p if micro_batches is None else min(p, micro_batches))
        if self.vpp > 1:
            held *= 1 + (p - 1) / (p * self.vpp)
        return held
