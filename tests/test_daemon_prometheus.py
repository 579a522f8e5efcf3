"""``aonkit daemon status --prometheus FILE``: the daemon's health for node_exporter's textfile collector.

A real daemon (two fake GPUs), its file read back with prometheus_client's own parser of the text format (installed
with JupyterLab's server): healthy, a failing write, stopped; and label values that need escaping.
"""

from __future__ import annotations

import os
import signal
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from aonkit.live import store
from aonkit.live.prometheus import exposition
from tests.live_helpers import Live, live_world
from tests.test_daemon_failures import _break_data_dir

parser = pytest.importorskip("prometheus_client.parser", reason="prometheus_client comes with jupyter_server")


@pytest.fixture
def live() -> Iterator[Live]:
    yield from live_world()


def scrape(text: str) -> dict[tuple[str, tuple], float]:
    """{(sample name, sorted labels): value} of a text-format page, through prometheus_client's parser."""
    out = {}
    for family in parser.text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def read(live: Live, path: Path) -> dict[tuple[str, tuple], float]:
    r = live.cli("daemon", "status", "--prometheus", str(path))
    assert r.returncode == 0 and r.stdout == "", r.stdout + r.stderr
    assert stat.S_IMODE(path.stat().st_mode) == 0o644  # node_exporter may run as another user
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # written through a temporary file, renamed in
    return scrape(path.read_text())


def test_the_textfile_says_up_healthy_and_the_daemons_counters(live: Live) -> None:
    import pwd

    user = (("user", pwd.getpwuid(os.getuid()).pw_name),)
    prom = live.base / "textfile" / "aonkit.prom"
    prom.parent.mkdir()
    pid = live.start_daemon("--flush", "0.3")
    live.wait(lambda: live.status().get("flushes", 0) >= 2)
    st = live.status()  # before the page: the page's counters are these or later ones
    got = read(live, prom)
    assert got[("aonkit_daemon_up", user)] == 1 and got[("aonkit_daemon_healthy", user)] == 1
    assert all(v == 0 for (name, _), v in got.items() if name == "aonkit_daemon_problem")
    assert {dict(k)["problem"] for name, k in got if name == "aonkit_daemon_problem"} == {
        "sampling_stalled", "gpu_reads_blocked", "writing_fails", "writing_late", "prune_fails", "prometheus_fails"}
    assert got[("aonkit_daemon_gpus", user)] == 2
    assert got[("aonkit_daemon_samples_total", user)] >= st["samples"] > 0  # a counter: the parser keeps _total
    assert got[("aonkit_daemon_lost_samples_total", user)] == 0
    assert got[("aonkit_daemon_start_time_seconds", user)] == pytest.approx(st["started_ns"] / 1e9)
    assert got[("aonkit_daemon_resident_memory_bytes", user)] > 10e6
    files = store.list_files(store.host_dir(live.data, st["host"]))
    assert len(files) >= 2 and got[("aonkit_daemon_disk_bytes", user)] >= sum(f[3] for f in files[:2])
    info = next(dict(k) for name, k in got if name == "aonkit_daemon_info")
    assert info["unit"] == "" and info["version"]
    # WHEN its writes fail: THEN the problem is 1 and it is no longer healthy, still up
    away = _break_data_dir(live)
    live.wait(lambda: live.status().get("flush_failures", 0) >= 1)
    got = read(live, prom)
    assert got[("aonkit_daemon_up", user)] == 1 and got[("aonkit_daemon_healthy", user)] == 0
    assert got[("aonkit_daemon_problem", (("problem", "writing_fails"), *user))] == 1
    assert got[("aonkit_daemon_flush_failures_total", user)] >= 1
    live.data.unlink()
    away.rename(live.data)
    # WHEN it has stopped: THEN up is 0, and no counter of a dead daemon is left in the file
    os.kill(pid, signal.SIGTERM)
    live.wait_stopped()
    got = read(live, prom)
    assert got[("aonkit_daemon_up", user)] == 0 and got[("aonkit_daemon_healthy", user)] == 0
    assert {name for name, _ in got} == {"aonkit_daemon_up", "aonkit_daemon_healthy", "aonkit_daemon_problem"}
    # AND "-" prints the same page
    out = live.cli("daemon", "status", "--prometheus", "-")
    assert out.returncode == 0 and scrape(out.stdout) == got


