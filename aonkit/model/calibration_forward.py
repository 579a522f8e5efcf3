"""The analytic LLM model against a traced forward pass: a config read off op shapes, and the model beside it.

See :mod:`aonkit.model.calibration`; results on the shared traces in ``docs/calibration.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from .calibration_table import MODEL_CLASS
from .hardware import DeviceSpec
from .llm.config import TransformerConfig
from .llm.costs import device_peak, layer_forward, roofline_time
from .llm.step import EFFICIENCY

if TYPE_CHECKING:
    from ..trace import Trace
    from .calibration import Calibration




@dataclass(frozen=True)
class TracedTransformer:
    """A transformer read off a trace's op shapes: its config and the batch and sequence it ran."""

    config: TransformerConfig
    batch: int
    seq: int
    causal: bool
    how: dict[str, str] = field(default_factory=dict, repr=False)


def _dims(trace: Trace, name_pattern: str) -> list[list]:
    ev = trace.events
    rows = np.flatnonzero(ev["name"].astype(str).str.fullmatch(name_pattern).to_numpy()
                          & ev["cat"].isin(("cpu_op", "Operator")).to_numpy())  # fmt: skip
    return [d for d in trace.arg_values("Input Dims", rows) if isinstance(d, list)] if len(rows) else []


def transformer_from_trace(trace: Trace, vocab: int | None = None, name: str = "") -> TracedTransformer:
    """The :class:`~aonkit.model.llm.TransformerConfig` of a traced transformer forward pass.

    Read from the op shapes of ``aten::scaled_dot_product_attention`` (batch ``B``, heads ``a``,
    KV heads ``g``, sequence ``s``, head size ``d``; one call per layer), ``aten::linear``
    (hidden ``h``: the commonest input size; ``ffn``: the commonest output size of an ``h``-input
    linear other than ``a*d``, ``g*d`` and ``h``; gated when there are twice as many ``h -> ffn``
    as ``ffn -> h`` linears; biases when the query projection has one), ``aten::embedding``
    (vocabulary: the table whose width is ``h`` and that has the most rows) and
    ``aten::layer_norm`` (LayerNorm when present, else RMSNorm). Causal when the SDPA calls pass
    ``is_causal=True`` (``Concrete Inputs``). One forward pass per trace (or per table window).

    Parameters
    ----------
    trace : Trace
        A trace of one forward pass recorded with ``record_shapes=True``. Every SDPA call counts as
        a layer, so a trace of several passes overstates ``layers``. Batch, heads, sequence and causality
        are read from the first SDPA call.
    vocab : int, optional
        Vocabulary size; default None reads it off the ``aten::embedding`` shapes.
    name : str, default ""
        Name given to the config.

    Returns
    -------
    TracedTransformer
        ``config`` (the :class:`~aonkit.model.llm.TransformerConfig`, ``seq`` = the SDPA sequence
        length), ``batch`` and ``seq`` (sequences and tokens per sequence of the traced pass),
        ``causal`` and ``how`` (field -> where in the trace it was read). When no ``h``-input linear
        has another output size, ``ffn`` defaults to ``4 * h``.

    Raises
    ------
    ValueError
        When the trace has no SDPA or linear ops with shapes, the SDPA query or key shape is not
        4-D ``(batch, heads, seq, head_dim)``, or no vocabulary is found or given; also when the
        sizes read make an invalid :class:`~aonkit.model.llm.TransformerConfig`.
    """
    ev = trace.events
    sdpa_rows = np.flatnonzero((ev["name"] == "aten::scaled_dot_product_attention").to_numpy())
    sdpa = [d for d in trace.arg_values("Input Dims", sdpa_rows) if isinstance(d, list) and len(d) >= 3]
    if not sdpa:
        raise ValueError("no aten::scaled_dot_product_attention with recorded shapes: cannot read the heads")
    q, k = sdpa[0][0], sdpa[0][1]
    if len(q) != 4 or len(k) != 4:
        raise ValueError(f"SDPA query/key shapes {q}, {k} are not (batch, heads, seq, head_dim)")
    b, a, s, d = (int(x) for x in q)
    g = int(k[1])
    conc = trace.arg_values("Concrete Inputs", sdpa_rows[:1])[0] or []
    causal = len(conc) > 5 and str(conc[5]) == "True"
    lin = [(int(x[0][-1]), int(x[1][0]), bool(len(x) > 2 and x[2])) for x in _dims(trace, "aten::linear")
           if len(x) >= 2 and len(x[0]) >= 1 and len(x[1]) == 2]  # fmt: skip
    if not lin:
        raise ValueError("no aten::linear with recorded shapes: cannot read the hidden and MLP sizes")
    ins = pd.Series([i for i, _, _ in lin])
    h = int(ins.mode().iloc[0])
    outs = pd.Series([o for i, o, _ in lin if i == h and o not in (a * d, g * d, h)])
    ffn = int(outs.mode().iloc[0]) if len(outs) else 4 * h
    up = sum(1 for i, o, _ in lin if i == h and o == ffn)
    down = sum(1 for i, o, _ in lin if i == ffn and o == h)
    gated = down > 0 and up == 2 * down
    bias = any(bb for i, o, bb in lin if i == h and o == a * d)
    if vocab is None:
        tables = [int(x[0][0]) for x in _dims(trace, "aten::embedding") if len(x) and len(x[0]) == 2
                  and int(x[0][1]) == h]  # fmt: skip
        if not tables:
            raise ValueError("no aten::embedding of width hidden: pass vocab=")
        vocab = max(tables)
    norm = "layernorm" if _dims(trace, "aten::layer_norm") else "rmsnorm"
    cfg = TransformerConfig(layers=len(sdpa), hidden=h, heads=a, vocab=vocab, seq=s, kv_heads=g, ffn=ffn,
                            gated_mlp=gated, head_dim=d, bias=bias, norm=norm, name=name)  # fmt: skip
    how = {"layers": f"{len(sdpa)} SDPA calls", "heads": f"SDPA query {q}", "kv_heads": f"SDPA key {k}",
           "hidden": f"commonest linear input ({int((ins == h).sum())} of {len(lin)})",
           "ffn": f"{up} linears {h}->{ffn}, {down} {ffn}->{h}", "vocab": f"{vocab}", "norm": norm}  # fmt: skip
    return TracedTransformer(cfg, b, s, causal, how)


