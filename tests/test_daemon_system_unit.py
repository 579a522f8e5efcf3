"""The system unit (``aonkit daemon unit --system svc``) under a real systemd PID 1, as on a node.

The node is this machine's own systemd, booted twice over a throwaway overlay of its root (``tests/system_boot.py``
says what it takes from the host and what it keeps away from it). The unit is installed as its hint says, runs
as ``svc`` in its own cgroup with its limits and sandbox (two GPUs of the tests' C ``libnvidia-ml`` read through
it), is found by svc's readers and commands, keeps streaming to a reader that attached before systemd restarted
it after a crash (its runtime directory kept, an opted-in training loop still registered there, then traced on
demand and its bundle loaded as svc), writes every sample before the node powers off, and starts at the next
boot because it is enabled; moved to a folder of the admin's, the sandbox lets it write there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow.dataset as ds
import pytest

from aonkit.live import store
from tests import fake_libnvml
from tests.system_boot import SYSTEMD, SystemBoot

ROOT = Path(__file__).resolve().parent.parent
RUN = "/run/aonkit-svc"
READER = """
import os, time, aonkit.live as live
r, cursor = live.attach(), 0
print("pid", os.getpid(), flush=True)
print("devices", sorted({d for d, _ in r.channels}), flush=True)
while True:
    frame, cursor = r.read(cursor)
    if len(frame):
        print("read", r.pid, int(frame.ts_ns.min()), int(frame.ts_ns.max()), flush=True)
    time.sleep(0.05)
"""

SERVED = """
import os, time, torch, aonkit.live as live
live.serve()
model, x = torch.nn.Linear(32, 4), torch.randn(16, 32)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
print("served", os.getpid(), flush=True)
for _ in range(30000):  # a training loop that never stops on its own
    opt.zero_grad()
    model(x).sum().backward()
    opt.step()
    time.sleep(0.02)
"""
LOADED = """
import sys, aonkit
t = aonkit.load(sys.argv[1])
steps = t.events["name"].astype(str).str.startswith("ProfilerStep#").sum()
print(steps, len(t.samples), sorted(set(t.samples["metric"].astype(str))))
"""


@pytest.fixture
def node() -> Iterator[SystemBoot]:
    if SYSTEMD is None or not all(shutil.which(t) for t in ("unshare", "nsenter", "runuser", "setpriv", "systemctl")):
        pytest.skip("systemd, unshare, nsenter, runuser or setpriv is not installed here")
    if os.geteuid() != 0:
        pytest.skip("booting systemd in namespaces needs root")
    n = SystemBoot(traverse=[Path(sys.executable), ROOT / "aonkit"])
    try:
        why = n.boot()
        if why is not None:
            pytest.skip(f"systemd cannot be booted in namespaces here: {why}")
        yield n
    finally:
        if n.proc is not None and n.proc.poll() is None:  # shown if the test failed: the unit's journal
            print(n.run("journalctl", "-u", "aonkit-svc", "--no-pager", "-n", "60").stdout)
        n.close()


def fake_gpus(node: SystemBoot) -> int:
    """Two GPUs of the tests' C ``libnvidia-ml`` for the unit (a drop-in), so that nvidia-ml-py's real ctypes code
    loads and calls a driver library inside the sandbox; 0 without a C compiler (the host alone is sampled)."""
    try:
        lib = fake_libnvml.build() / fake_libnvml.SONAME
    except fake_libnvml.NoCompiler:
        return 0
    to, conf = "/usr/local/lib/aonkit-fake-nvml", "/etc/systemd/system/aonkit-svc.service.d/fake-gpus.conf"
    r = node.run("sh", "-c", f"install -D -m 0755 '{lib}' {to}/{fake_libnvml.SONAME} && mkdir -p {Path(conf).parent}"
                 f" && printf '[Service]\\nEnvironment=LD_LIBRARY_PATH={to} AONKIT_FAKE_NVML_GPUS=2\\n' > {conf}")
    assert r.returncode == 0, r.stderr
    return 2


def runs_on_disk(state: Path) -> dict[int, np.ndarray]:
    """Each daemon run's sample times on disk (by the pid in the file names: ``store.list_files``), sorted."""
    runs: dict[int, list[np.ndarray]] = {}
    for host in (state / "samples").glob("host=*"):
        for _, pid, path, _ in store.list_files(host):
            runs.setdefault(pid, []).append(ds.dataset(path, format="parquet").to_table(columns=["ts_ns"])
                                            .column(0).to_numpy())  # fmt: skip
    return {pid: np.unique(np.concatenate(ts)) for pid, ts in runs.items()}


