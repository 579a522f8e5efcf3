"""Repeat a real Kineto trace back to back in time, to benchmark on a real event mix at a larger size.

Usage: ``python bench/tile_trace.py IN.json[.gz] OUT.json --copies K``

Copy k is the original shifted by k spans (plus 1 ms) in time, with its
correlation, External id, flow and ``Ev Idx`` ids moved past the previous
copy's, and ``ProfilerStep#N`` renumbered so that steps stay distinct. ``M``
metadata events and the trace-level keys are written once. The result is as
valid for HTA as the input (the same keys and event kinds), only longer.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
from pathlib import Path

_STEP = re.compile(r"^ProfilerStep#(\d+)$")
_ID_ARGS = ("correlation", "External id", "Ev Idx")


def _read(path: Path) -> dict:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return json.load(f)


def tile(doc: dict, copies: int) -> dict:
    """The trace document with its events repeated ``copies`` times (see module doc)."""
    events = [e for e in doc["traceEvents"] if isinstance(e, dict)]
    timed = [e for e in events if e.get("ph") != "M" and isinstance(e.get("ts"), (int, float))]
    lo = min(e["ts"] for e in timed)
    hi = max(e["ts"] + (e.get("dur") or 0) for e in timed)
    shift_ts = (hi - lo) + 1000
    top = {k: 1 + max((e.get("args", {}).get(k, 0) for e in events if isinstance(e.get("args"), dict)), default=0)
           for k in _ID_ARGS}  # fmt: skip
    top_flow = 1 + max((e["id"] for e in events if isinstance(e.get("id"), int)), default=0)
    steps = [int(m.group(1)) for e in events if (m := _STEP.match(str(e.get("name", ""))))]
    step_span = (max(steps) - min(steps) + 1) if steps else 0
    out = [e for e in events if e.get("ph") == "M"]
    for k in range(copies):
        for e in timed:
            c = dict(e)
            c["ts"] = e["ts"] + k * shift_ts
            if isinstance(e.get("id"), int):
                c["id"] = e["id"] + k * top_flow
            if isinstance(e.get("args"), dict):
                args = dict(e["args"])
                for key in _ID_ARGS:
                    if isinstance(args.get(key), int) and args[key] >= 0:
                        args[key] += k * top[key]
                c["args"] = args
            m = _STEP.match(str(e.get("name", "")))
            if m:
                c["name"] = f"ProfilerStep#{int(m.group(1)) + k * step_span}"
            out.append(c)
    return {**{k: v for k, v in doc.items() if k != "traceEvents"}, "traceEvents": out}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("src", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--copies", type=int, default=5)
    a = p.parse_args()
    doc = tile(_read(a.src), a.copies)
    a.out.write_text(json.dumps(doc))
    print(f"{a.out}: {len(doc['traceEvents']):,} events")


if __name__ == "__main__":
    main()
