"""Import rules: data flows one way and ``import aonkit`` stays light."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from aonkit.live import store

PKG = Path(__file__).resolve().parent.parent / "aonkit"
# a module may import only from its own layer or lower ones
LAYERS = [
    "_kernels",
    "errors|_config|schema|units|_filecheck|_shipping|_fresh|_whatif_parts",
    "trace|trace_args|event_text|arg_text|traceset|cache|_cache_read|_cache_text|_cache_source|jobcheck|sources|lazyjob|lazyset",
    "analysis|model|timeline.index|timeline.index_standin|timeline.tiles|timeline.detail|live",
    "report|views|timeline",  # the timeline's views, and its __init__ (which re-exports them lazily)
    "widgets",
    "cli|_cli_errors|_cli_profile|_cli_steps|_cli_whatif|demo|warmup|profiling|magic|__init__",  # the shells
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
            # (sys, threading, time: the compile notice, _notice.py, which Numba's event hook needs; hashlib, functools:
            # _stamp.py, the cache stamp over every kernel module; stat, tempfile: _cache_place.py, a private folder
            # for that cache)
            allowed = {"numpy", "numba", "llvmlite", "hashlib", "functools", "os", "sys", "threading", "time",
                       "stat", "tempfile", "__future__", "_kernels"}
            assert mod.split(".")[0] in allowed, f"{path.name}:{line} {mod}"


def test_import_aonkit_is_light() -> None:
    code = (
        "import sys, aonkit\n"
        "heavy = [m for m in ('numba', 'pandas', 'pyarrow', 'IPython', 'bokeh', 'ipywidgets', 'pynvml')"
        " if m in sys.modules]\n"
        "print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_daemons_sampling_and_writing_never_load_pandas(tmp_path: Path) -> None:
    # pandas is 40 MB of the daemon's RSS and pyarrow.compute 9 MB; the samplers and the Parquet writer need neither
    code = (
        "import sys, time, numpy as np\n"
        "from pathlib import Path\n"
        "from aonkit.live import daemon, store\n"
        "from aonkit.sources.samplers import HostSampler\n"
        "h = HostSampler(0.1, capacity=1)\n"
        "v = np.array([h.sample() for _ in range(3)], dtype=np.float64)\n"
        "ts = time.time_ns() + np.arange(3) * 10**8\n"
        "out = store.write_segment(Path(sys.argv[1]), 'node', ts, v, h.channels)\n"
        "print(len(out), 'pandas' in sys.modules, 'pyarrow.compute' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["1", "False", "False"]
    frame, _ = store.read_window(tmp_path, "node", 0, 2**62)  # and a reader gets the samples back
    assert len(frame) == 3 * 3 and set(frame["device"]) == {-1}


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


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _top_level_imports(path: Path) -> set[str]:
    """aonkit modules imported at module level (imports inside functions are deferred on purpose)."""
    tree = ast.parse(path.read_text())
    pkg = path.parent.relative_to(PKG).parts
    out = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg[: len(pkg) - (node.level - 1)]
                mod = ".".join((*base, *(node.module.split(".") if node.module else ())))
            elif (node.module or "").startswith("aonkit"):
                mod = node.module.removeprefix("aonkit").lstrip(".")
            else:
                continue
            for alias in node.names:  # `from . import x` imports the module x
                sub = f"{mod}.{alias.name}".lstrip(".")
                out.add(sub if (PKG / Path(*sub.split("."))).with_suffix(".py").exists() else mod)
        elif isinstance(node, ast.Import):
            out |= {a.name.removeprefix("aonkit.") for a in node.names if a.name.startswith("aonkit.")}
    return {m for m in out if m}


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Import cycles of a module graph, except a package's ``__init__`` importing its own submodules."""
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(m: str, stack: list[str]) -> None:
        state[m] = 1
        for d in sorted(graph.get(m, ())):
            if state.get(d) == 1:
                cycles.append(stack[stack.index(d):] + [d])
            elif d not in state:
                visit(d, stack + [d])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    return [c for c in cycles if not all(x == c[0] or x.startswith(c[0] + ".") or c[0].startswith(x + ".")
                                         for x in c)]


def test_cycle_finder_can_fail() -> None:
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
    assert find_cycles({"pkg": {"pkg.x"}, "pkg.x": {"pkg"}}) == []


def test_no_import_cycles() -> None:
    graph = {_module_name(p): _top_level_imports(p) for p in PKG.rglob("*.py")}
    graph = {m: {d for d in deps if d in graph and d != m} for m, deps in graph.items()}
    assert sum(map(len, graph.values())) > 100  # the graph was read
    assert find_cycles(graph) == []
