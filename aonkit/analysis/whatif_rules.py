"""What-if rules: which dependency-graph nodes a rule matches, and the duration factor of each node.

A rule's match (:func:`rule_mask`) depends on its conditions, not its scale,
so it is kept per graph: a slider that moves a scale re-times with masks
already made (:func:`rule_codes`).
"""

from __future__ import annotations

import re
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .._whatif_parts import PARTS  # noqa: F401 - re-exported: WhatIfPanel and the CLI use it
from ..trace import Trace
from .columns import code_flags
from .depgraph import KIND_GPU, KIND_HUB, KIND_NAMES, DepGraph

KEPT_MASKS = 32
"""Rule masks kept per graph (the least recently used go first)."""
_MASKS: weakref.WeakKeyDictionary[DepGraph, OrderedDict] = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class Rule:
    """Scale the duration of the nodes that match every given condition.

    Attributes
    ----------
    scale : float
        Factor on the duration (0.5: twice as fast; 0: removed).
    kind : {"gpu", "cpu", "gap"}, optional
        GPU events, CPU self time, or untraced host time between top-level events.
    gpu_class : str, optional
        A kernel class of :func:`aonkit.analysis.kernels.kernel_class`
        (``computation``, ``communication``, ``memory``); GPU nodes only.
    name : str, optional
        A regular expression searched in the owning event's name.
    rank : int, optional
        Only this rank's nodes (a job; host gaps, which belong to no event, are not matched).
    tid : int or str, optional
        Only the CPU time and host gaps of this thread (its ``tid``).
    names : tuple of str, optional
        Only events with one of these exact names (:func:`~aonkit.analysis.whatif_hardware.hardware_rules`
        groups kernels so).
    """

    scale: float
    kind: str | None = None
    gpu_class: str | None = None
    name: str | None = None
    rank: int | None = None
    tid: int | str | None = None
    names: tuple[str, ...] | None = None


def _code_values(col: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(codes, values): a categorical column's codes and its categories with a trailing NaN (code -1)."""
    arr = col.array
    return np.asarray(arr.codes, np.int64), np.append(np.asarray(arr.categories, dtype=object), np.nan)


def rule_mask(trace: Trace, g: DepGraph, r: Rule) -> np.ndarray:
    """Which nodes ``r`` matches (every condition it gives), kept per graph and condition (read-only).

    Names and classes are tested once per distinct name (or category and name pair), not per node, and the
    trace's events are read only when the rule needs them (a job's combined trace is then built).
    """
    key = (r.kind, r.gpu_class, r.name, r.rank, None if r.tid is None else str(r.tid),
           None if r.names is None else tuple(r.names))
    held = _MASKS.setdefault(g, OrderedDict())
    if key in held:
        held.move_to_end(key)
        return held[key]
    hit = _match(trace, g, r)
    hit.flags.writeable = False
    held[key] = hit
    while len(held) > KEPT_MASKS:
        held.popitem(last=False)
    return hit


def _match(trace: Trace, g: DepGraph, r: Rule) -> np.ndarray:
    from .kernels import kernel_class

    rows = np.maximum(g.row, 0)
    hit = np.ones(len(g), bool)
    if r.kind is not None:
        hit &= g.kind == KIND_NAMES.index(r.kind)
    if r.gpu_class is not None:
        n_codes, n_vals = _code_values(trace.events["name"])
        c_codes, c_vals = _code_values(trace.events["cat"])
        gpu = np.flatnonzero((g.kind == KIND_GPU) & hit & (g.row >= 0))
        pairs = c_codes[rows[gpu]] * len(n_vals) + n_codes[rows[gpu]]
        uniq, inv = np.unique(pairs, return_inverse=True)
        klass = np.array([kernel_class(str(c_vals[u // len(n_vals)]), str(n_vals[u % len(n_vals)]))
                          for u in uniq], dtype=object)  # fmt: skip
        on = np.zeros(len(g), bool)
        on[gpu] = (klass == r.gpu_class)[inv.reshape(-1)] if len(gpu) else False
        hit &= on
    if r.name is not None:
        pat = re.compile(r.name)
        n_codes, flags = code_flags(trace.events["name"], lambda v: pat.search(str(v)))
        flags[-1] = bool(pat.search("nan"))  # a missing name reads as "nan", a node with no event as ""
        hit &= np.where(g.row >= 0, flags[n_codes[rows]], bool(pat.search("")))
    if r.names is not None:
        wanted = {str(n) for n in r.names}
        n_codes, flags = code_flags(trace.events["name"], lambda v: str(v) in wanted)
        hit &= (g.row >= 0) & flags[np.where(g.row >= 0, n_codes[rows], -1)]
    if r.rank is not None:
        from .whatif_trace import rank_of_nodes

        hit &= rank_of_nodes(trace, g) == r.rank
    if r.tid is not None:  # a CPU thread's own time and gaps: the lane holds (pid code, tid code)
        by_code = code_flags(trace.events["tid"], lambda v: str(v) == str(r.tid))[1]  # a trailing False
        codes = (g.lane & 0xFFFFFFFF).astype(np.int64)
        on = (g.kind != KIND_GPU) & (g.kind != KIND_HUB) & (codes < len(by_code) - 1)
        hit &= on & by_code[np.where(on, codes, -1)]
    return hit


def as_rules(rules: Sequence[Rule | dict]) -> list[Rule]:
    """``rules`` as :class:`Rule` objects."""
    return [r if isinstance(r, Rule) else Rule(**r) for r in rules]


def factors(trace: Trace, g: DepGraph, rules: Sequence[Rule | dict]) -> np.ndarray:
    """Each node's duration factor: the product, in rule order, of the scales of the rules that match it."""
    factor = np.ones(len(g), np.float64)
    for r in as_rules(rules):
        np.multiply(factor, float(r.scale), out=factor, where=rule_mask(trace, g, r))
    return factor


def rule_codes(trace: Trace, g: DepGraph, rules: Sequence[Rule | dict]) -> tuple[np.ndarray, np.ndarray] | None:
    """Per node a code, the set of rules it matches (bit i: rule i), and per code its factor; None past 16 rules.

    ``factor[code[v]]`` equals :func:`factors`'s value for ``v`` bit for bit (the same products in the same
    order). With one rule the code is its cached mask, viewed: a slider's re-time builds no per-node array.
    """
    rules = as_rules(rules)
    if len(rules) > 16:
        return None
    masks = [rule_mask(trace, g, r) for r in rules]
    if len(rules) == 1:
        code = masks[0].view(np.uint8)
    else:
        code = np.zeros(len(g), np.uint8 if len(rules) <= 8 else np.uint16)
        for i, m in enumerate(masks):
            np.bitwise_or(code, code.dtype.type(1 << i), out=code, where=m)
    table = np.ones(1 << len(rules), np.float64)
    for c in range(len(table)):
        f = 1.0
        for i, r in enumerate(rules):
            if c >> i & 1:
                f *= float(r.scale)
        table[c] = f
    return code, table
