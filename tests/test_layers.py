"""The layers only point down and never form a circle.

Bottom to top: ground -> transforms -> warehouse -> models -> flows -> CLI. Every import in the
installed package counts, those inside functions and `TYPE_CHECKING` blocks included: a lazy
import is still a dependency, and a cycle hidden in a function body is still a cycle.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# module prefix -> (folder, layer); the folders stay at the top of the repository (pyproject's
# package-dir), the modules live under the one `metapilot` namespace.
PACKAGES: dict[str, tuple[str, int]] = {
    "metapilot.ground": ("metapilot/ground", 0),
    "metapilot.transforms": ("transforms", 1),
    "metapilot.warehouse": ("warehouse", 2),
    "metapilot.models": ("models", 3),
    "metapilot.flows": ("flows", 4),
    "metapilot.cli": ("metapilot/cli", 5),
}
LAYER_NAMES = ["ground", "transforms", "warehouse", "models", "flows", "cli"]
BARE = ("models", "flows", "transforms", "warehouse")


def _modules() -> dict[str, Path]:
    out = {"metapilot": REPO / "metapilot" / "__init__.py"}
    for prefix, (folder, _) in PACKAGES.items():
        for path in sorted((REPO / folder).rglob("*.py")):
            rel = path.relative_to(REPO / folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            out[".".join([prefix, *parts])] = path
    return out


def _layer(module: str) -> int:
    if module == "metapilot":
        return 0
    for prefix, (_, layer) in PACKAGES.items():
        if module == prefix or module.startswith(prefix + "."):
            return layer
    raise AssertionError(f"{module} belongs to no layer")


def _imports(module: str, path: Path, known: set[str]) -> set[str]:
    """The project modules `module` imports, resolved to modules where a name is one."""
    is_pkg = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".") if is_pkg else module.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name and name != module:
                found.add(name)
    return found


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    known = set(mods)
    return {m: _imports(m, p, known) for m, p in mods.items()}


def test_every_module_belongs_to_a_layer():
    for m in _modules():
        _layer(m)


def test_imports_only_point_down():
    upward = [
        f"{src} ({LAYER_NAMES[_layer(src)]}) imports {dst} ({LAYER_NAMES[_layer(dst)]})"
        for src, dsts in _graph().items() for dst in sorted(dsts) if _layer(dst) > _layer(src)
    ]
    assert not upward, "imports pointing up a layer:\n" + "\n".join(upward)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_no_import_cycles():
    cycles = _cycles(_graph())
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def _models_package(module: str) -> str | None:
    """'metapilot.models.controller.gate' -> 'controller'; a module directly under models/ is its own package."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[:2] == ["metapilot", "models"] else None


def _package_edges(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    """(importer, imported) pairs of packages under `models/`, every import counted."""
    edges = set()
    for src, dsts in graph.items():
        a = _models_package(src)
        for dst in dsts:
            b = _models_package(dst)
            if a and b and a != b:
                edges.add((a, b))
    return edges


def test_no_two_models_packages_import_each_other():
    """A reader must be able to understand and test each package of `models/` with only those below it."""
    edges = _package_edges(_graph())
    both = sorted({tuple(sorted(e)) for e in edges if (e[1], e[0]) in edges})
    assert not both, "packages under models/ importing each other: " + ", ".join(" <-> ".join(p) for p in both)


def test_the_simulator_imports_no_other_models_package():
    """The simulator is the bottom of `models`: objectives, replays and metrics are its own."""
    up = sorted(b for a, b in _package_edges(_graph()) if a == "simulator")
    assert not up, f"models/simulator imports {up}"


def test_package_edge_finder_sees_both_directions():
    graph = {"metapilot.models.a.x": {"metapilot.models.b.y"}, "metapilot.models.b.y": {"metapilot.models.a.z"},
             "metapilot.models.a.z": set(), "metapilot.models.c": {"metapilot.transforms.w"}}
    assert _package_edges(graph) == {("a", "b"), ("b", "a")}


def test_cycle_finder_finds_cycles():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


@pytest.mark.parametrize("folder", ["tests", "bench", "metapilot", *BARE])
def test_nothing_imports_the_bare_folders(folder):
    """`import models` would pick up whatever `models` is first on the path: only the namespace."""
    bad = []
    for path in sorted((REPO / folder).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            bad += [f"{path.relative_to(REPO)}: {n}" for n in names if n.split(".")[0] in BARE]
    assert not bad, "\n".join(bad)


def test_installed_under_one_namespace(tmp_path):
    """From outside the repository, the layers import as `metapilot.*` and `import models` fails."""
    code = (
        "import importlib.util, metapilot.models.simulator, metapilot.flows, metapilot.cli\n"
        "assert all(importlib.util.find_spec(n) is None for n in ('models', 'flows', 'transforms', 'warehouse'))\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
