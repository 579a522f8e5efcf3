"""``aonkit daemon unit``: a systemd unit that runs the daemon, so a node's init system keeps it sampling.

A user unit (default) runs it in the user's own systemd manager: ``systemctl --user enable --now aonkit``, and
``loginctl enable-linger`` keeps it up without a login session. Readers find its ring as they find any daemon of
theirs (``$XDG_RUNTIME_DIR/aonkit``, which the user manager sets). ``--system USER`` makes a system unit that
runs it as ``USER``: systemd creates its runtime directory (``/run/aonkit-USER``, mode 0700, owned by ``USER``)
and the unit points the daemon at it; that user's readers and commands look there first
(:func:`aonkit.live.paths.runtime_dir`). Its files go to its state directory (``/var/lib/aonkit-USER/samples``,
made by systemd: a service account needs no home) unless ``--root`` or ``AONKIT_DATA_DIR`` names a folder, and it
runs in a sandbox (:data:`SANDBOX`): the file system read-only but for those two directories (and ``/dev``), no
network, nothing of the kernel's to change.

The unit runs ``python -m aonkit.live.daemon run`` with this Python and the given options, without a BLAS thread
pool (:data:`aonkit.live.control.ONE_THREAD`), as ``Type=notify`` with a watchdog (:mod:`aonkit.live.sd_notify`:
started once it samples, a line for ``systemctl status``, restarted when its sampling stops); stops it with SIGTERM
(the last samples are written first; 60 s allowed); restarts it on failure, but not when it exits
:data:`~aonkit.live.paths.EXIT_RUNNING` (this user's daemon already runs); and caps its memory and CPU well above
what it uses (``bench/RESULTS.md``: 93-142 MB and under 1% of a core at the defaults), as a guard against a runaway,
never as its budget.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

from .control import ONE_THREAD, forwarded_args
from .paths import EXIT_RUNNING, LiveError

WATCHDOG_S = 60
"""``WatchdogSec=``: systemd restarts a daemon that has put no sample in its ring for this long (it samples every
0.1 s by default, and the host on through a blocked NVML call: :mod:`aonkit.live.sd_notify`)."""
USER_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
LIMITS = {"MemoryMax": "512M", "CPUQuota": "20%"}
"""Guards against a runaway daemon (it uses about 100 MB and under 1% of a core at the defaults)."""
SANDBOX = {"ProtectSystem": "strict", "ProtectHome": "read-only", "PrivateNetwork": "yes",
           "ProtectKernelTunables": "yes", "ProtectKernelModules": "yes", "ProtectKernelLogs": "yes",
           "ProtectControlGroups": "yes", "ProtectHostname": "yes", "RestrictNamespaces": "yes",
           "RestrictRealtime": "yes", "RestrictSUIDSGID": "yes", "LockPersonality": "yes",
           "SystemCallArchitectures": "native", "CapabilityBoundingSet": ""}  # fmt: skip
"""A system unit's sandbox: the daemon writes only its runtime and data directories, has no network (it opens no
port), and can change nothing of the kernel's. Left out until a GPU node has run them: a system call filter,
``PrivateDevices`` and ``DeviceAllow`` (NVML opens ``/dev/nvidia*``), ``MemoryDenyWriteExecute``."""


def quote(word: str) -> str:
    """``word`` as one argument of a systemd command line: ``%`` and ``$`` doubled, quoted when it has a space."""
    w = word.replace("%", "%%").replace("$", "$$")
    if re.search(r'[\s"\'\\;]', w) or not w:
        w = '"' + w.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return w


def quote_path(path: str) -> str:
    """``path`` as one entry of a systemd path list (``ReadWritePaths=``): ``%`` doubled, quoted when it has a space."""
    p = path.replace("%", "%%")
    return '"' + p.replace("\\", "\\\\").replace('"', '\\"') + '"' if re.search(r'[\s"\'\\]', p) else p


def unit_text(args: argparse.Namespace, python: str = sys.executable) -> str:
    """The unit file for ``args`` (the run options, and ``system``: a user name or None)."""
    system = getattr(args, "system", None)
    if system is not None and not USER_NAME.match(system):
        raise LiveError(f"--system takes a user name (letters, digits, '_', '.', '-'), got {system!r}")
    argv = [python, "-m", "aonkit.live.daemon", "run", *forwarded_args(args)]
    env = dict(ONE_THREAD)
    for key in ("AONKIT_DATA_DIR", "PYTHONPATH"):  # where this shell's aonkit and files are, when set here
        if os.environ.get(key):  # absolute: systemd starts the daemon in /
            env[key] = os.pathsep.join(str(Path(p).absolute()) for p in os.environ[key].split(os.pathsep) if p)
    lines = ["# aonkit sampling daemon (made by `aonkit daemon unit`; docs/daemon.md, 'Under systemd').",
             "[Unit]", "Description=aonkit sampling daemon: host and GPU metrics to a shared-memory ring and Parquet"]
    sandbox: list[str] = []
    if system is not None:
        lines.append("After=network.target nvidia-persistenced.service")
        env["AONKIT_RUNTIME_DIR"] = f"/run/aonkit-{system}"
        root = getattr(args, "root", None) or env.get("AONKIT_DATA_DIR")
        if root:  # a data folder of the admin's: it must exist (the sandbox makes the rest read-only)
            sandbox.append(f"ReadWritePaths={quote_path(str(Path(root).absolute()))}")
        else:  # systemd makes /var/lib/aonkit-USER, the user's, 0700
            env["AONKIT_DATA_DIR"] = f"/var/lib/aonkit-{system}/samples"
            sandbox += [f"StateDirectory=aonkit-{system}", "StateDirectoryMode=0700"]
        if getattr(args, "prometheus_file", None):  # the file is renamed in: its folder must be writable
            sandbox.append(f"ReadWritePaths={quote_path(str(Path(args.prometheus_file).absolute().parent))}")
        sandbox += [f"{k}={v}" for k, v in SANDBOX.items()]
    else:
        if os.environ.get("AONKIT_RUNTIME_DIR"):
            env["AONKIT_RUNTIME_DIR"] = os.environ["AONKIT_RUNTIME_DIR"]
    lines += ["", "[Service]", "Type=notify", "ExecStart=" + " ".join(quote(w) for w in argv)]
    lines += [f"Environment={quote(f'{k}={v}')}" for k, v in env.items()]
    if system is not None:
        lines += [f"User={system}", f"RuntimeDirectory=aonkit-{system}", "RuntimeDirectoryMode=0700",
                  "RuntimeDirectoryPreserve=restart"]  # a restart keeps the opted-in processes registered
    lines += ["KillSignal=SIGTERM", "TimeoutStopSec=60", f"WatchdogSec={WATCHDOG_S}", "Restart=on-failure",
              "RestartSec=10",
              f"RestartPreventExitStatus={EXIT_RUNNING}", "UMask=0077", "NoNewPrivileges=yes",
              *(f"{k}={v}" for k, v in LIMITS.items()), *sandbox,
              "", "[Install]", f"WantedBy={'multi-user.target' if system is not None else 'default.target'}"]
    return "\n".join(lines) + "\n"


def unit_command(args: argparse.Namespace) -> int:
    """Print the unit with how to install it (on stderr, so that stdout is the file)."""
    sys.stdout.write(unit_text(args))
    if args.system is None:
        hint = ("install: aonkit daemon unit > ~/.config/systemd/user/aonkit.service && systemctl --user daemon-reload"
                " && systemctl --user enable --now aonkit  (loginctl enable-linger: up without a login)")
    else:
        hint = (f"install (as root): aonkit daemon unit --system {args.system} > /etc/systemd/system/"
                f"aonkit-{args.system}.service && systemctl daemon-reload && systemctl enable --now "
                f"aonkit-{args.system}; {args.system}'s readers and commands find it in /run/aonkit-{args.system}")
    print(hint, file=sys.stderr)
    return 0