def install(node: SystemBoot, *opts: str) -> None:
    """As root in the node: the system unit of svc with ``opts``, installed and started as its hint says."""
    r = node.run("sh", "-c", f"{sys.executable} -m aonkit.cli daemon unit --system svc {' '.join(opts)}"
                 " > /etc/systemd/system/aonkit-svc.service && systemctl daemon-reload"
                 " && systemctl enable --now aonkit-svc", PYTHONPATH=str(ROOT))  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.gpu
def test_the_system_unit_samples_the_real_gpus_in_its_sandbox(node: SystemBoot) -> None:
    # GIVEN the system unit on the node's real NVML (no fake), in its sandbox (no network, / read-only)
    install(node, "--interval", "0.1", "--flush", "2")
    node.wait_for("aonkit-svc", ActiveState="active", SubState="running")
    # THEN a reader of svc's sees every GPU's basic metrics, and the daemon says it found them
    code = ("import time, aonkit.live as live; time.sleep(3); r = live.attach(); f, _ = r.read(0); "
            "g = f[f.device >= 0]; print(sorted(g.device.unique()), sorted(g.metric.astype(str).unique()))")
    r = node.run(sys.executable, "-c", code, user="svc", AONKIT_RUNTIME_DIR=RUN, PYTHONPATH=str(ROOT))
    print(r.stdout, r.stderr, node.run("cat", f"{RUN}/daemon.json").stdout)
    assert r.returncode == 0 and "gpu_util_pct" in r.stdout and "sm_clock_mhz" in r.stdout, r.stdout + r.stderr


