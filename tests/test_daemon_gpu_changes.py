"""A daemon whose GPUs change while it samples them: MIG reconfigured, then a GPU added (real daemon processes).

The Python fake NVML (``tests.fake_gpus:changing_gpus``) changes when the test creates a file, as a machine does when
an admin runs ``nvidia-smi mig -dgi`` or a GPU is handed to the node. The daemon looks every 0.3 s here, samples the
new set from then on in a new ring, and a reader attached before follows it with every sample once.
"""

from __future__ import annotations

import os
import re
import signal

import numpy as np
import pytest

from aonkit.live.gpu_probe import layout_change

from .live_helpers import Live, live_world

live = pytest.fixture(live_world)


def test_mig_reconfigured_then_a_gpu_added_are_sampled_from_then_on(live: Live, monkeypatch) -> None:
    from aonkit.live import attach

    mig, add = live.base / "mig-destroyed", live.base / "gpu-added"
    env = {"AONKIT_FAKE_NVML": "tests.fake_gpus:changing_gpus", "AONKIT_TEST_MIG": str(mig),
           "AONKIT_TEST_ADD": str(add), "PYTHONPATH": os.getcwd()}  # fmt: skip
    live.env.update(env)
    pid = live.start_daemon("--gpu-check", "0.3")
    live.wait(lambda: live.status().get("flushes", 0) >= 1)
    st = live.status()
    assert st["gpus"] == [0, 1] and st["gpu_changes"] == 0 and st["gpu_check_s"] == 0.3
    assert st["gpu_mig"] == {"1": [[1, 0, "MIG-fake-1-1-0"], [2, 0, "MIG-fake-1-2-0"]]}
    assert "GPU 1 in MIG mode: 2 MIG devices on 2 GPU instances" in live.cli("daemon", "status").stdout

    monkeypatch.setenv("AONKIT_RUNTIME_DIR", str(live.run_dir))
    monkeypatch.setenv("AONKIT_DATA_DIR", str(live.data))
    reader = attach()
    frames, cursor = [], 0
    try:
        assert (1, "memory_used_bytes.gi2") in reader.channels and (1, "gpu_util_pct") not in reader.channels
        assert (1, "gpm_sm_util_pct.gi2") in reader.channels and st["mig_gpm_interval_s"] == 10.0  # the default

        def read() -> None:
            nonlocal cursor
            got, cursor = reader.read(cursor)
            frames.append(got)

        read()
        # WHEN GPU 1's instance 2 is destroyed
        mig.touch()
        live.wait(lambda: live.status().get("gpu_changes") == 1)
        st = live.status()
        assert st["gpu_mig"] == {"1": [[1, 0, "MIG-fake-1-1-0"]]}
        assert st["gpu_note"].startswith("the GPUs changed (GPU 1: 2 -> 1 MIG devices): sampling GPU 0, 1, ")
        live.wait(lambda: (read(), (1, "memory_used_bytes.gi2") not in reader.channels)[1])
        assert (1, "memory_used_bytes.gi1") in reader.channels
        # WHEN a third GPU is added
        add.touch()
        live.wait(lambda: live.status().get("gpu_changes") == 2)
        assert live.status()["gpus"] == [0, 1, 2] and "GPU added" in live.status()["gpu_note"]
        live.wait(lambda: (read(), 2 in {d for d, _ in reader.channels})[1])
        live.wait(lambda: (read(), bool(len(frames[-1]) and (frames[-1]["device"] == 2).any()))[1])
        said = live.cli("daemon", "status").stdout
        assert "changed 2 times" in said, said
        prom = live.cli("daemon", "status", "--prometheus", "-").stdout
        assert re.search(r'^aonkit_daemon_gpu_changes_total\{user="[^"]*"\} 2$', prom, re.M), prom
        os.kill(pid, signal.SIGTERM)
        live.wait_stopped()
        read()
        st = live.status()
        window = reader.window(0)
    finally:
        reader.close()
    # THEN nothing was lost: every sample of the three rings once, the host's throughout
    assert st["lost"] == 0 and st["unsaved"] == 0
    import pandas as pd

    seen = pd.concat(frames, ignore_index=True)
    host_ts = np.sort(seen.loc[seen["metric"] == "cpu_percent", "ts_ns"].unique())
    assert len(host_ts) == cursor == st["samples"]
    cpu = window[window["metric"] == "cpu_percent"]
    assert cpu["ts_ns"].nunique() == len(cpu) == st["samples"]
    # the destroyed instance's rows stop where the new ring starts; the added GPU's start there
    gi2 = window[window["metric"] == "memory_used_bytes.gi2"]["ts_ns"]
    gpu2 = window[window["device"] == 2]["ts_ns"]
    assert len(gi2) and len(gpu2) and gi2.max() < gpu2.min()
    assert window[(window["metric"] == "memory_used_bytes.gi1")]["value"].notna().all()


def test_layout_change_in_words() -> None:
    a = (("G0", None), ("G1", ((1, 0, "M1"), (2, 0, "M2"))))
    assert layout_change(a, (("G0", None), ("G1", ((1, 0, "M1"),)))) == "GPU 1: 2 -> 1 MIG devices"
    assert layout_change(a, (("G0", None), ("G1", None))) == "GPU 1: MIG disabled"
    assert layout_change(a, (("G0", ()), *a[1:])) == "GPU 0: MIG enabled"
    assert layout_change(a, (*a, ("G2", None))) == "1 GPU added"
    assert layout_change(a, a[1:]) == "1 GPU removed"
    assert layout_change(a, (("G0", None), ("G1", ((1, 0, "M1"), (3, 0, "M3"))))) == "GPU 1: MIG reconfigured"
    assert layout_change(a, a[::-1]) == "reordered" and layout_change(None, a) == "the layout was not known"
