"""PyTorch operator ranges in NVTX (``torch.autograd.profiler.emit_nvtx``) as ``cpu_op`` events.

With ``emit_nvtx(record_shapes=True)`` PyTorch pushes one NVTX range per
operator whose text reads ``aten::addmm, seq = 12, op_id = 3, sizes = [[64],
[64, 128], [128, 64]], input_op_ids = [...]``. Such ranges become ``cpu_op``
events named ``aten::addmm``, with ``args`` ``Input Dims`` (the sizes),
``Sequence number`` and ``op_id`` as Kineto writes them, and the original
text under ``nvtx``. Then op-level analyses (GPU time per op, FLOPs from
shapes) work on nsys input. NVTX does not carry dtypes, so byte counts that
need them stay unknown.
"""

from __future__ import annotations

import json
import re

import numpy as np

TORCH_NAMESPACES = frozenset({"aten", "prim", "c10d", "_c10d_functional", "quantized", "torchvision", "inductor"})
"""Operator namespaces taken as PyTorch ops even without emit_nvtx's ``seq``/``op_id``/``sizes`` suffix."""

_OP = re.compile(
    r"^(?P<op>(?P<ns>[a-z_][a-z0-9_]*)::[\w.]+)"
    r"(?:, seq = (?P<seq>-?\d+))?"
    r"(?:, op_id = (?P<op_id>\d+))?"
    r"(?:, sizes = (?P<sizes>\[.*?\]))?"
    r"(?:, input_op_ids = \[.*\])?$"
)


def parse_op(text: str) -> tuple[str, str] | None:
    """(op name, JSON text of its Kineto-style args) when ``text`` is an ``emit_nvtx`` op label, else None."""
    m = _OP.match(text)
    if m is None or (m["ns"] not in TORCH_NAMESPACES and m["seq"] is None and m["op_id"] is None
                     and m["sizes"] is None):
        return None
    args: dict[str, object] = {}
    if m["sizes"] is not None:
        try:
            dims = json.loads(m["sizes"])
        except ValueError:
            dims = None
        if isinstance(dims, list):
            args["Input Dims"] = dims
    if m["seq"] is not None:
        args["Sequence number"] = int(m["seq"])
    if m["op_id"] is not None:
        args["op_id"] = int(m["op_id"])
    return m["op"], json.dumps(args)[1:-1]


def torch_ops(labels: list[str]) -> tuple[np.ndarray, list[str], np.ndarray, list[str]]:
    """Per label: op flag, the op names, each label's op-name code, and its args members (JSON, no braces)."""
    flags = np.zeros(len(labels), bool)
    op_code = np.full(len(labels), -1, np.int64)
    members = [""] * len(labels)
    ops: dict[str, int] = {}
    for i, text in enumerate(labels):
        if "::" not in text:
            continue
        parsed = parse_op(text)
        if parsed is None:
            continue
        flags[i] = True
        op_code[i] = ops.setdefault(parsed[0], len(ops))
        members[i] = parsed[1]
    return flags, list(ops), op_code, members
