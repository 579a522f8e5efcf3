"""A fake ``libnvidia-ml.so.1`` built from ``fake_nvml.c``: nvidia-ml-py's real ctypes code over simulated GPUs.

The Python fake (:mod:`tests.fake_nvml`) stands in for pynvml itself, so the binding's own code (its structs, its
argument conversion, its cost per call) never runs without a GPU. This library stands in one level lower, for the
driver's library: a process that finds it first on ``LD_LIBRARY_PATH`` runs ``import pynvml`` and the sampler
unchanged. :func:`build` compiles it once per source (a C compiler is needed; callers skip without one) and
:func:`environ` gives a child process's environment. Its knobs are the ``AONKIT_FAKE_NVML_*`` variables listed at
the top of ``fake_nvml.c``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

SOURCE = Path(__file__).with_name("fake_nvml.c")
SONAME = "libnvidia-ml.so.1"


class NoCompiler(RuntimeError):
    """No C compiler here, or it failed: the message says which."""


def build() -> Path:
    """The directory holding the built ``libnvidia-ml.so.1`` (compiled on first use, then reused).

    Raises
    ------
    NoCompiler
        Without ``cc``/``gcc``, or when compiling fails (the compiler's message).
    """
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if cc is None:
        raise NoCompiler("no C compiler (cc or gcc) to build the fake libnvidia-ml")
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16]
    out = Path(tempfile.gettempdir()) / f"aonkit-fake-libnvml-{os.getuid()}-{digest}"
    lib = out / SONAME
    if lib.exists():
        return out
    out.mkdir(mode=0o700, exist_ok=True)
    tmp = out / f".{SONAME}.{os.getpid()}"
    cmd = [cc, "-O2", "-shared", "-fPIC", f"-Wl,-soname,{SONAME}", "-o", str(tmp), str(SOURCE)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise NoCompiler(f"{cc} failed on {SOURCE.name}: {done.stderr.strip()[:500]}")
    os.replace(tmp, lib)  # atomic: a concurrent build sees the whole file or none
    return out


def environ(gpus: int = 8, base: dict[str, str] | None = None, **knobs: object) -> dict[str, str]:
    """A child's environment whose ``import pynvml`` loads the fake with ``gpus`` GPUs.

    ``knobs``: ``hopper=0``, ``nvlinks=2``, ``lost_after=5``, ``processes="123:1048576"``, ``call_ns=20000``,
    ``flaky="clock:5:3"``, ``no_driver=1``, ``driver_file="/path"``, ``upgrade_file="/path"`` become
    ``AONKIT_FAKE_NVML_<NAME>``.
    """
    env = dict(os.environ if base is None else base)
    env.pop("AONKIT_FAKE_NVML", None)  # the Python fake would take precedence in the daemon
    lib_dir = str(build())
    env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (lib_dir, env.get("LD_LIBRARY_PATH", "")) if p)
    env["AONKIT_FAKE_NVML_GPUS"] = str(gpus)
    for name, value in knobs.items():
        env[f"AONKIT_FAKE_NVML_{name.upper()}"] = str(value)
    return env
