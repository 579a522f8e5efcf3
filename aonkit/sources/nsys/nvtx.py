"""NVTX ranges and marks, and process/thread names, from an nsys export.

* Push/pop (``eventType`` 59) and start/end (60) ranges become ``X`` events of
  category ``user_annotation`` on the thread that opened them; marks (34)
  become ``i`` events. The label is the inline ``text``, else the registered
  string ``textId``. ``args`` carry the domain name (``"default"`` for domain
  0; others named by their ``DomainCreate`` row), the range kind, category,
  colour and, for start/end ranges, the thread that closed them.
* A range whose ``end`` is NULL (still open when capture stopped) keeps its
  start and gets ``dur_ns = -1``; the reader warns with the count.
* Process and thread names become Kineto-style ``M`` events
  (``process_name`` / ``thread_name`` with ``args.name``): processes from
  ``PROCESSES`` (only the profiled ones: the table lists the whole host),
  threads from ``ThreadNames``, overridden by ``nvtxNameOsThread`` rows.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ... import schema
from .db import decode_texts
from .jsontext import JsonRows
from .parts import Context, Part, decode_pid, decode_tid, take
from .torch import torch_ops

MARK, PUSH_POP, START_END, THREAD_NAME, DOMAIN_CREATE = 34, 59, 60, 39, 75
_KIND = {MARK: "mark", PUSH_POP: "push/pop", START_END: "start/end"}


def _texts(ctx: Context, table: pa.Table) -> tuple[np.ndarray, list[str]]:
    """Codes and dictionary of each row's label: inline text, else the StringIds entry of textId."""
    enc = pc.dictionary_encode(table.column("text")).combine_chunks()
    inline = decode_texts(enc.dictionary)
    codes = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    null = table.column("text_null").to_numpy().astype(bool)
    text_id = table.column("textId").fill_null(-1).to_numpy().astype(np.int64)
    codes = np.where(null, len(inline) + ctx.string_codes(text_id), codes)
    return codes, inline + ctx.string_values


def _nvtx_table(ctx: Context, where: str) -> pa.Table:
    have = ctx.db.columns("NVTX_EVENTS")
    cols = ["start", "end", "eventType", "rangeId", "category", "color", "globalTid", "endGlobalTid", "textId",
            "domainId"]
    exprs = [f'"{c}"' if c in have else f'NULL AS "{c}"' for c in cols]
    text = "COALESCE(text, '') AS text, text IS NULL AS text_null" if "text" in have else \
        "'' AS text, 1 AS text_null"
    return ctx.db.arrow(f'SELECT {", ".join(exprs)}, "end" IS NULL AS end_null, {text} '
                        f'FROM NVTX_EVENTS {where} ORDER BY "start"')


def _ints(t: pa.Table, name: str, fill: int = -1) -> np.ndarray:
    col = t.column(name)
    if pa.types.is_null(col.type):
        return np.full(t.num_rows, fill, np.int64)
    return col.fill_null(fill).to_numpy().astype(np.int64)


def _domains(ctx: Context) -> dict[int, str]:
    t = _nvtx_table(ctx, f"WHERE eventType = {DOMAIN_CREATE}")
    codes, names = _texts(ctx, t)
    out = {0: "default"}
    for dom, code in zip(_ints(t, "domainId").tolist(), codes.tolist()):
        out[dom] = names[code]
    return out


