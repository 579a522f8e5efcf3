"""A systemd PID 1 for the tests: this machine's own systemd booted in its own PID, mount, UTS and cgroup
namespaces, over a throwaway overlay of this machine's root, so that a system unit runs as on a node.

What it takes from the host, and what it must not touch:

* The root file system is an overlay: this machine's ``/`` below, a tmpfs above (mounted by the test in the
  host's namespace, so that it outlives one boot and a second boot finds what the first installed). Every write of
  the booted system (``/etc``, users, the journal) lands in that tmpfs.
* The OS is trimmed to systemd and its journal: the enablement links of every other unit and the generators are
  removed (in the overlay), so nothing of the host's (a database, timers, gettys) starts.
* ``/proc/sys`` and ``/sys`` are read-only (no sysctl reaches the host kernel), ``/dev/shm``, ``/run`` are private,
  ``/dev/kmsg`` is ``/dev/null`` and ``/dev/console`` a log file.
* Its cgroups are new children of the test's own, seen as the root through a cgroup namespace; the cgroup file
  systems are mounted again inside, as the host has them (v1 controllers, ``name=systemd`` and the unified tree).
* ``/var/lib/aonkit-svc`` (the system unit's ``StateDirectory``) is a folder of the test's (``state``), so that
  the test reads what the daemon wrote while the system runs and after it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

SYSTEMD = next((p for p in ("/lib/systemd/systemd", "/usr/lib/systemd/systemd") if os.path.exists(p)), None)

SETUP = r"""
set -eu
B=$1; LEAF=$2
for line in $(cat /proc/self/cgroup); do  # new cgroups under this process's own, one per hierarchy
  hier=$(echo "$line" | cut -d: -f2); path=$(echo "$line" | cut -d: -f3)
  case "$hier" in "") dir=unified;; name=systemd) dir=systemd;; *) dir=$(echo "$hier" | cut -d, -f1);; esac
  d=$(echo "/sys/fs/cgroup/$dir/$path/$LEAF" | sed 's#//*#/#g')
  [ -d "/sys/fs/cgroup/$dir" ] || d=$(echo "/sys/fs/cgroup/$path/$LEAF" | sed 's#//*#/#g')  # cgroup2 only
  mkdir "$d"; echo "$d" >> "$B/cgroups"
  if [ -f "$(dirname "$d")/cpuset.cpus" ] && [ "$dir" = cpuset ]; then
    cat "$(dirname "$d")/cpuset.cpus" > "$d/cpuset.cpus"; cat "$(dirname "$d")/cpuset.mems" > "$d/cpuset.mems"
  fi
  echo $$ > "$d/cgroup.procs"
done
exec unshare --cgroup /bin/sh "$B/mounts.sh" "$B"
"""

MOUNTS = r"""
set -eu
B=$1; R=$B/root
mkdir -p "$B/layer/upper" "$B/layer/work"
mount -t overlay overlay -o "lowerdir=/,upperdir=$B/layer/upper,workdir=$B/layer/work" "$R"
mount -t proc proc "$R/proc"
mount --bind "$R/proc/sys" "$R/proc/sys"; mount -o remount,bind,ro "$R/proc/sys"
mount -t sysfs -o ro sysfs "$R/sys"
mount -t tmpfs -o mode=755 tmpfs "$R/sys/fs/cgroup"
if [ -d /sys/fs/cgroup/unified ] || [ -d /sys/fs/cgroup/systemd ]; then  # v1 or hybrid, as the host
  for h in $(ls /sys/fs/cgroup); do
    if [ -L "/sys/fs/cgroup/$h" ]; then ln -s "$(readlink "/sys/fs/cgroup/$h")" "$R/sys/fs/cgroup/$h"; continue; fi
    mkdir "$R/sys/fs/cgroup/$h"
    case "$h" in
      unified) mount -t cgroup2 cgroup2 "$R/sys/fs/cgroup/unified";;
      systemd) mount -t cgroup -o none,name=systemd cgroup "$R/sys/fs/cgroup/systemd";;
      *) mount -t cgroup -o "$h" cgroup "$R/sys/fs/cgroup/$h";;
    esac
  done
else
  umount "$R/sys/fs/cgroup"; mount -t cgroup2 cgroup2 "$R/sys/fs/cgroup"
fi
mount --rbind /dev "$R/dev"
mount -t tmpfs -o mode=1777 tmpfs "$R/dev/shm"
mount --bind /dev/null "$R/dev/kmsg"
touch "$B/console.log"; mount --bind "$B/console.log" "$R/dev/console"
mount -t tmpfs -o mode=755 tmpfs "$R/run"
for d in "$R"/etc/systemd/system/*.wants "$R"/usr/lib/systemd/system/*.wants; do  # systemd and its journal only
  for f in "$d"/*; do case "${f##*/}" in systemd-journald*|aonkit*) ;; *) rm -f "$f";; esac; done
