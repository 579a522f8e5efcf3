"""The per-user registry of processes that opted in to on-demand traces: ``<runtime dir>/procs/<pid>.json``.

Each entry (0600) names the process's control socket (``<pid>.sock``, a Unix-domain socket, 0600, in the same
0700 directory), its job id and rank when known, its command line and its start time (``/proc/<pid>/stat``),
so an entry left by a process that died, or whose pid was reused, is recognised and removed.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .paths import PROCS, LiveError, NotOwnerError, boot_id
from .status import read_json

JOB_ID_VARS = ("AONKIT_JOB_ID", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID")
RANK_VARS = ("AONKIT_RANK", "RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK")
WORLD_VARS = ("WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE")


def from_env(names: tuple[str, ...]) -> str | None:
    """The first of ``names`` set in the environment."""
    return next((os.environ[n] for n in names if os.environ.get(n)), None)


def int_or_none(text: str | None) -> int | None:
    """``int(text)``, or None for None or a non-number."""
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def proc_start(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (``/proc``), or None where there is no ``/proc``."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(text[text.rindex(")") + 2 :].split()[19])


def alive(entry: dict[str, Any]) -> bool:
    """True when the entry's process still runs (and is the same process, not a reused pid).

    An entry written before the node's last boot (its ``boot_id`` another) is dead, whatever runs under its pid
    now: a runtime directory that outlives a reboot (``AONKIT_RUNTIME_DIR`` on disk) may hold one, and a job
    started at boot can get the same pid and start time every boot.
    """
    here = boot_id()
    if entry.get("boot_id") and here and entry["boot_id"] != here:
        return False
    pid = int(entry["pid"])
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    start = proc_start(pid)
    return start is None or entry.get("proc_start") in (None, start)


def registered(procs: Path) -> list[dict[str, Any]]:
    """Entries of live processes, by pid; entries of dead ones are removed."""
    if not procs.is_dir():
        return []
    out = []
    for path in sorted(procs.glob("*.json")):
        try:
            entry = read_json(path, "registry entry")
        except NotOwnerError:
            continue
        if entry is None or "pid" not in entry:
            continue
        if alive(entry):
            out.append(entry)
        else:
            path.unlink(missing_ok=True)
            path.with_suffix(".sock").unlink(missing_ok=True)
    return sorted(out, key=lambda e: e["pid"])


def lookup(rdir: Path, pid: int) -> dict[str, Any]:
    """The entry of ``pid``; :class:`LiveError` when there is no such process or it did not opt in."""
    entry = next((e for e in registered(rdir / PROCS) if e["pid"] == pid), None)
    if entry is not None:
        return entry
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        raise LiveError(f"no process {pid} on this node") from None
    except PermissionError:
        pass
    raise LiveError(f"process {pid} has not opted in to on-demand traces: call aonkit.live.serve() in it, or start "
                    "it with AONKIT_SERVE=1 (same user, same AONKIT_RUNTIME_DIR)")


def job_members(rdir: Path, entry: dict[str, Any]) -> list[dict[str, Any]]:
    """Every opted-in process of ``entry``'s job on this node, by rank; :class:`LiveError` if ranks are unclear."""
    job = entry.get("job_id")
    if job is None:
        raise LiveError(f"process {entry['pid']} has no job id (set AONKIT_JOB_ID, or run it under torchrun or "
                        "Slurm), so --all-ranks cannot tell which processes are its job")
    members = [e for e in registered(rdir / PROCS) if e.get("job_id") == job]
    ranks = [e.get("rank") for e in members]
    if None in ranks or len(set(ranks)) != len(ranks):
        pids = {e["pid"]: e.get("rank") for e in members}
        raise LiveError(f"the processes of job {job} do not each have their own rank (pid: rank {pids}); "
                        "set RANK or AONKIT_RANK in each")
    return sorted(members, key=lambda e: e["rank"])
