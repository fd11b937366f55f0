"""The package's layers, read from its own imports: library < serving < lab < cli.

The library (everything outside ``serving/``, ``lab/`` and ``cli/``) is what an application
imports; ``serving`` starts vLLM servers; ``lab`` is the benchmark and the Arbitrage router's
labelling and training; ``cli`` is the ``specreason`` command. A layer imports only the layers
below it, and no module imports itself back through others (lazy imports included).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "langchain_specreason"
LAYERS = {"library": 0, "serving": 1, "lab": 2, "cli": 3}


def _module(path: Path) -> str:
    parts = ["langchain_specreason", *path.relative_to(PACKAGE).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _layer(module: str) -> str:
    top = module.split(".")[1] if module.count(".") else ""
    return top if top in LAYERS else "library"


def _imports(path: Path) -> set[str]:
    """Package modules that ``path`` imports, anywhere in the file."""
    module = _module(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            names = [f"{target}.{alias.name}" for alias in node.names]
            found.update(n for n in names if n in MODULES)
            if target in MODULES:
                found.add(target)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in MODULES)
    found.discard(module)
    return found


FILES = sorted(PACKAGE.rglob("*.py"))
MODULES = {_module(path) for path in FILES}
GRAPH = {_module(path): _imports(path) for path in FILES}


def test_the_package_has_the_four_layers() -> None:
    assert {_layer(module) for module in MODULES} == set(LAYERS)


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_imports_go_downward_only(module: str) -> None:
    upward = sorted(
        target for target in GRAPH[module] if LAYERS[_layer(target)] > LAYERS[_layer(module)]
    )
    assert upward == [], f"{module} ({_layer(module)}) imports a higher layer: {upward}"


def test_no_import_circle() -> None:
    # Depth-first search over module -> imported modules (a package counts as its
    # ``__init__``); an edge back to a module on the current path is a circle.
    circles: list[list[str]] = []
    state: dict[str, int] = {}

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in sorted(GRAPH[module]):
            if state.get(target) == 1:
                circles.append([*path[path.index(target) :], target])
            elif target not in state:
                visit(target, [*path, target])
        state[module] = 2

    for module in sorted(GRAPH):
        if module not in state:
            visit(module, [module])
    assert circles == []


def _map_tree() -> dict[str, set[str]]:
    """CONTRIBUTING.md's architecture map: folder (relative to the package) -> entries it lists."""
    text = (PACKAGE.parent / "CONTRIBUTING.md").read_text()
    block = text.split("\n## Architecture\n", 1)[1].split("```", 2)[1]
    tree: dict[str, set[str]] = {}
    path: list[str] = []
    for line in block.splitlines():
        name = line.strip().split(" ")[0] if line.strip() else ""
        depth = (len(line) - len(line.lstrip(" "))) // 2
        if depth == 0 or not (name.endswith(".py") or name.endswith("/")):
            continue  # the package line itself, repo folders, continuation lines
        path = path[: depth - 1]
        tree.setdefault("/".join(path), set()).add(name)
        if name.endswith("/"):
            path.append(name.rstrip("/"))
    return tree


def _real(folder: str) -> set[str]:
    here = PACKAGE / folder if folder else PACKAGE
    return {
        p.name + ("/" if p.is_dir() else "")
        for p in here.iterdir()
        if p.name not in ("__init__.py", "__main__.py", "__pycache__", "py.typed")
        and (p.is_dir() or p.suffix == ".py")
    }


def test_the_contributing_architecture_map_matches_the_package():
    tree = _map_tree()
    assert tree[""] == _real("")  # every top-level module and folder, nothing that is gone
    for folder, listed in tree.items():
        assert listed == _real(folder), f"CONTRIBUTING.md's map of {folder or 'the package'}"