def test_the_system_unit_runs_as_its_user_restarts_survives_a_poweroff_and_starts_at_boot(node: SystemBoot) -> None:
    # GIVEN a node booted with systemd as PID 1; root installs the unit as `aonkit daemon unit --system` says
    env = {"PYTHONPATH": str(ROOT)}  # this checkout's aonkit, baked into the unit as a user's PYTHONPATH would be
    gpus = fake_gpus(node)
    install(node, "--interval", "0.05", "--flush", "3")
    first = node.wait_for("aonkit-svc", ActiveState="active", SubState="running")
    pid = int(first["MainPID"])
    assert node.run("test", "-e", f"{RUN}/ring").returncode == 0  # started once it sampled (Type=notify)
    # THEN it runs as svc, in its own cgroup, under the unit's limits as the kernel applies them
    r = node.run("ps", "-o", "user=", "-p", str(pid))
    assert r.stdout.strip() == "svc", r.stdout + r.stderr
    r = node.run("cat", f"/proc/{pid}/cgroup")
    assert "/system.slice/aonkit-svc.service" in r.stdout, r.stdout
    limits = node.show("aonkit-svc", "MemoryMax", "CPUQuotaPerSecUSec", "ControlGroup")
    assert limits["MemoryMax"] == str(512 << 20) and limits["CPUQuotaPerSecUSec"] == "200ms"
    group = limits["ControlGroup"]
    kernel = node.run("sh", "-c", f"cat /sys/fs/cgroup/memory{group}/memory.limit_in_bytes "
                      f"/sys/fs/cgroup/cpu{group}/cpu.cfs_quota_us 2>/dev/null || cat /sys/fs/cgroup{group}/memory.max "
                      f"/sys/fs/cgroup{group}/cpu.max 2>/dev/null")  # fmt: skip
    if kernel.returncode == 0 or os.path.isdir("/sys/fs/cgroup/memory"):  # v1 (here), or v2 with the controllers
        assert kernel.stdout.split()[:2] == [str(512 << 20), "20000"], kernel.stdout  # v2's cpu.max: "20000 100000"
    # ... in the unit's sandbox: no network of the node's, the root file system read-only, its state directory not
    net = node.run("readlink", "/proc/1/ns/net", f"/proc/{pid}/ns/net").stdout.split()
    assert len(net) == 2 and net[0] != net[1], net
    mounts = {f[4]: f[5].split(",") for f in (x.split() for x in node.run("cat", f"/proc/{pid}/mountinfo").stdout
                                               .splitlines())}  # fmt: skip
    assert "ro" in mounts["/"] and "rw" in mounts["/var/lib/aonkit-svc"], mounts
    # ... and systemd made its runtime directory, private to svc, where its readers look
    r = node.run("stat", "-c", "%U %a", RUN, f"{RUN}/ring", "/var/lib/aonkit-svc")
    assert r.stdout.split("\n")[:3] == ["svc 700", "svc 600", "svc 700"], r.stdout + r.stderr
    # WHEN svc attaches a reader (no AONKIT_RUNTIME_DIR: its system unit's directory is looked at first), and another
    # user tries
    reader = subprocess.Popen(node.argv(sys.executable, "-c", READER, user="svc", **env),  # it finds /run/aonkit-svc
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # fmt: skip
    lines: list[str] = []
    threading.Thread(target=lambda: [lines.append(x.rstrip()) for x in reader.stdout], daemon=True).start()
    other = node.run(sys.executable, "-c", "import aonkit.live as live; live.attach()", user="other",
                     AONKIT_RUNTIME_DIR=RUN, **env)  # fmt: skip
    # THEN svc reads the samples as they come (the fake GPUs' too: NVML's library works in the sandbox); the other
    # user is refused, with the reason
    assert other.returncode == 1, other.stdout + other.stderr
    assert "NotOwnerError: the runtime directory /run/aonkit-svc belongs to uid" in other.stderr, other.stderr
    served, served_pid = None, ""
    try:
        wait(lambda: any(x.startswith(f"read {pid} ") for x in lines), "the reader's first samples", lines)
        assert f"devices {list(range(-1, gpus))}" in lines, lines[:3]
        # ... and svc's commands find it too: status says whose it is; no second daemon; stopped only by systemd
        cli = [sys.executable, "-m", "aonkit.cli", "daemon"]
        said = {c: node.run(*cli, c, user="svc", **env) for c in ("status", "start", "stop")}
        assert said["status"].returncode == 0, said["status"].stdout + said["status"].stderr
        unit = "systemd's system unit aonkit-svc.service"
        first_line = said["status"].stdout.splitlines()[0]
        assert first_line.startswith(f"aonkit daemon: running (pid {pid}), up ") and first_line.endswith(unit)
        assert said["start"].returncode != 0 and f"already running (pid {pid}, {unit})" in said["start"].stderr
        assert said["stop"].returncode != 0 and "`systemctl stop aonkit-svc.service`" in said["stop"].stderr
        assert node.show("aonkit-svc", "MainPID")["MainPID"] == str(pid)
        text = node.show("aonkit-svc", "StatusText")["StatusText"]  # what `systemctl status` shows (STATUS=)
        assert text.startswith(f"host + {gpus} GPUs every 0.05 s; " if gpus else "host only every 0.05 s; "), text
        wait(lambda: pid in runs_on_disk(node.state), "the daemon's first flush", lines)  # a crash loses the rest
        # GIVEN a torch training loop of svc's that opted in to on-demand traces (registered in the runtime directory)
        served = subprocess.Popen(node.argv(sys.executable, "-c", SERVED, user="svc", **env), text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # fmt: skip
        for line in iter(served.stdout.readline, ""):  # its pid in the node (after any warning torch prints)
            if line.startswith("served "):
                served_pid = line.split()[-1]
                break
        assert served_pid, "the training loop ended before it opted in"
        before = node.run("stat", "-c", "%i", RUN).stdout
        # WHEN the daemon crashes: systemd restarts it after RestartSec
        t_kill = time.time_ns()
        assert node.run("kill", "-KILL", str(pid)).returncode == 0
        node.wait_for("aonkit-svc", SubState="auto-restart", timeout=10)
        again = node.wait_for("aonkit-svc", SubState="running", NRestarts="1", timeout=30)
        pid2 = int(again["MainPID"])
        assert pid2 != pid
        # THEN the reader attached before the crash follows the new daemon's ring and reads its samples
        wait(lambda: any(x.startswith(f"read {pid2} ") for x in lines), "samples of the restarted daemon", lines)
        assert reader.poll() is None, lines
        first_new = min(int(x.split()[2]) for x in lines if x.startswith(f"read {pid2} "))
        assert first_new > t_kill
        # ... in the same runtime directory (RuntimeDirectoryPreserve=restart): the opted-in process is still
        # registered, with nothing to do on its side
        assert node.run("stat", "-c", "%i", RUN).stdout == before
        status = node.run(*cli, "status", user="svc", **env).stdout
        assert f"opted-in processes: 1\n    pid {served_pid}: " in status, status
        # WHEN svc asks that process, which keeps training, for a trace of its next 2 steps (the restarted daemon's
        # samples beside it), and loads the bundle (a root-owned install, no home: Numba's cache goes to a private
        # temp folder, aonkit/_kernels/_cache_place.py)
        out = "/tmp/svc-trace"
        r = node.run(sys.executable, "-m", "aonkit.cli", "trace", served_pid, "--steps", "2", "--out", out,
                     user="svc", timeout=120, **env)  # fmt: skip
        assert r.returncode == 0, r.stdout + r.stderr
        loaded = node.run(sys.executable, "-c", LOADED, out, user="svc", timeout=120, AONKIT_BACKGROUND_COMPILE="0",
                          **env)  # fmt: skip
        # THEN it holds the 2 profiled steps and the daemon's samples of the window
        assert loaded.returncode == 0, loaded.stderr[-3000:]
        steps, samples, metrics = loaded.stdout.split(maxsplit=2)
        assert int(steps) == 2 and int(samples) > 0 and "cpu_percent" in metrics, loaded.stdout
        assert "Numba's cache has no folder" not in loaded.stderr  # it kept its compiled kernels
        assert served.poll() is None
    finally:  # ended in the node, where systemd reaps them (ending their nsenter here made the poweroff take 10 s)
        pids = [x.split()[1] for x in lines if x.startswith("pid ")][:1] + ([served_pid] if served_pid else [])
        node.run("kill", "-KILL", *pids)
        for p in (reader, served):
            if p is not None:
                p.wait(10)
    # WHEN the node powers off
    time.sleep(1.0)
    t_off = time.time_ns()
    node.poweroff()
    # THEN the restarted daemon's samples are all on disk, from its start up to the shutdown: those of its last
    # second (--flush 3) reached the disk only by its write on the SIGTERM systemd sent it as the node went down
    runs = runs_on_disk(node.state)
    assert set(runs) == {pid, pid2}
    run = runs[pid2]
    assert run[0] <= first_new and np.diff(run).max() < 3 * 0.05e9, np.diff(run).max()
    assert run[-1] >= t_off - 2 * 0.05e9, (t_off - run[-1]) / 1e9
    # WHEN the node boots again: THEN the enabled unit starts with multi-user.target and samples
    assert node.boot() is None
    booted = node.wait_for("aonkit-svc", ActiveState="active", SubState="running")
    pid3 = int(booted["MainPID"])
    assert booted["NRestarts"] == "0"
    wait(lambda: pid3 in runs_on_disk(node.state), "the booted daemon's first flush", [])
    # WHEN root moves the files to a folder of its own (a space in its name), made for svc, and restarts the unit
    # (and its health to node_exporter's textfile folder, made writable for svc)
    data, prom = "/srv/aonkit data", "/var/lib/node_exporter/textfile/aonkit-svc.prom"
    r = node.run("sh", "-c", f"install -d -o svc -m 0700 '{data}' && install -d -o svc -m 0755 {Path(prom).parent}"
                 f" && {sys.executable} -m aonkit.cli daemon unit --system svc --interval 0.05 --flush 1 "
                 f"--root '{data}' --prometheus-file {prom} > /etc/systemd/system/aonkit-svc.service"
                 " && systemctl daemon-reload && systemctl restart aonkit-svc", **env)  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    # THEN the sandbox lets it write there (ReadWritePaths=), and it does
    moved = int(node.wait_for("aonkit-svc", ActiveState="active", SubState="running")["MainPID"])
    listing = f"ls '{data}'/host=*/date=*/hour=*/part-*-{moved}.parquet"
    wait(lambda: node.run("sh", "-c", listing).returncode == 0, "a file in the admin's folder", [])
    # AND its health page, readable by node_exporter's user, says it is up; after `systemctl stop`, down
    wait(lambda: 'aonkit_daemon_healthy{user="svc"} 1' in node.run("cat", prom).stdout, "the health page", [])
    assert node.run("stat", "-c", "%a %U", prom).stdout.split() == ["644", "svc"]
    assert node.run("systemctl", "stop", "aonkit-svc").returncode == 0
    assert 'aonkit_daemon_up{user="svc"} 0' in node.run("cat", prom).stdout
    node.poweroff()
    assert len(runs_on_disk(node.state)[pid3]) > 10


def wait(what, label: str, lines: list[str], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not what():
        assert time.monotonic() < deadline, f"timed out waiting for {label}: {lines[-10:]}"
        time.sleep(0.05)
