"""Differential test of ``aonkit hta-report`` against the real Holistic Trace Analysis 0.5.0.

Usage::

    python tools/hta_diff.py --setup                 # HTA 0.5.0 in its own venv (bench/out/hta-venv)
    python tools/hta_diff.py --seeds 0:1000          # generate, run both, diff every CSV, print a count
    python tools/hta_diff.py --seeds 0:120 --save-goldens tests/golden_hta   # the goldens CI checks
    python tools/hta_diff.py --traces ../shared/traces/tracelens/h100/*.json.gz  # real files, one case each

Traces come from ``tests/adversarial.py`` (seeded, the same on every machine).
HTA runs in its own venv (``holistictraceanalysis==0.5.0``, ``pandas<3``,
``numpy<2.3``, as the shared goldens were made) through ``tools/hta_run.py``;
aonkit runs here. Each seed is one case: it agrees when every CSV HTA wrote
equals aonkit's (``tests/hta_csv.py``); calls HTA cannot answer are counted
apart.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.adversarial import adversarial_job  # noqa: E402
from tests.hta_csv import compare_dir, hta_errors  # noqa: E402

VENV = ROOT / "bench" / "out" / "hta-venv"
PINS = ["holistictraceanalysis==0.5.0", "pandas<3", "numpy<2.3"]


def setup(venv: Path) -> Path:
    """Create HTA's venv (once) and return its python."""
    py = venv / "bin" / "python"
    if not py.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", *PINS], check=True)
    return py


def write_job(seed: int, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for rank, doc in adversarial_job(seed).items():
        (folder / f"rank{rank}.json").write_text(json.dumps(doc))


def aonkit_report(folder: Path) -> tuple[Path, dict]:
    import aonkit
    from aonkit.report.hta_report import write_hta_report

    files = sorted(folder.glob("rank*.json*"))
    traces = {int(p.name.split(".")[0].removeprefix("rank")): aonkit.load(p) for p in files}
    out = folder / "aonkit"
    write_hta_report(traces, out)
    return out, traces


# files whose values HTA takes after numpy's unstable sort: aonkit's two extreme tie orders bound them
TIED = {"queue_length_summary.csv": (("launch_first", "start_first"),
                                     ["count", "mean", "min", "25%", "50%", "75%", "max"]),
        "memory_bw_summary.csv": (("down_first", "up_first"), ["count", "max"])}  # fmt: skip


def explained_by_ties(name: str, traces: dict, want: Path) -> bool:
    """Whether HTA's ``name`` lies in the envelope of aonkit's extreme tie orders (``tests/hta_csv.tie_envelope``)."""
    import pandas as pd

    from aonkit.analysis import hta_compat, hta_counters
    from tests.hta_csv import tie_envelope

    if name not in TIED:
        return False
    orders, bounded = TIED[name]
    fn = hta_counters.queue_length_summary if name.startswith("queue") else hta_counters.memory_bw_summary
    frames = hta_compat.hta_frames(traces)
    lo, hi = (fn(frames, ties=o) for o in orders)
    try:
        w = pd.read_csv(want / name, header=[0, 1], index_col=[0, 1])
    except (ValueError, IndexError):
        return False
    w.columns = [c[1] for c in w.columns]
    return not tie_envelope(w, lo, hi, bounded)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--setup", action="store_true", help="create HTA's venv and stop")
    ap.add_argument("--seeds", default="0:100", help="A:B, the seeds A to B-1")
    ap.add_argument("--work", type=Path, default=ROOT / "bench" / "out" / "hta_diff")
    ap.add_argument("--hta-python", type=Path, help="a python with HTA 0.5.0 (default: the venv of --setup)")
    ap.add_argument("--jobs", type=int, default=2, help="HTA processes at once")
    ap.add_argument("--save-goldens", type=Path, help="copy HTA's CSVs of these seeds here")
    ap.add_argument("--show", type=int, default=10, help="differences printed per failing seed")
    ap.add_argument("--traces", nargs="+", type=Path, help="real trace files instead of seeds (one rank each)")
    a = ap.parse_args()
    py = a.hta_python or setup(VENV)
    if a.setup:
        return
    t0 = time.perf_counter()
    if a.traces:  # each file a one-rank case, linked (not copied) into its folder
        seeds = list(range(len(a.traces)))
        folders = [a.work / f"trace_{i:03d}" for i in seeds]
        for path, f in zip(a.traces, folders):
            shutil.rmtree(f, ignore_errors=True)
            f.mkdir(parents=True)
            suffix = ".json.gz" if path.name.endswith(".gz") else ".json"
            (f / f"rank0{suffix}").symlink_to(path.resolve())
    else:
        lo, hi = (int(x) for x in a.seeds.split(":"))
        seeds = list(range(lo, hi))
        folders = [a.work / f"seed_{s:05d}" for s in seeds]
        for s, f in zip(seeds, folders):
            shutil.rmtree(f, ignore_errors=True)
            write_job(s, f)
    chunks = [folders[i :: a.jobs] for i in range(a.jobs)]
    log = (a.work / "hta_run.log").open("w")  # HTA warns a lot on stderr
    procs = [subprocess.Popen([str(py), str(ROOT / "tools" / "hta_run.py"), *map(str, c)], stderr=log)
             for c in chunks if c]  # fmt: skip
    if any(p.wait() for p in procs):
        raise SystemExit("hta_run.py failed")
    t_hta = time.perf_counter() - t0
    agree, failing, unanswered, tied = 0, Counter(), Counter(), Counter()
    for s, f in zip(seeds, folders):
        got, traces = aonkit_report(f)
        diffs = compare_dir(got, f / "hta")
        for name in {d.split(" ")[0].rstrip(":") for d in diffs}:
            if explained_by_ties(name, traces, f / "hta"):
                tied[name] += 1
                diffs = [d for d in diffs if d.split(" ")[0].rstrip(":") != name]
        for call in hta_errors(f / "hta"):
            unanswered[call] += 1
        if diffs:
            failing.update({d.split(" ")[0] for d in diffs})
            print(f"{a.traces[s] if a.traces else f'seed {s}'}: {len(diffs)} differences")
            for d in diffs[: a.show]:
                print("   ", d)
        else:
            agree += 1
        if a.save_goldens:
            dest = a.save_goldens / f"seed_{s:05d}"
            shutil.rmtree(dest, ignore_errors=True)
            dest.mkdir(parents=True)
            for csv in (f / "hta").glob("*.csv"):
                shutil.copy(csv, dest / csv.name)
            (dest / "_errors.json").write_text(json.dumps(hta_errors(f / "hta"), indent=1, sort_keys=True) + "\n")
    what = "traces" if a.traces else "seeds"
    print(f"\n{agree} of {len(seeds)} {what} agree on every CSV HTA wrote ({time.perf_counter() - t0:.0f} s, "
          f"HTA {t_hta:.0f} s)")  # fmt: skip
    if failing:
        print("files with differences (seeds):", dict(failing.most_common()))
    if tied:
        print("differences inside the envelope of tie orders (HTA's unstable sort; counted as agreeing):",
              dict(tied.most_common()))  # fmt: skip
    if unanswered:
        print("HTA could not answer (seeds):", dict(unanswered.most_common()))


if __name__ == "__main__":
    main()