def compare_forward(calibration: Calibration, config: TransformerConfig, batch: int, seq: int, *,
                    causal: bool = True, dtype: str = "bf16", device: DeviceSpec | None = None,
                    efficiency: Mapping[str, float] | None = None) -> pd.DataFrame:  # fmt: skip
    """The LLM model's forward pass (its layers, no logits) beside the calibrated trace's, per model class.

    The trace's fitted rows map to the model's classes (``gemm`` -> ``matmul``, ``attention``,
    the memory classes -> ``elementwise``; others are left out). The model's time per class is
    :func:`~aonkit.model.llm.costs.roofline_time` of :func:`~aonkit.model.llm.costs.layer_forward`
    times the layers, as :func:`~aonkit.model.llm.prefill_time` computes it, with the default
    :data:`~aonkit.model.llm.step.EFFICIENCY` and with ``calibration.efficiency`` (or ``efficiency``).

    Parameters
    ----------
    calibration : Calibration
        A :func:`~aonkit.model.calibration.calibrate` result; its ``residuals`` give the trace side.
    config : TransformerConfig
        The model's transformer (e.g. :func:`transformer_from_trace`'s ``config``). Its dense and
        MoE layers are costed as :func:`~aonkit.model.llm.prefill_time` costs them (an MoE layer
        reads the experts its ``batch * seq`` tokens are expected to visit), on one GPU (no tensor
        parallelism), with 2-byte weights and KV cache.
    batch : int
        Sequences in the traced forward pass.
    seq : int
        Tokens per sequence (queries and keys alike).
    causal : bool, default True
        Count causal attention pairs only.
    dtype : str, default "bf16"
        Peak key of the device the model's matmul and attention classes run at.
    device : DeviceSpec, optional
        Device ceilings of the model; default None uses ``calibration.spec``.
    efficiency : mapping of str to float, optional
        Efficiency keys for the calibrated column, over :data:`~aonkit.model.llm.step.EFFICIENCY`;
        default None uses ``calibration.efficiency``. Only ``matmul``, ``attention`` and ``memory``
        are used.

    Returns
    -------
    pandas.DataFrame
        Index ``matmul``, ``attention``, ``elementwise``, ``total`` (the sum of the three); columns
        ``trace_flop`` and ``trace_bytes`` (summed over the trace's rows of the class), ``model_flop``
        and ``model_bytes`` (all layers), ``measured_ns``, ``default_ns`` and ``calibrated_ns`` (ns),
        ``default_error`` and ``calibrated_error`` (``model / measured - 1``; inf or NaN for a class
        without measured time).

    Raises
    ------
    ValueError
        When neither ``device`` nor ``calibration.spec`` is set, or the device has no ``dtype`` peak.
    """
    device = device or calibration.spec
    if device is None:
        raise ValueError("no device: pass device=")
    peak, bw = device_peak(device, dtype), device.memory_bandwidth
    layers = []  # (count, per-layer costs): dense layers, then MoE layers as prefill_time costs them
    for moe, count in ((False, config.dense_layers), (True, config.moe_layers)):
        if count:
            e, k = config.experts, config.top_k
            read = e * (1 - (1 - k / e) ** (batch * seq)) if moe else None  # distinct experts the tokens visit
            layers.append((count, layer_forward(config, moe, batch, seq, seq, causal=causal, experts_read=read)))
    res = calibration.residuals
    res = res.assign(model_class=res["class"].map(MODEL_CLASS))
    tr = res.dropna(subset=["model_class"]).groupby("model_class")[["flop", "bytes", "measured_ns"]].sum()
    cal_eff = dict(efficiency if efficiency is not None else calibration.efficiency)
    rows = {}
    for cls in ("matmul", "attention", "elementwise"):
        fl = sum(count * c[cls][0] for count, c in layers)
        by = sum(count * c[cls][1] for count, c in layers)
        times = []
        for eff in (EFFICIENCY, {**EFFICIENCY, **cal_eff}):
            ce = 1.0 if cls == "elementwise" else eff[cls]
            times.append(sum(count * float(roofline_time(*c[cls], peak, bw, ce, eff["memory"])) * 1e9
                             for count, c in layers))
        t = tr.loc[cls] if cls in tr.index else pd.Series({"flop": 0.0, "bytes": 0.0, "measured_ns": 0.0})
        rows[cls] = {"trace_flop": t["flop"], "model_flop": fl, "trace_bytes": t["bytes"], "model_bytes": by,
                     "measured_ns": t["measured_ns"], "default_ns": times[0], "calibrated_ns": times[1]}  # fmt: skip
    out = pd.DataFrame.from_dict(rows, orient="index")
    out.loc["total"] = out.sum()
    with np.errstate(divide="ignore", invalid="ignore"):
        out["default_error"] = out["default_ns"] / out["measured_ns"] - 1
        out["calibrated_error"] = out["calibrated_ns"] / out["measured_ns"] - 1
    return out
