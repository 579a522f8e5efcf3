"""Where the daemon keeps its files, and the owner-only rules every one of them follows.

* Runtime directory (ring, lock, status, the registry of opted-in processes): ``$AONKIT_RUNTIME_DIR``, else
  ``/run/aonkit-<user>`` when it is there and the user's (systemd makes it for the user's system unit, ``aonkit
  daemon unit --system USER``: one daemon per node and user, which readers find), else
  ``$XDG_RUNTIME_DIR/aonkit``, else ``/tmp/aonkit-<uid>``. Mode 0700, owned by the user.
* Data root (rolling Parquet files): ``$AONKIT_DATA_DIR``, else ``$XDG_STATE_HOME/aonkit/samples``, else
  ``~/.local/state/aonkit/samples``. Directories 0700, files 0600.

A directory or file that is not the user's own, or that others may read or write, is refused
(:class:`NotOwnerError`), never used: a runtime directory in ``/tmp`` could otherwise be planted by another user.
"""

from __future__ import annotations

import functools
import os
import pwd
import socket
import stat
from pathlib import Path

from ..errors import AonkitError

RING = "ring"
LOCK = "daemon.lock"
STATUS = "daemon.json"
LOG = "daemon.log"
PROCS = "procs"


class LiveError(AonkitError, RuntimeError):
    """The always-on daemon or an on-demand trace cannot do what was asked; the message says why."""


class AlreadyRunning(LiveError):
    """The user's daemon already runs on this node (the message gives its pid)."""


EXIT_RUNNING = 4
"""Exit status of ``aonkit daemon run`` when this user's daemon already runs (a systemd unit does not restart on
it: ``RestartPreventExitStatus``)."""


class DaemonNotRunning(LiveError):
    """No aonkit daemon of this user runs on this node (or its ring is gone)."""


class NotOwnerError(LiveError, PermissionError):
    """A daemon file or directory belongs to another user, or others may read or write it."""


CHECK_S = 5.0
"""How often the daemon's flusher (between writes) and an opted-in process's control thread check that their files
in the runtime directory are still there (two or three ``stat``: a wake-up every 5 s, about 0.002% of a core)."""


def file_id(path: Path) -> tuple[int, int] | None:
    """(device, inode) of ``path``, or None when it is not there."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def runtime_dir() -> Path:
    """The per-user runtime directory (not created here)."""
    if os.environ.get("AONKIT_RUNTIME_DIR"):
        return Path(os.environ["AONKIT_RUNTIME_DIR"])
    if (system := system_runtime_dir()) is not None:
        return system
    if os.environ.get("XDG_RUNTIME_DIR"):
        return Path(os.environ["XDG_RUNTIME_DIR"]) / "aonkit"
    return Path(f"/tmp/aonkit-{os.getuid()}")


def system_runtime_dir() -> Path | None:
    """``/run/aonkit-<user>`` when it is there and this user's; else None.

    systemd keeps the runtime files of this user's system unit there; only root can make it in ``/run``.
    """
    try:
        path = Path(f"/run/aonkit-{pwd.getpwuid(os.getuid()).pw_name}")
        st = os.lstat(path)
    except (KeyError, OSError):
        return None
    return path if stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() else None


def systemd_unit() -> dict[str, str] | None:
    """The systemd unit whose main process this is, from its cgroup; None when systemd did not start this process.

    ``{"unit": "aonkit-svc.service", "scope": "system"}`` (its manager is PID 1), or ``"scope": "user"`` (a user's
    manager). ``SYSTEMD_EXEC_PID`` (systemd 248 and later) tells the process systemd started from its children,
    which inherit the variable.
    """
    if os.environ.get("SYSTEMD_EXEC_PID") != str(os.getpid()):
        return None
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        name = path.rstrip("/").rsplit("/", 1)[-1]
        if controllers in ("", "name=systemd") and name.rpartition(".")[1:] == (".", "service"):
            return {"unit": name, "scope": "system" if os.getppid() == 1 else "user"}
    return None


def data_root() -> Path:
    """The default root of the Parquet files (not created here)."""
    if os.environ.get("AONKIT_DATA_DIR"):
        return Path(os.environ["AONKIT_DATA_DIR"])
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "aonkit" / "samples"


def hostname() -> str:
    """The node's name as used in the ``host=`` partition (a path separator would be replaced by ``_``)."""
    return socket.gethostname().replace(os.sep, "_") or "localhost"


@functools.cache
def boot_id() -> str:
    """The id of the running kernel's boot (Linux's ``/proc/sys/kernel/random/boot_id``), or ``""`` where none.

    It names the clock ``time.time_ns`` reads: the kernel's. Two nodes that share a hostname have two ids, and the
    containers of one node (each its own hostname) have one, as they share one clock (a time namespace moves only
    the monotonic and boot clocks, not the wall clock). Read once per process: it does not change while the
    node runs.
    """
    try:
        text = Path("/proc/sys/kernel/random/boot_id").read_text(encoding="ascii").strip()
    except (OSError, ValueError):
        return ""
    return text if len(text) == 36 and all(c in "0123456789abcdef-" for c in text) else ""


def private_dir(path: Path) -> Path:
    """Create ``path`` (and parents) as needed; make it 0700; refuse one that is not the user's own."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise NotOwnerError(f"{path} is not a directory (a link?); aonkit keeps its files only in its own directory")
    if st.st_uid != os.getuid():
        raise NotOwnerError(f"{path} belongs to uid {st.st_uid}, not to this user (uid {os.getuid()}); "
                            "set AONKIT_RUNTIME_DIR to a directory of your own")
    if stat.S_IMODE(st.st_mode) != 0o700:
        os.chmod(path, 0o700)
    return path


def check_private(path: Path, what: str) -> os.stat_result:
    """``path``'s stat when it is the user's own and owner-only; else :class:`NotOwnerError` saying why."""
    try:
        st = os.stat(path)
    except PermissionError:
        raise NotOwnerError(f"cannot open the {what} {path}: permission denied (another user's daemon?); "
                            "aonkit attaches only to the current user's own daemon") from None
    if st.st_uid != os.getuid():
        raise NotOwnerError(f"the {what} {path} belongs to uid {st.st_uid}, not to this user (uid {os.getuid()}); "
                            "aonkit attaches only to the current user's own daemon")
    if stat.S_IMODE(st.st_mode) & 0o077:
        raise NotOwnerError(f"the {what} {path} has mode {stat.S_IMODE(st.st_mode):#o}: others may read or write "
                            "it, so aonkit does not trust it (it must be owner-only)")
    return st


def open_private(path: Path, flags: int) -> int:
    """``os.open`` a file created 0600 (``O_NOFOLLOW``: never through a link)."""
    return os.open(path, flags | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o600)
