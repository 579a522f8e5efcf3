"""The forward passes of a traced language model: when each ran, for how long, and on how many tokens.

An inference engine runs one forward pass of its model per step: a prefill of new prompts, or a decode of one
token for every running sequence. :func:`forward_passes` finds them in a trace recorded with
``record_shapes=True`` and reads each one's tokens off its op shapes; :func:`aonkit.model.fit_step_time` fits
the serving model's step times to them.

How a pass is found:

* **Start**: each call of the token embedding: the ``aten::embedding`` called with the highest-rank index tensor
  (token ids ``[batch, tokens]`` before positions ``[tokens]``), of those the table with the most rows (the
  vocabulary), unless ``vocab=`` names the table's rows.
* **Tokens**: its index tensor ``[B, S]`` gives ``batch`` B and ``new_tokens`` B*S. A 1-D index ``[T]`` (engines
  that flatten a step's tokens, as vLLM does) gives T tokens and no batch (-1), and the kind ``"unknown"``.
* **Context**: the first ``aten::scaled_dot_product_attention`` of the pass, key ``[B, heads, L, head_dim]``:
  ``context_tokens`` = B*L, the tokens attended to (cached plus new, summed over the batch; padding included).
  ``layers`` counts the pass's SDPA calls. Without SDPA (an engine's own attention kernels) both are -1.
* **Kind**: ``"prefill"`` when S > 1, ``"decode"`` when S = 1 (S = 0: ``"unknown"``).
* **Span**: when a ``user_annotation`` on the pass's thread encloses its start and no other pass's (a
  ``record_function`` around each engine step, or one ``ProfilerStep`` per step), that annotation. Otherwise from
  the embedding's start to the end of the last CPU op that starts on its thread before the next pass: the
  sampling after the forward is in, and so is whatever the program did between two passes (preparing the next
  request's input). The pass then ends when the last GPU work launched in it ends, if later.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..trace import Trace
from .correlation import gpu_launches

COLUMNS = ("pass_id", "ts_ns", "dur_ns", "interval_ns", "kind", "batch", "new_tokens", "context_tokens", "layers",
           "kernel_ns", "annotated")  # fmt: skip
KINDS = ("prefill", "decode", "unknown")


def forward_passes(trace: Trace, vocab: int | None = None) -> pd.DataFrame:
    """One row per forward pass of the traced model (an inference engine's steps), in time order.

    Parameters
    ----------
    trace : Trace
        A torch.profiler trace recorded with ``record_shapes=True`` (without shapes no pass can be found).
    vocab : int, optional
        Rows of the token embedding table, when the module doc's rule picks another table.

    Returns
    -------
    pandas.DataFrame
        ``pass_id`` (0, 1, ...), ``ts_ns`` (its start: its annotation's, else the token embedding's),
        ``dur_ns`` (the pass's span, as the module doc says), ``interval_ns`` (to the next pass's start; -1 for
        the last), ``kind`` (``"prefill"``, ``"decode"`` or ``"unknown"``), ``batch`` (sequences; -1 unknown),
        ``new_tokens`` (tokens fed, all sequences), ``context_tokens`` (tokens attended to, all sequences; -1
        unknown), ``layers`` (SDPA calls), ``kernel_ns`` (summed durations of the GPU work launched in the pass;
        0 without GPU events) and ``annotated`` (the span is an annotation's). No rows when the trace has no
        embedding with shapes.

    Raises
    ------
    ValueError
        When ``vocab`` is given and no embedding table has that many rows.
    """
    ev = trace.events
    name = ev["name"].to_numpy()
    rows = np.flatnonzero((name == "aten::embedding") & (ev["ph"] == "X").to_numpy())
    dims = trace.arg_values("Input Dims", rows) if len(rows) else []
    calls = [(int(r), d[0][0], d[1]) for r, d in zip(rows, dims)
             if isinstance(d, list) and len(d) >= 2 and _sizes(d[0]) and len(d[0]) == 2
             and _sizes(d[1]) and 1 <= len(d[1]) <= 2]  # fmt: skip
    if not calls:
        return _empty()
    table_rows = np.array([c[1] for c in calls], dtype=np.int64)
    rank = np.array([len(c[2]) for c in calls], dtype=np.int64)
    if vocab is None:
        best_rank = rank.max()
        vocab = int(table_rows[rank == best_rank].max())
    elif not (table_rows == vocab).any():
        raise ValueError(f"{trace.source or 'trace'}: no aten::embedding has a table of {vocab} rows "
                         f"(tables: {sorted(set(table_rows.tolist()))})")  # fmt: skip
    best_rank = rank[table_rows == vocab].max()
    chosen = [c for c, t, k in zip(calls, table_rows, rank) if t == vocab and k == best_rank]
    start_rows = np.array([c[0] for c in chosen], dtype=np.int64)
    ts = ev["ts_ns"].to_numpy()
    order = np.argsort(ts[start_rows], kind="stable")
    start_rows = start_rows[order]
    index = [chosen[i][2] for i in order]
    starts = ts[start_rows]
    n = len(start_rows)
    batch = np.array([int(x[0]) if len(x) == 2 else -1 for x in index], dtype=np.int64)
    new = np.array([int(np.prod(x)) for x in index], dtype=np.int64)
    per_seq = np.array([int(x[1]) if len(x) == 2 else -1 for x in index], dtype=np.int64)
    kind = np.where(per_seq > 1, "prefill", np.where(per_seq == 1, "decode", "unknown"))
    starts, end, annotated = _annotated(trace, start_rows, starts)
    context, layers = _attention(trace, starts)
    context = np.where((batch >= 0) & (context >= 0), np.maximum(batch, 1) * context, -1)
    end = _cpu_ends(trace, start_rows, starts, end, annotated)
    kernel_ns, gpu_end = _gpu_work(trace, starts, end)
    end = np.maximum(end, gpu_end)
    interval = np.full(n, -1, dtype=np.int64)
    interval[:-1] = np.diff(starts)
    return pd.DataFrame({
        "pass_id": np.arange(n, dtype=np.int64), "ts_ns": starts, "dur_ns": end - starts, "interval_ns": interval,
        "kind": pd.Categorical(kind, categories=KINDS), "batch": batch, "new_tokens": new,
        "context_tokens": context, "layers": layers, "kernel_ns": kernel_ns, "annotated": annotated,
    })  # fmt: skip


def _sizes(x: object) -> bool:
    """A recorded shape: a list of sizes (ints, at least 0)."""
    return isinstance(x, list) and all(type(v) is int and v >= 0 for v in x)


def _empty() -> pd.DataFrame:
    out = pd.DataFrame({c: np.zeros(0, dtype=np.int64) for c in COLUMNS})
    out["kind"] = pd.Categorical([], categories=KINDS)
    return out.astype({"annotated": bool})


def _attention(trace: Trace, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Key length per sequence of each pass's first SDPA call (-1: none), and the pass's SDPA calls."""
    ev = trace.events
    n = len(starts)
    rows = np.flatnonzero((ev["name"] == "aten::scaled_dot_product_attention").to_numpy())
    context, layers = np.full(n, -1, dtype=np.int64), np.zeros(n, dtype=np.int64)
    if not len(rows):
        return context, layers
    rows = rows[np.argsort(ev["ts_ns"].to_numpy()[rows], kind="stable")]
    which = np.searchsorted(starts, ev["ts_ns"].to_numpy()[rows], side="right") - 1
    keep = which >= 0
    rows, which = rows[keep], which[keep]
    np.add.at(layers, which, 1)
    first = np.unique(which, return_index=True)[1]  # each pass's earliest call
    for i, d in zip(which[first], trace.arg_values("Input Dims", rows[first])):
        if isinstance(d, list) and len(d) >= 2 and _sizes(d[1]) and len(d[1]) == 4:
            context[i] = d[1][2]
    return context, layers


def _annotated(trace: Trace, start_rows: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, ...]:
    """Each pass's start and end (its annotation's where one holds its start and no other's), and which have one."""
    ev = trace.events
    ts, dur = ev["ts_ns"].to_numpy(), np.maximum(ev["dur_ns"].to_numpy(), 0)
    pid, tid = ev["pid"].to_numpy(), ev["tid"].to_numpy()
    starts, end = starts.copy(), ts[start_rows] + dur[start_rows]
    annotated = np.zeros(len(starts), dtype=bool)
    ann = np.flatnonzero((ev["ph"] == "X").to_numpy() & (ev["cat"] == "user_annotation").to_numpy())
    lo = np.searchsorted(starts, ts[ann], side="left")
    hi = np.searchsorted(starts, ts[ann] + dur[ann], side="right")
    one, holder = ann[hi - lo == 1], lo[hi - lo == 1]
    same = (pid[one] == pid[start_rows[holder]]) & (tid[one] == tid[start_rows[holder]])
    one, holder = one[same], holder[same]
    by_length = np.lexsort((one, -dur[one]))  # longest first: the innermost (shortest) is written last and wins
    for r, i in zip(one[by_length].tolist(), holder[by_length].tolist()):
        starts[i], end[i], annotated[i] = ts[r], ts[r] + dur[r], True
    return starts, end, annotated


def _cpu_ends(trace: Trace, start_rows: np.ndarray, starts: np.ndarray, end: np.ndarray,
              annotated: np.ndarray) -> np.ndarray:  # fmt: skip
    """End of each pass not annotated: its thread's last CPU op that starts before the next pass."""
    ev = trace.events
    ts, dur = ev["ts_ns"].to_numpy(), np.maximum(ev["dur_ns"].to_numpy(), 0)
    pid, tid = ev["pid"].to_numpy(), ev["tid"].to_numpy()
    nxt = np.append(starts[1:], np.iinfo(np.int64).max)
    ops = np.flatnonzero((ev["ph"] == "X").to_numpy() & (ev["cat"] == "cpu_op").to_numpy())
    which = np.searchsorted(starts, ts[ops], side="right") - 1
    ok = which >= 0
    ops, which = ops[ok], which[ok]
    # an op that also holds the next pass's start encloses both (a caller's op): not this pass's end
    ok = ((pid[ops] == pid[start_rows[which]]) & (tid[ops] == tid[start_rows[which]]) & ~annotated[which]
          & (ts[ops] + dur[ops] <= nxt[which]))  # fmt: skip
    end = end.copy()
    np.maximum.at(end, which[ok], ts[ops[ok]] + dur[ops[ok]])
    return end


def _gpu_work(trace: Trace, starts: np.ndarray, cpu_end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Summed durations and last end of the GPU events launched in each pass (0 and -1 when none)."""
    n = len(starts)
    kernel_ns, gpu_end = np.zeros(n, dtype=np.int64), np.full(n, -1, dtype=np.int64)
    links = gpu_launches(trace)
    links = links[links["launch_row"] >= 0]
    if not len(links):
        return kernel_ns, gpu_end
    ev = trace.events
    ts, dur = ev["ts_ns"].to_numpy(), np.maximum(ev["dur_ns"].to_numpy(), 0)
    launch = ts[links["launch_row"].to_numpy()]
    g = links["gpu_row"].to_numpy()
    which = np.searchsorted(starts, launch, side="right") - 1
    ok = which >= 0
    ok[ok] = launch[ok] <= cpu_end[which[ok]]
    np.add.at(kernel_ns, which[ok], dur[g[ok]])
    np.maximum.at(gpu_end, which[ok], ts[g[ok]] + dur[g[ok]])
    return kernel_ns, gpu_end
