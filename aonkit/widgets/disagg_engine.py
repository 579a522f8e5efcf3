"""What :class:`~aonkit.widgets.disagg.DisaggPanel` simulates: its engines and pools, and its two sizing searches.

A mixin of the panel: it reads the panel's controls, ``_step_times``, ``max_replicas`` and ``_found`` (the last
counts found, where the next searches start).
"""

from __future__ import annotations

import math

from ..model.llm import PRESETS, kv_cache_bytes
from ..model.serving_analysis import replicas_needed
from ..model.serving_disagg import Pool, pools_needed
from ..model.serving_spec import Speculation, speculative_memory
from .llm_controls import SPEC_OFF, chosen_draft
from .serving_engine import check_fits, engine_step_time

SAME = "same"
"""The decode device and TP controls' value for the prefill replicas' own."""
TPS = (1, 2, 4, 8)


class DisaggEngine:
    """The engines, pools and sizing searches of :class:`~aonkit.widgets.disagg.DisaggPanel` (a mixin)."""

    def engine(self) -> dict:
        """Step times, KV cache, batch and budget of the replicas, and the transfer: what the simulations take.

        ``step_time``, ``kv_tokens``, ``tp``: a prefill replica's; ``colocated_step_time``, ``colocated_kv_tokens``:
        a colocated one's; ``decode_step_time``, ``decode_kv_tokens``, ``decode_tp``: a decode replica's (its own
        device and TP, or the same); ``speculative``: the decoding replicas' draft (None: plain; its step times and
        memory are then in theirs). Raises ValueError for a precision a device lacks, or weights and one request
        (mean prompt plus max new tokens) that do not fit on one.
        """
        dtype, tokens = str(self.dtype.value), int(self.prompt.value) + int(self.max_new.value)
        device, tp = self.devices[self.device.value], int(self.tp.value)
        dec_device = device if self.decode_device.value == SAME else self.devices[self.decode_device.value]
        dec_tp = tp if self.decode_tp.value == SAME else int(self.decode_tp.value)
        spec = None if self.draft.value == SPEC_OFF else Speculation(int(self.draft_k.value),
                                                                    float(self.acceptance.value))  # fmt: skip
        draft = chosen_draft(self.draft.value, PRESETS)
        parts, cfg = [], PRESETS[self.model.value]
        for dev, n, s in ((device, tp, None), (device, tp, spec), (dec_device, dec_tp, spec)):
            step = engine_step_time(self._step_times, self.model.value, dev, n, dtype, s, draft)
            mem = speculative_memory(cfg, None if s is None else draft, dev, n, dtype)
            check_fits(mem, self.model.value, dev, n, TPS, dtype, tokens, int(self.max_batch.value),
                       "mean prompt + max new tokens")
            parts.append((step, mem))
        (step, mem), (colo_step, colo_mem), (dec_step, dec_mem) = parts
        # each GPU of a replica sends (receives) its shard of the target's cache over its own link: the larger
        # shard's time (a draft's cache is computed where it decodes, at no cost here)
        sent = max(mem.kv_bytes_per_token, kv_cache_bytes(cfg, 1, 1, dec_tp))
        return {"step_time": step, "kv_tokens": mem.kv_tokens, "tp": tp, "colocated_step_time": colo_step,
                "colocated_kv_tokens": colo_mem.kv_tokens, "decode_step_time": dec_step,
                "decode_kv_tokens": dec_mem.kv_tokens, "decode_tp": dec_tp, "max_batch": int(self.max_batch.value),
                "token_budget": int(self.token_budget.value), "speculative": spec,
                "transfer_s": (float(self.latency.value) / 1e3, sent / (float(self.link.value) * 1e9))}  # fmt: skip

    def pools(self, engine: dict, prefill: int, decode: int) -> tuple[Pool, Pool]:
        """The prefill and decode pools of ``prefill`` and ``decode`` replicas of ``engine``."""
        batch = engine["max_batch"]
        return (Pool(prefill, engine["step_time"], batch, engine["token_budget"], True, kv_tokens=engine["kv_tokens"]),
                Pool(decode, engine["decode_step_time"], batch, kv_tokens=engine["decode_kv_tokens"],
                     speculative=engine["speculative"]))

    def colocated_engine(self, engine: dict) -> dict:
        """Keyword arguments of :func:`~aonkit.model.simulate_serving` for the colocated replicas (not how many)."""
        return {"step_time": engine["colocated_step_time"], "kv_tokens": engine["colocated_kv_tokens"],
                "max_batch": engine["max_batch"], "token_budget": engine["token_budget"],
                "chunked_prefill": bool(self.chunked.value), "max_new_tokens": int(self.max_new.value),
                "speculative": engine["speculative"]}  # fmt: skip

    def _size_colocated(self, engine: dict, prompts: object, outputs: object, load: dict, rate: float,
                        slos: tuple[float, float], start: int) -> tuple[int | None, str]:  # fmt: skip
        """The fewest colocated replicas meeting both objectives at ``rate``.

        None when none found, with why no number can ("": the search reached ``max_replicas``).
        """
        try:
            plan = replicas_needed(rate, slos[0], prompts, outputs, also={"tpot_p99_s": slos[1]}, start=start,
                                   max_replicas=self.max_replicas, **load, **self.colocated_engine(engine))
        except ValueError as exc:
            return _not_met(exc)
        return plan.replicas, ""

    def _size_apart(self, engine: dict, prompts: object, outputs: object, load: dict, rate: float,
                    slos: tuple[float, float], start: tuple[int, int]) -> tuple[int | None, int | None, str]:
        """The fewest prefill, then decode replicas meeting the objectives at ``rate``.

        None when none found, with why no number can ("": the search reached ``max_replicas``).
        """
        prefill, decode = self.pools(engine, 1, 1)
        try:
            plan = pools_needed(rate, prompts, outputs, ttft_slo_s=slos[0], tpot_slo_s=slos[1], prefill=prefill,
                                decode=decode, n_requests=load["n_requests"], transfer_s=engine["transfer_s"],
                                arrival_cv=load["arrival_cv"], seed=load["seed"], max_replicas=self.max_replicas,
                                start=start, max_new_tokens=int(self.max_new.value))  # fmt: skip
        except ValueError as exc:
            count, why = _not_met(exc)
            return count, None, why
        return plan.prefill, plan.decode, ""

    def _guess(self, rate: float, work: tuple[float, float]) -> tuple[int, int, int]:
        """Where the searches start (colocated, prefill, decode).

        The last counts found, scaled by the rate and the engines' :func:`~aonkit.model.serving_steps.request_seconds`
        (the decode replicas' for the decode count; the sliders' pools where none was found yet): right, each search
        takes two simulations.
        """
        p, d = int(self.n_prefill.value), int(self.n_decode.value)
        found = self._found
        if found is None:
            return p + d, p, d

        def at(count: int | None, fallback: int, now: float, then: float) -> int:
            scale = rate / found[0] * (now / then if 0 < min(now, then) < math.inf else 1.0)
            return max(1, min(self.max_replicas, round(count * scale))) if count is not None else fallback

        (w, wd), (was, was_d) = work, found[1]
        return at(found[2], p + d, w, was), at(found[3], p, w, was), at(found[4], d, wd, was_d)


def _not_met(exc: ValueError) -> tuple[None, str]:
    """None, and why no number of replicas can meet the objectives ("": the search reached its most).

    Any other error is raised again.
    """
    text = str(exc)
    if "not met with" not in text:
        raise exc
    _, _, why = text.partition("not met with any number of replicas: ")
    return None, why
