"""What the cache's integrity checks cost: checked Parquet load against the JSON load and an unchecked read.

Usage: ``PYTHONPATH=. python bench/cache_integrity.py [--events 1000000] [--repeat 5]``

For a synthetic trace (``../shared/tools/gen_trace.py``) and three real ones it
times, best of ``--repeat`` in one warm process: ``aonkit.load`` of the JSON
(gz), ``trace.save`` of the cache (atomic, fsynced, under the folder lock),
``aonkit.load`` of the cache (size + CRC-32 of data and sidecar, code range
checks), and the bare ``pyarrow.parquet.read_table`` of the same columns that
a cache without checks would do. It prints the ratios.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
REAL = ["hta/mtia_trace_single_rank/mtia_rank_0.json.gz", "hta/df_index_resolver/df_index_resolver.json.gz",
        "hta/trace_diff/control/control.json.gz"]


def best(fn, repeat: int) -> float:
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return min(out)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    import pyarrow.parquet as pq

    import aonkit
    import aonkit.sources._io
    from aonkit import schema
    from aonkit._filecheck import crc32_file
    from aonkit.cache import cache_path_for

    with tempfile.TemporaryDirectory() as tmp:
        inputs = []
        gen = SHARED / "tools" / "gen_trace.py"
        if gen.exists():
            syn = Path(tmp) / "synthetic.json"
            subprocess.run([sys.executable, str(gen), "--events", str(a.events), str(syn)], check=True,
                           capture_output=True)
            inputs.append((f"synthetic {a.events:,}", syn))
        inputs += [(Path(r).name.split(".")[0], SHARED / "traces" / r) for r in REAL if (SHARED / "traces" / r).exists()]
        print("| input | JSON MB | cache MB | JSON load s | save cache s | checked cache load s | bare read_table s | "
              "CRC-32 s | cache vs JSON | CRC share of the cache load |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        cols = list(schema.CATEGORY_COLUMNS) + list(schema.INT_COLUMNS)
        for label, path in inputs:
            aonkit.load(path)
            t_json = best(lambda p=path: aonkit.load(p), a.repeat)
            trace = aonkit.load(path)
            cache = cache_path_for(Path(tmp) / path.name)
            t_save = best(lambda t=trace, c=cache: t.save(c), max(1, a.repeat // 2))
            aonkit.load(cache)
            t_cache = best(lambda c=cache: aonkit.load(c), a.repeat)
            t_bare = best(lambda c=cache: pq.read_table(c, columns=cols), a.repeat)
            t_crc = best(lambda c=cache: crc32_file(c), a.repeat)
            mb = len(aonkit.sources._io.read_buffer(path)[0]) / 1e6
            cmb = sum(p.stat().st_size for p in Path(tmp).glob(cache.name.removesuffix(".parquet") + "*")) / 1e6
            print(f"| {label} | {mb:.1f} | {cmb:.1f} | {t_json:.3f} | {t_save:.3f} | {t_cache:.3f} | {t_bare:.3f} | "
                  f"{t_crc:.4f} | {t_json / t_cache:.1f}x faster | {t_crc / t_cache:.0%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
