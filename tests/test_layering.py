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
    "errors|_config|schema|units|_filecheck",
    "trace|traceset|cache|_cache_read|jobcheck|sources",
    "analysis|model|timeline.index|timeline.tiles|timeline.detail",
    "report|views|timeline",  # the timeline's views, and its __init__ (which re-exports them lazily)
    "widgets",
    "cli|_cli_errors|demo|__init__",  # the shells: anything below
]


def _layer(module: str) -> int | None:
    """Layer of a module: a dotted entry (``timeline.index``) before its package's (``timeline``)."""
    parts = module.removesuffix(".__init__").split(".")
    for k in range(len(parts), 0, -1):
        prefix = ".".join(parts[:k])
        for i, names in enumerate(LAYERS):
            if prefix in names.split("|"):
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


def test_every_module_has_a_layer() -> None:
    loose = [str(p.relative_to(PKG)) for p in PKG.rglob("*.py")
             if _layer(".".join(p.relative_to(PKG).with_suffix("").parts)) is None]
    assert not loose, f"add these modules to LAYERS: {loose}"


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


def test_no_module_imports_another_modules_private_name() -> None:
    # a private name (``_x``) is its module's own business: shared helpers get a public name in a shared module
    bad = []
    for path in PKG.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level > 0:
                base = path.parent.relative_to(PKG).parts[: len(path.parent.relative_to(PKG).parts) - (node.level - 1)]
                src = PKG.joinpath(*base, *(node.module or "").split(".")) if node.module else PKG.joinpath(*base)
            elif (node.module or "").startswith("aonkit"):
                src = PKG.parent.joinpath(*node.module.split("."))
            else:
                continue
            for alias in node.names:
                private = alias.name.startswith("_") and alias.name != "__version__"
                is_module = (src / f"{alias.name}.py").exists() or (src / alias.name).is_dir()
                if private and not is_module:
                    bad.append(f"{path.relative_to(PKG)}:{node.lineno} imports {alias.name} from {node.module}")
    assert not bad, bad


def test_the_timeline_is_used_through_its_package() -> None:
    # views, widgets, the report and the shells import the timeline's public names, not its modules
    bad = []
    for path in PKG.rglob("*.py"):
        if (PKG / "timeline") in path.parents:
            continue
        for mod, line in _imports(path):
            mod = mod.removeprefix("aonkit.")
            if mod.startswith("timeline."):
                bad.append(f"{path.relative_to(PKG)}:{line} imports {mod}")
    assert not bad, bad
