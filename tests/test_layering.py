"""Import rules: data flows one way and ``import aonkit`` stays light."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "aonkit"
# a module may import only from its own layer or lower ones
LAYERS = [
    "_kernels",
    "errors|_config|schema|units",
    "trace|traceset|cache|sources",
    "analysis|model",
    "report|views",
    "widgets",
]


def _layer(module: str) -> int | None:
    top = module.split(".")[0]
    for i, names in enumerate(LAYERS):
        if top in names.split("|"):
            return i
    return None


def _imports(path: Path) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text())
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level > 0 and node.module:
            base = path.parent.relative_to(PKG).parts[: len(path.parent.relative_to(PKG).parts) - (node.level - 1)]
            out.append((".".join((*base, node.module)), node.lineno))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append((node.module, node.lineno))
        elif isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names]
    return out


def test_layers_import_only_downwards() -> None:
    bad = []
    for path in PKG.rglob("*.py"):
        own = _layer(".".join(path.relative_to(PKG).with_suffix("").parts))
        if own is None:
            continue
        for mod, line in _imports(path):
            mod = mod.removeprefix("aonkit.")
            target = _layer(mod)
            if target is not None and target > own:
                bad.append(f"{path.relative_to(PKG)}:{line} imports {mod}")
    assert not bad, bad


def test_kernels_import_only_numpy_and_numba() -> None:
    for path in (PKG / "_kernels").glob("*.py"):
        for mod, line in _imports(path):
            assert mod.split(".")[0] in {"numpy", "numba", "os", "__future__", "_kernels"}, f"{path.name}:{line} {mod}"


def test_import_aonkit_is_light() -> None:
    code = (
        "import sys, aonkit\n"
        "heavy = [m for m in ('numba', 'IPython', 'bokeh', 'ipywidgets', 'pynvml') if m in sys.modules]\n"
        "print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