def test_the_daemon_writes_its_own_page_at_each_flush_and_down_at_its_stop(live: Live) -> None:
    import pwd

    user = (("user", pwd.getpwuid(os.getuid()).pw_name),)
    folder = live.base / "textfile"
    prom = folder / "aonkit.prom"
    pid = live.start_daemon("--flush", "0.3", "--prometheus-file", str(prom))
    # a folder that is not there: said once, in the status too, and the daemon samples and flushes on
    live.wait(lambda: live.status().get("flushes", 0) >= 3)
    assert live.status()["prometheus_error"].startswith("FileNotFoundError")
    log = (live.run_dir / "daemon.log").read_text()
    assert log.count(f"cannot write {prom}") == 1, log
    said = live.cli("daemon", "status", "--json").stdout  # (seen from outside: the daemon's page is what failed)
    assert '"health": "degraded"' in said and "health page not written: FileNotFoundError" in said, said
    outside = scrape(live.cli("daemon", "status", "--prometheus", "-").stdout)
    assert outside[("aonkit_daemon_problem", (("problem", "prometheus_fails"), *user))] == 1
    # WHEN the folder exists: THEN the page comes with the next flush, the status's own numbers in it
    folder.mkdir()
    live.wait(lambda: prom.exists() and live.status().get("prometheus_error", "x") is None)
    got = scrape(prom.read_text())
    assert stat.S_IMODE(prom.stat().st_mode) == 0o644 and [p.name for p in folder.iterdir()] == [prom.name]
    assert got[("aonkit_daemon_up", user)] == 1 and got[("aonkit_daemon_healthy", user)] == 1
    assert got[("aonkit_daemon_gpus", user)] == 2 and got[("aonkit_daemon_samples_total", user)] > 0
    assert got[("aonkit_daemon_disk_bytes", user)] > 0  # the flusher's own list of its files
    # WHEN its writes fail: THEN its page says so
    away = _break_data_dir(live)
    live.wait(lambda: 'problem="writing_fails"} 1' in prom.read_text())
    assert scrape(prom.read_text())[("aonkit_daemon_healthy", user)] == 0
    live.data.unlink()
    away.rename(live.data)
    # WHEN it stops: THEN its last page says it is down
    os.kill(pid, signal.SIGTERM)
    live.wait_stopped()
    assert scrape(prom.read_text())[("aonkit_daemon_up", user)] == 0


def test_label_values_are_escaped_and_read_back_exactly() -> None:
    report = {"health": "ok", "problems": [], "ring": {"count": 5, "flushed": 2, "heartbeat_ns": 2_000_000_000},
              "status": {"started_ns": 1_000_000_000, "samples": 5, "lost": 0, "flushes": 1, "flush_failures": 0,
                         "last_flush_ns": None, "deleted": 0, "gpus": [], "systemd": {"unit": 'a"b\\c\nd.service'}}}
    odd = 'svc "x"\\y\nz'
    got = scrape(exposition(report, user=odd))
    assert got[("aonkit_daemon_up", (("user", odd),))] == 1
    info = next(dict(k) for name, k in got if name == "aonkit_daemon_info")
    assert info["unit"] == 'a"b\\c\nd.service' and info["user"] == odd
    assert got[("aonkit_daemon_unflushed_samples", (("user", odd),))] == 3
    assert ("aonkit_daemon_last_flush_timestamp_seconds", (("user", odd),)) not in got  # no write yet: left out


def test_the_status_commands_load_neither_numpy_pandas_nor_pyarrow(live: Live) -> None:
    """A timer runs ``status --prometheus`` every minute: importing pandas took 0.2 s of CPU a run, pyarrow 0.14 s
    (session 39), numpy 0.1 s (session 40). Checked with a daemon running, its ring read, its files listed."""
    import subprocess
    import sys

    live.start_daemon()
    live.wait(lambda: live.status().get("flushes", 0) >= 1)
    code = ("import sys\nfrom aonkit.cli import main\n"
            "for argv in (['daemon', 'status'], ['daemon', 'status', '--json'], ['daemon', 'status', '--prometheus', "
            "sys.argv[1]]):\n    assert main(argv) == 0\n"
            "print(sorted(m for m in ('numpy', 'pandas', 'pyarrow', 'numba') if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code, str(live.base / "a.prom")], env=live.env, capture_output=True,
                       text=True, timeout=120)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "files, " in r.stdout and r.stdout.splitlines()[-1] == "[]", r.stdout