def read_nvtx(ctx: Context) -> tuple[list[Part], int]:
    """NVTX ranges and marks as parts, and the number of ranges that never ended."""
    if not ctx.db.has("NVTX_EVENTS", "start", "eventType"):
        return [], 0
    domains = _domains(ctx)
    parts: list[Part] = []
    open_ranges = 0
    for ph, types in (("X", (PUSH_POP, START_END)), ("i", (MARK,))):
        t = _nvtx_table(ctx, f"WHERE eventType IN ({', '.join(map(str, types))})")
        if t.num_rows == 0:
            continue
        c = {name: _ints(t, name) for name in ("start", "end", "eventType", "rangeId", "category", "color",
                                                 "globalTid", "endGlobalTid", "domainId")}
        end_null = t.column("end_null").to_numpy().astype(bool)
        codes, names = _texts(ctx, t)
        dur = np.where(end_null, -1, np.maximum(c["end"] - c["start"], 0)) if ph == "X" else np.full(len(codes), -1)
        if ph == "X":
            open_ranges += int(end_null.sum())
        dom_keys = sorted(set(np.unique(c["domainId"]).tolist()))
        dom_codes = np.searchsorted(np.asarray(dom_keys, np.int64), c["domainId"])
        dom_names = [domains.get(d, f"domain {d}") for d in dom_keys]
        kind_codes, kind_names = np.unique(c["eventType"], return_inverse=True)
        is_op, op_names, op_code, op_args = torch_ops(names) if ph == "X" else (np.zeros(len(names), bool), [],
                                                                               None, [""] * len(names))
        text_codes = codes

        def args(sel: np.ndarray | None = None, c=c, dom_codes=dom_codes, dom_names=dom_names,  # noqa: ANN001
                 kind_codes=kind_codes, kind_names=kind_names, text_codes=text_codes, names=names,
                 op_args=op_args) -> JsonRows:
            c = take({**c, "_dom": dom_codes, "_kind": kind_names, "_text": text_codes}, sel)
            dom_codes, text_codes = c["_dom"], c["_text"]
            rows = JsonRows(len(c["start"])).strings("domain", dom_codes, dom_names)
            rows.strings("nvtx", c["_kind"].astype(np.int64), [_KIND[int(k)] for k in kind_codes])
            rows.ints("range id", c["rangeId"]).ints("category", c["category"]).ints("color", c["color"])
            end_tid = np.where(c["endGlobalTid"] > 0, decode_tid(c["endGlobalTid"]), -1)
            rows.ints("end tid", end_tid)
            if any(op_args):
                rows.strings("text", text_codes, names).members(text_codes, op_args)
            return rows

        n = len(codes)
        row_is_op = is_op[codes]
        if row_is_op.any():  # emit_nvtx operator ranges: cpu_op named after the operator
            codes = np.where(row_is_op, len(names) + op_code[codes], codes)
            names = names + op_names
        parts.append(Part(
            ph=ph, cat=["user_annotation", "cpu_op"], cat_codes=row_is_op.astype(np.int64),
            names=codes, name_dict=names,
            pid=decode_pid(c["globalTid"]), tid=decode_tid(c["globalTid"]),
            ts_ns=c["start"] + ctx.t0_ns, dur_ns=dur, correlation=np.full(n, -1, np.int64),
            process_key=c["globalTid"] >> 24,
            stream=np.full(n, -1, np.int64), device=np.full(n, -1, np.int64), args=args,
        ))  # fmt: skip
    return parts, open_ranges


def _name_part(pid: list[int], tid: list[int], label: str, names: list[str]) -> Part:
    n = len(pid)
    codes = np.arange(n, dtype=np.int64)
    return Part(
        ph="M", cat="", names=np.zeros(n, np.int64), name_dict=[label],
        pid=np.asarray(pid, np.int64), tid=np.asarray(tid, np.int64),
        ts_ns=np.full(n, schema.TS_MISSING, np.int64), dur_ns=np.full(n, -1, np.int64),
        correlation=np.full(n, -1, np.int64), stream=np.full(n, -1, np.int64), device=np.full(n, -1, np.int64),
        args=lambda sel=None: JsonRows(n if sel is None else len(sel)).strings(
            "name", codes if sel is None else codes[sel], names),
    )  # fmt: skip


def read_names(ctx: Context, process_keys: np.ndarray, gpu_lanes: list[tuple[int, int]],
               gpu_names: dict[int, str]) -> list[Part]:
    """``M`` events naming the profiled processes (``process_keys``), their threads, the GPUs and streams used."""
    db, keys = ctx.db, set(process_keys.tolist())
    parts: list[Part] = []
    if db.has("PROCESSES", "globalPid", "pid", "name") and keys:
        rows = [(int(g), int(p), str(n)) for g, p, n in db.query_rows("SELECT globalPid, pid, name FROM PROCESSES")
                if g is not None and (int(g) >> 24) in keys]
        if rows:
            parts.append(_name_part([p for _, p, _ in rows], [0] * len(rows), "process_name",
                                    [n for _, _, n in rows]))
    threads: dict[int, str] = {}
    if db.has("ThreadNames", "nameId", "globalTid"):
        t = db.int_columns("SELECT globalTid, nameId FROM ThreadNames")
        for g, code in zip(t["globalTid"].tolist(), ctx.string_codes(t["nameId"]).tolist()):
            if (g >> 24) in keys:
                threads[g] = ctx.string_values[code]
    if db.has("NVTX_EVENTS", "eventType"):
        t = _nvtx_table(ctx, f"WHERE eventType = {THREAD_NAME}")
        codes, names = _texts(ctx, t)
        for g, code in zip(_ints(t, "globalTid").tolist(), codes.tolist()):
            threads[g] = names[code]
    if threads:
        g = np.fromiter(threads, np.int64, len(threads))
        parts.append(_name_part(decode_pid(g).tolist(), decode_tid(g).tolist(), "thread_name", list(threads.values())))
    if gpu_lanes:
        devices = sorted({d for d, _ in gpu_lanes})
        parts.append(_name_part(devices, [0] * len(devices), "process_name",
                                [f"GPU {d}: {gpu_names.get(d, 'unknown')}" for d in devices]))
        parts.append(_name_part([d for d, _ in gpu_lanes], [s for _, s in gpu_lanes], "thread_name",
                                [f"stream {s}" for _, s in gpu_lanes]))
    return parts