done
rm -f "$R"/usr/lib/systemd/system-generators/* "$R"/etc/systemd/system-generators/*
while read -r p; do chmod o+x "$R$p"; done < "$B/traverse"
for u in svc other; do chroot "$R" id "$u" >/dev/null 2>&1 || chroot "$R" useradd -M -d "/home/$u" -s /bin/sh "$u"; done
mkdir -p "$R/var/lib/aonkit-svc"; mount --bind "$B/state" "$R/var/lib/aonkit-svc"
touch "$B/booting"
exec chroot "$R" /usr/bin/env -i container=aonkit-test PATH=/usr/sbin:/usr/bin:/sbin:/bin \
  /lib/systemd/systemd --unit=multi-user.target
"""


class Systemctl:
    """``show`` and ``wait_for`` over a manager's ``ctl`` (``systemctl`` with its arguments)."""

    def ctl(self, *args: str) -> subprocess.CompletedProcess:
        raise NotImplementedError

    def show(self, unit: str, *props: str) -> dict[str, str]:
        r = self.ctl("show", unit, *(f"-p{p}" for p in props))
        assert r.returncode == 0, r.stderr
        return dict(line.split("=", 1) for line in r.stdout.splitlines() if "=" in line)

    def wait_for(self, unit: str, timeout: float = 60, **want: str) -> dict[str, str]:
        """The unit's properties once they are ``want`` (and its MainPID, NRestarts); fails after ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            now = self.show(unit, *want, "MainPID", "NRestarts")
            if all(now[k] == v for k, v in want.items()):
                return now
            assert time.monotonic() < deadline, f"{unit}: {now}, not {want}"
            time.sleep(0.1)


class SystemBoot(Systemctl):
    """Boots, commands and powers off a systemd PID 1 (see the module's text); :meth:`close` undoes it all."""

    def __init__(self, traverse: list[Path]) -> None:
        self.base = Path(tempfile.mkdtemp(prefix="aon-boot-", dir="/tmp"))
        self.layer, self.state = self.base / "layer", self.base / "state"
        for d in (self.layer, self.state, self.base / "root"):
            d.mkdir()
        (self.base / "setup.sh").write_text(SETUP)
        (self.base / "mounts.sh").write_text(MOUNTS)
        dirs = {str(a) for p in traverse for q in (Path(p).absolute(), Path(p).resolve()) for a in q.parents
                if str(a) != "/"}  # a virtual environment's python is a link: both ways to it  # fmt: skip
        (self.base / "traverse").write_text("".join(f"{d}\n" for d in sorted(dirs)))
        self.mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=700", "tmpfs", str(self.layer)],
                                      capture_output=True, text=True).returncode == 0  # fmt: skip
        self.proc: subprocess.Popen | None = None
        self.boots = 0

    @property
    def pid1(self) -> int:
        """The host's pid of the booted system's PID 1 (the child of ``unshare --fork``)."""
        assert self.proc is not None
        kids = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text().split()
        return int(kids[0])

    def boot(self, timeout: float = 60) -> str | None:
        """Boot to ``multi-user.target``; None once it runs, else why this machine cannot (the test skips).

        A system that began to boot and never came up fails instead: that is systemd's or the unit's fault.
        """
        if not self.mounted:
            return "could not mount a tmpfs for the overlay (root and mount(2) needed)"
        self.boots += 1
        (self.base / "booting").unlink(missing_ok=True)
        log = open(self.base / f"boot{self.boots}.log", "w")  # noqa: SIM115 - the child holds it
        self.proc = subprocess.Popen(["unshare", "--pid", "--fork", "--mount", "--uts", "--propagation", "private",
                                      "/bin/sh", str(self.base / "setup.sh"), str(self.base),
                                      f"{self.base.name}-{self.boots}"],
                                     stdout=log, stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                why = f"the boot ended ({self.proc.returncode}): {self.log()[-600:]}"
                assert not (self.base / "booting").exists(), why
                return why
            if (self.base / "booting").exists() and self.ctl("is-system-running").stdout.strip() in ("running",
                                                                                                 "degraded"):
                return None
            time.sleep(0.1)
        raise AssertionError(f"systemd did not come up in {timeout} s: {self.log()[-600:]}")

    def log(self) -> str:
        return (self.base / f"boot{self.boots}.log").read_text(errors="replace")

    def run(self, *cmd: str, user: str | None = None, timeout: float = 60, **env: str) -> subprocess.CompletedProcess:
        """``cmd`` inside the booted system (as ``user``, else root), with a bare environment and ``env``."""
        return subprocess.run(self.argv(*cmd, user=user, **env), capture_output=True, text=True, timeout=timeout,
                              env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"})  # fmt: skip

    def argv(self, *cmd: str, user: str | None = None, **env: str) -> list[str]:
        enter = ["nsenter", "-t", str(self.pid1), "-m", "-p", "-u", "-C", "-r", "-w"]
        gone = ["setpriv", "--pdeathsig", "KILL"]  # killing the nsenter here kills the command in the node
        who = ["runuser", "-u", user, "--", *gone] if user else []
        return [*enter, *gone, *who, "env", *(f"{k}={v}" for k, v in env.items()), *cmd]

    def ctl(self, *args: str) -> subprocess.CompletedProcess:
        return self.run("systemctl", *args)

    def poweroff(self, timeout: float = 60) -> None:
        """``systemctl poweroff``, and wait until PID 1 has stopped every unit and exited."""
        assert self.proc is not None
        self.ctl("poweroff")
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"no poweroff in {timeout} s; left in the node:\n{self.processes()}") from None

    def processes(self) -> str:
        """The processes in the booted system's PID namespace (host pid, state, command line), for a failure."""
        try:
            ns = os.readlink(f"/proc/{self.pid1}/ns/pid")
        except (OSError, IndexError):
            return "(PID 1 is gone)"
        out = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                if os.readlink(f"/proc/{pid}/ns/pid") != ns:
                    continue
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            out.append(f"{pid} {state} {cmd[:150]}")
        return "\n".join(out)

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.pid1, 9)  # PID 1 of a namespace: everything in it dies with it
            self.proc.wait(30)
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.layer)], capture_output=True)
        cgroups = self.base / "cgroups"
        for leaf in (cgroups.read_text().split() if cgroups.exists() else []):
            for d, _, _ in os.walk(leaf, topdown=False):  # the deepest first
                try:
                    os.rmdir(d)
                except OSError:
                    pass
        shutil.rmtree(self.base, ignore_errors=True)
