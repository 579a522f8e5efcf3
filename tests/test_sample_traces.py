"""``sample_traces/`` is what ``tools/make_sample_traces.py`` makes: regenerated here, it matches what is committed."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest

from .conftest import ROOT, SAMPLE_TRACES

TABLES = ["CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS", "GPU_METRICS", "StringIds"]


def _rows(path: Path, table: str) -> list[tuple]:
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as con:
        return con.execute(f"SELECT * FROM {table} ORDER BY rowid").fetchall()


@pytest.fixture(scope="module")
def regenerated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not (SAMPLE_TRACES / "README.md").is_file():
        pytest.skip("sample_traces/ is not in this checkout")
    out = tmp_path_factory.mktemp("samples")
    # the CPU runs are not remade (its timings differ per run; --skip-cpu keeps the file there): the committed one
    for name in ("README.md", "cpu_mlp.pt.trace.json.gz", "cpu_generate.pt.trace.json.gz"):
        (out / name).write_bytes((SAMPLE_TRACES / name).read_bytes())
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "make_sample_traces.py"), "--skip-cpu", "--out",
                           str(out)], capture_output=True, text=True, timeout=600, cwd=ROOT)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


@pytest.mark.parametrize("name", ["gpu_synthetic_rank0.json.gz", "gpu_synthetic_rank1.json.gz"])
def test_the_seeded_gpu_samples_are_byte_for_byte_what_the_script_makes(regenerated: Path, name: str) -> None:
    assert (regenerated / name).read_bytes() == (SAMPLE_TRACES / name).read_bytes()


def test_the_nsys_sample_holds_what_the_script_writes(regenerated: Path) -> None:
    new, old = regenerated / "nsys" / "synthetic_2proc.sqlite", SAMPLE_TRACES / "nsys" / "synthetic_2proc.sqlite"
    for table in TABLES:  # the rows, not the file's bytes (SQLite's page layout may differ between versions)
        assert _rows(new, table) == _rows(old, table), table


def test_the_readme_describes_the_files_as_they_are(regenerated: Path) -> None:
    import re

    def text(p: Path) -> str:  # the SQLite file's byte size depends on the SQLite version that wrote it
        return re.sub(r"\| [0-9,]+ \(SQLite\) \|", "| (size) (SQLite) |", p.read_text())

    assert text(regenerated / "README.md") == text(SAMPLE_TRACES / "README.md")
