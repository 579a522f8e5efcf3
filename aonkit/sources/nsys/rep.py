"""``.nsys-rep`` input: export it to SQLite with the ``nsys`` command, then read the export.

An ``.nsys-rep`` report is a binary format only Nsight Systems reads. When
``nsys`` is on PATH, the report is exported next to it as ``<name>.sqlite``
(what ``nsys stats`` does too), or, when that folder is read-only, into the
per-user cache folder (:func:`aonkit._filecheck.user_cache_dir`); an export
not older than the report is reused from either place. Without ``nsys``
the error names the command to run.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from ..._filecheck import user_cache_dir, writable_folder
from ...errors import TraceFormatError
from ...trace import Trace
from .sqlite import read_nsys_sqlite


def export_command(report: Path, output: Path) -> list[str]:
    """The ``nsys export`` command line that writes ``output`` from ``report``."""
    return ["nsys", "export", "--type", "sqlite", "--force-overwrite", "true", "--output", str(output), str(report)]


def export_is_current(export: Path, report: Path) -> bool:
    """True when ``export`` exists and is not older than ``report``: it stands for the report."""
    try:
        return export.stat().st_mtime >= report.stat().st_mtime
    except OSError:
        return False


def _target(report: Path) -> Path:
    """Where the export goes: beside the report, else (a read-only folder) the per-user cache folder, kept for reuse."""
    beside = report.with_suffix(".sqlite")
    if writable_folder(report.parent):
        return beside
    return user_cache_dir(report.parent) / beside.name


def read_nsys_rep(path: str | Path, timeout_s: float = 3600.0) -> Trace:
    """Export ``path`` (an ``.nsys-rep``) with ``nsys`` and read the SQLite export.

    Raises
    ------
    TraceFormatError
        When ``nsys`` is not on PATH (the message gives the command to run) or
        the export fails.
    """
    report = Path(path)
    beside = report.with_suffix(".sqlite")
    target = _target(report)
    for done_before in dict.fromkeys((beside, target)):
        if export_is_current(done_before, report):
            return read_nsys_sqlite(done_before)
    exe = shutil.which("nsys")
    if exe is None:
        cmd = " ".join(export_command(report, beside))
        raise TraceFormatError(f"an .nsys-rep report needs Nsight Systems to export it, and `nsys` is not on PATH; "
                               f"run `{cmd}` where nsys is installed, then load the .sqlite file", path=str(report))
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    argv = [exe, *export_command(report, target)[1:]]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as exc:
        raise TraceFormatError(f"`nsys export` did not finish in {timeout_s:.0f} s", path=str(report)) from exc
    if done.returncode != 0 or not target.exists():
        tail = (done.stderr or done.stdout or "").strip().splitlines()[-3:]
        raise TraceFormatError(f"`nsys export` failed (exit {done.returncode}): {' | '.join(tail)}", path=str(report))
    return read_nsys_sqlite(target)
