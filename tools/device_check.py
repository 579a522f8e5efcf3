"""Everything a session lent a GPU machine should run there, in one call, within its budget.

Usage (on the GPU machine, from the repository root, after the carried wheels are installed; the exact ``run``
command is in ``docs/device-check.md``): ``python3 tools/device_check.py --out $OUT --site /tmp/site [--budget-s 420]``

Steps, most important first, each in its own process with a time limit taken from what is left of the budget
(a step that does not fit is reported as not run):

1. ``env``: GPU, driver, Python packages.
2. ``gpu tests``: ``pytest -m gpu`` on ``tests/test_nvml.py``, ``tests/test_nvml_mig.py`` and
   ``tests/test_gpu_real.py`` (real NVML and GPM, the GPUs' layout and MIG state, CUDA kernels on the host's
   clock, samples lined up with kernels, the daemon on real NVML, the system unit, GPUs found when the hidden
   NVML library comes back).
3. ``overhead``: ``bench/overhead.py`` (cost per NVML call and GPM sample, sampler CPU on real GPUs).
4. ``cuda samples``: ``tools/make_cuda_samples.py`` (a real ``%%aon_profile`` bundle and two batch sizes);
   ``sample_traces/cuda`` comes back as ``cuda_samples.tar.gz``.
5. ``alignment``: ``sample_alignment`` of that bundle's GPU samples against its kernels.
6. ``daemon``: ``bench/daemon.py --gpus real`` (the daemon's CPU and memory on real NVML).
7. ``models``: ``bench/gpu_models.py`` (GEMM efficiency, a decode step, calibration across batch sizes).

Writes ``report.md`` (every step's command, time, exit status and output) and ``cuda_samples.tar.gz`` under
``--out``. Run without a GPU it still runs every step; those that need one say so.
"""

from __future__ import annotations

import argparse
import os
import site
import subprocess
import sys
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PTH = Path(site.getsitepackages()[0]) / "aonkit-device-check.pth"

ALIGN = """
import aonkit
from aonkit.analysis.sample_align import sample_alignment
t = aonkit.load("sample_traces/cuda/profile")
print(len(t.kernels), "kernels;", len(t.samples), "samples:", sorted(map(str, t.samples["metric"].unique())))
print(sample_alignment(t).to_string())
"""

PYTEST = [sys.executable, "-m", "pytest", "-o", "addopts=-ra --strict-markers", "-p", "no:cacheprovider", "-q",
          "-rA", "-m", "gpu", "tests/test_nvml.py", "tests/test_nvml_mig.py", "tests/test_gpu_real.py",
          "tests/test_daemon_system_unit.py", "tests/test_daemon_gpus_later.py"]  # fmt: skip

STEPS: list[tuple[str, list[str], int]] = [
    ("env", [sys.executable, "-c", "import aonkit, aonkit.magic, bokeh, numba, numpy, pandas, pyarrow, pynvml; "
             "print('aonkit', aonkit.__version__, '| bokeh', bokeh.__version__, '| numba', numba.__version__, "
             "'| numpy', numpy.__version__, '| pandas', pandas.__version__, '| pyarrow', pyarrow.__version__)"], 60),
    ("gpu tests", PYTEST, 240),
    ("overhead", [sys.executable, "bench/overhead.py", "--seconds", "5", "--repeat", "0", "--host-pairs", "1"], 150),
    ("cuda samples", [sys.executable, "tools/make_cuda_samples.py"], 240),
    ("alignment", [sys.executable, "-c", ALIGN], 90),
    ("daemon", [sys.executable, "bench/daemon.py", "--gpus", "real", "--seconds", "15", "--readers", "4",
                "--trace-repeats", "0"], 240),
    ("models", [sys.executable, "bench/gpu_models.py"], 240),
]  # fmt: skip


def paths_for_children(wheels: Path | None) -> dict[str, str]:
    """Environment for the steps: the repository and the carried wheels importable in every child process.

    With ``wheels`` (the GPU machine's set-up: ``--site /tmp/site``), a ``.pth`` file in the interpreter's
    site-packages also reaches the children that set ``PYTHONPATH`` themselves (the daemon tests do); where that
    directory is read-only, ``PYTHONPATH`` carries them. Without it nothing is written outside the repository.
    """
    extra = [str(ROOT)] + ([str(wheels)] if wheels is not None else [])
    if wheels is not None:
        try:
            PTH.write_text("\n".join(extra) + "\n")
        except OSError as exc:
            print(f"(no .pth: {exc}; PYTHONPATH only)")
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join(extra + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return env


def nvidia_smi() -> str:
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.max.sm",
                               "--format=csv"], capture_output=True, text=True, timeout=30).stdout  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"nvidia-smi: {exc}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp/device-check")))
    ap.add_argument("--budget-s", type=float, default=420.0, help="wall time for all steps together")
    ap.add_argument("--only", default="", help="comma-separated step names (default: all)")
    ap.add_argument("--site", type=Path, help="where the carried wheels were installed (pip --target)")
    ap.add_argument("--commit", default="", help="the commit checked (the copy on the GPU machine has no .git)")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    os.chdir(ROOT)
    env = paths_for_children(args.site)
    deadline = time.monotonic() + args.budget_s
    only = {s.strip() for s in args.only.split(",") if s.strip()}
    report = args.out / "report.md"
    with report.open("w") as out:
        commit = args.commit or subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                               text=True).stdout.strip()  # fmt: skip
        smi = nvidia_smi().rstrip("\n")
        out.write(f"# device check, {time.strftime('%Y-%m-%d %H:%M:%S %Z')}, commit {commit or '?'}\n\n"
                  f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}\n\n```\n{smi}\n```\n")  # fmt: skip
        for name, cmd, limit in STEPS:
            if only and name not in only:
                continue
            left = deadline - time.monotonic()
            out.write(f"\n## {name}\n\n`{' '.join(cmd) if len(' '.join(cmd)) < 200 else cmd[:3]}`\n\n")
            if left < 15:
                out.write(f"not run: {left:.0f} s of the budget left\n")
                continue
            t0 = time.monotonic()
            try:
                r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=min(limit, left))
                status, text = f"exit {r.returncode}", r.stdout + r.stderr
            except subprocess.TimeoutExpired as exc:
                status = f"stopped at its limit ({min(limit, left):.0f} s)"
                text = (exc.stdout or b"").decode(errors="replace") + (exc.stderr or b"").decode(errors="replace")
            out.write(f"{status}, {time.monotonic() - t0:.1f} s\n\n```\n{text[-20000:]}\n```\n")
            out.flush()
            print(f"{name}: {status}, {time.monotonic() - t0:.1f} s", flush=True)
    if args.site is not None:
        PTH.unlink(missing_ok=True)
    samples = ROOT / "sample_traces" / "cuda"
    if samples.is_dir():
        with tarfile.open(args.out / "cuda_samples.tar.gz", "w:gz") as tar:
            tar.add(samples, arcname="cuda")
    print(f"report: {report}")


if __name__ == "__main__":
    main()
