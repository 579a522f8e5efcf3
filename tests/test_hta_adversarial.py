"""aonkit's ``hta-report`` against HTA 0.5.0 itself on seeded adversarial traces (committed goldens).

The goldens in ``tests/golden_hta/seed_NNNNN/`` are the CSVs the real HTA
0.5.0 wrote for ``tests/adversarial.py``'s job of that seed (``python
tools/hta_diff.py --seeds 0:120 --save-goldens tests/golden_hta``; see the
README there). The traces are made again here from the seed, so CI checks
every CSV against HTA without installing HTA. ``_errors.json`` lists the
calls HTA could not answer for that seed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import aonkit
from aonkit.report.hta_report import write_hta_report

from .adversarial import adversarial_job
from .hta_csv import compare_dir, hta_errors

GOLDEN = Path(__file__).parent / "golden_hta"
SEEDS = sorted(p for p in GOLDEN.glob("seed_*") if p.is_dir())


def test_goldens_are_there() -> None:
    assert len(SEEDS) >= 100, "the committed HTA goldens are missing"


@pytest.mark.parametrize("golden", SEEDS, ids=[p.name for p in SEEDS])
def test_hta_report_equals_hta(golden: Path, tmp_path: Path) -> None:
    seed = int(golden.name.removeprefix("seed_"))
    traces = {}
    for rank, doc in adversarial_job(seed).items():
        path = tmp_path / f"rank{rank}.json"
        path.write_text(json.dumps(doc))
        traces[rank] = aonkit.load(path)
    write_hta_report(traces, tmp_path / "aonkit")
    assert not compare_dir(tmp_path / "aonkit", golden)
    # every file HTA wrote was compared; a missing one is a call HTA could not answer
    answered = {p.stem for p in golden.glob("*.csv")}
    assert answered, f"HTA answered nothing for seed {seed}: {hta_errors(golden)}"


def test_the_comparison_sees_a_changed_number(tmp_path: Path) -> None:
    golden = SEEDS[0]
    for csv in golden.glob("*.csv"):
        (tmp_path / csv.name).write_text(csv.read_text())
    assert not compare_dir(tmp_path, golden)
    path = tmp_path / "temporal_breakdown.csv"
    lines = path.read_text().splitlines()
    cells = lines[1].split(",")
    cells[2] = str(float(cells[2]) + 1)  # one µs more idle time
    path.write_text("\n".join([lines[0], ",".join(cells), *lines[2:]]) + "\n")
    head, was = lines[0].split(",")[2], lines[1].split(",")[2]
    want = f"temporal_breakdown.csv row 1 col 2 ({head}): aonkit {cells[2]!r}, HTA {was!r}"
    assert compare_dir(tmp_path, golden) == [want]


def test_the_seeds_cover_the_adversarial_shapes() -> None:
    """The committed seeds hold each shape the generator promises, at least once."""
    seen: dict[str, bool] = dict.fromkeys(
        ["two ranks", "two devices", "ROCm", "float µs", "zero length", "sub-µs", "overlap on a stream", "graph launch",
         "driver repeats a correlation", "launched before the window", "GPU annotation", "sync row", "memset",
         "several steps", "sparse correlation"], False)  # fmt: skip
    for golden in SEEDS:
        job = adversarial_job(int(golden.name.removeprefix("seed_")))
        seen["two ranks"] |= len(job) > 1
        for doc in job.values():
            ev = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
            gpu = [e for e in ev if e["cat"] in ("kernel", "gpu_memcpy", "gpu_memset")]
            cpu_corr = [e["args"]["correlation"] for e in ev if e["cat"] in ("cuda_runtime", "cuda_driver")]
            seen["two devices"] |= len({e["args"]["device"] for e in gpu}) > 1
            seen["ROCm"] |= any(e["name"].startswith("hip") for e in ev)
            seen["float µs"] |= any(isinstance(e["ts"], float) and e["ts"] % 1 for e in ev)
            seen["zero length"] |= any(e["dur"] == 0 for e in gpu)
            seen["sub-µs"] |= any(0 < e["dur"] < 1 for e in gpu)
            by_stream: dict[int, list] = {}
            for e in gpu:
                by_stream.setdefault(e["args"]["stream"], []).append((e["ts"], e["ts"] + e["dur"]))
            seen["overlap on a stream"] |= any(b[0] < a[1] for v in by_stream.values()
                                               for a, b in zip(sorted(v), sorted(v)[1:]))  # fmt: skip
            gpu_corr = [e["args"]["correlation"] for e in gpu]
            seen["graph launch"] |= len(gpu_corr) > len(set(gpu_corr))
            seen["driver repeats a correlation"] |= len(cpu_corr) > len(set(cpu_corr))
            seen["launched before the window"] |= bool(set(gpu_corr) - set(cpu_corr))
            seen["GPU annotation"] |= any(e["cat"] == "gpu_user_annotation" for e in ev)
            seen["sync row"] |= any(e["cat"] == "cuda_sync" for e in ev)
            seen["memset"] |= any(e["cat"] == "gpu_memset" for e in ev)
            seen["several steps"] |= sum(e["name"].startswith("ProfilerStep") for e in ev) > 1
            seen["sparse correlation"] |= max(cpu_corr, default=0) > 2**32
    assert all(seen.values()), [k for k, v in seen.items() if not v]
