"""Where the daemon's Parquet files are, and listing them, without pyarrow (:mod:`.store` writes and reads them).

``aonkit daemon status`` lists them on every call (a timer's ``--prometheus`` every minute): importing pyarrow
took 140 ms of it on the dev VM.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

PART = re.compile(r"^part-(\d+)-(\d+)\.parquet$")
"""A complete file's name: ``part-<start_ns>-<pid>.parquet``."""


def host_dir(root: Path, host: str) -> Path:
    """``<root>/host=<host>``."""
    return root / f"host={host}"


def list_files(hdir: Path) -> list[tuple[int, int, Path, int]]:
    """The files of one host directory, oldest first: (start_ns, pid, path, bytes)."""
    out = []
    for dirpath, _, files in os.walk(hdir):
        for name in files:
            if m := PART.match(name):
                path = Path(dirpath) / name
                try:
                    out.append((int(m[1]), int(m[2]), path, path.stat().st_size))
                except FileNotFoundError:  # pruned meanwhile
                    continue
    return sorted(out)
