"""The floor plan of docs/design/architecture.md, enforced: every import in src/bertlab (at the top
of a module, inside a function, or through importlib) runs down a floor or stays inside its own
folder, and no chain of imports comes back to where it started."""
import ast
import os
import re

import pytest

SRC = os.path.join(os.path.dirname(__file__), os.pardir, "src")
DESIGN = os.path.join(os.path.dirname(__file__), os.pardir, "docs", "design", "architecture.md")

# Lowest first. A folder (or top-level module) may import its own modules and anything on a lower
# floor; nothing on its own floor but itself, nothing above.
FLOORS = [
    ("base", ["io", "validate", "progress", "device"]),
    ("core", ["core"]),
    ("models and tokenizers", ["models", "tokenization"]),
    ("formats and data", ["interop", "data"]),
    ("inference", ["inference"]),
    ("training engine", ["training"]),
    ("families", ["pretraining", "finetune", "lm", "translation", "unilm", "word2vec"]),
    ("families built on families", ["distillation"]),
    ("service and notes", ["serve", "notes"]),
    ("public API", ["__init__", "api"]),
    ("commands", ["cli"]),
    ("entry point", ["__main__"]),
]
FLOOR = {part: n for n, (_, parts) in enumerate(FLOORS) for part in parts}


def modules() -> dict:
    """{dotted name: (file, package the module's relative imports start from)}."""
    out = {}
    for folder, _, files in os.walk(os.path.join(SRC, "bertlab")):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                dotted = os.path.relpath(path, SRC)[:-3].replace(os.sep, ".")
                if dotted.endswith(".__init__"):
                    dotted = dotted[: -len(".__init__")]
                    out[dotted] = (path, dotted)
                else:
                    out[dotted] = (path, dotted.rsplit(".", 1)[0])
    return out


MODULES = modules()


def _absolute(package: str, level: int, name: str | None) -> str:
    base = package.split(".")
    base = base[: len(base) - (level - 1)] if level else []
    return ".".join(base + ([name] if name else []))


def _owner(name: str) -> str:
    """The module a dotted name lives in (a name imported from a module is the module)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name


def _dynamic(tree, call: ast.Call, package: str) -> list[str]:
    """The modules an importlib.import_module(name, package) call can reach: a literal name, or the
    relative module names in the module-level dicts (the lazy-export tables it looks names up in)."""
    arg = call.args[0] if call.args else None
    strings = []
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        strings = [arg.value]
    elif isinstance(arg, ast.Subscript):  # a lazy-export table: every module name its dicts hold
        strings = [c.value for node in tree.body if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict)
                   for c in ast.walk(node.value) if isinstance(c, ast.Constant) and isinstance(c.value, str)]
    elif isinstance(arg, ast.JoinedStr):
        return []  # f".{name}": a module of its own package, which never leaves its folder
    out = []
    for s in strings:
        if s.startswith("."):
            level = len(s) - len(s.lstrip("."))
            out.append(_absolute(package, level, s.lstrip(".") or None))
        elif s.startswith("bertlab"):
            out.append(s)
    return out


def imports() -> dict:
    """{module: {module it imports: line}} over every import in src/bertlab, lazy ones included."""
    graph = {}
    for module, (path, package) in MODULES.items():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        edges = {}
        for node in ast.walk(tree):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(package, node.level, node.module) if node.level else (node.module or "")
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                  and node.func.attr == "import_module"):
                targets = _dynamic(tree, node, package)
            for target in targets:
                owner = _owner(target) if target.startswith("bertlab") else ""
                if owner and owner != module:
                    edges.setdefault(owner, node.lineno)
        graph[module] = edges
    return graph


GRAPH = imports()


def part(module: str) -> str:
    """bertlab.lm.job -> "lm"; bertlab.io -> "io"; bertlab -> "__init__"."""
    pieces = module.split(".")
    return pieces[1] if len(pieces) > 1 else "__init__"


def test_every_folder_has_a_floor():
    unplaced = sorted({part(m) for m in MODULES} - set(FLOOR))
    assert not unplaced, f"not on any floor of FLOORS (and docs/design/architecture.md): {unplaced}"


def violations(graph: dict) -> list[str]:
    """Every import of `graph` that does not run down a floor, as "file:line: what (why)"."""
    wrong = []
    for module, edges in graph.items():
        for target, line in edges.items():
            here, there = part(module), part(target)
            if here != there and FLOOR[there] >= FLOOR[here]:
                side = "up" if FLOOR[there] > FLOOR[here] else "sideways"
                where = MODULES[module][0] if module in MODULES else module
                wrong.append(f"{where}:{line}: {module} imports {target} ({side}: "
                             f"{FLOORS[FLOOR[here]][0]} -> {FLOORS[FLOOR[there]][0]})")
    return sorted(wrong)


def test_imports_only_run_down():
    wrong = violations(GRAPH)
    assert not wrong, "imports that do not run down a floor:\n" + "\n".join(wrong)


def test_an_upward_or_sideways_import_is_caught():
    planted = {"bertlab.interop.load": {"bertlab.finetune.tasks": 48},  # up: formats -> families
               "bertlab.lm.job": {"bertlab.translation.job": 3},  # sideways: family -> family
               "bertlab.lm.objective": {"bertlab.training.engine": 5, "bertlab.lm.data": 6}}  # down, own folder
    found = violations(planted)
    assert len(found) == 2 and "(up: formats and data -> families)" in found[0] and "(sideways" in found[1]


def test_no_import_circles():
    index, low, stack, on_stack, circles = {}, {}, [], set(), []

    def visit(v):  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for module in sorted(GRAPH):
        if module not in index:
            visit(module)
    assert not circles, f"modules that import each other (directly or through others): {circles}"


def test_the_checker_sees_what_it_must():
    """The parser finds a lazy import, a relative import two levels up and an importlib table: if it
    missed them, the two tests above could not fail."""
    assert "bertlab.interop.masked_lm" in GRAPH["bertlab.interop.load"]  # inside a function
    assert "bertlab.training.engine" in GRAPH["bertlab.lm.objective"]  # from ..training.engine
    assert "bertlab.inference" in GRAPH["bertlab"]  # bertlab/__init__'s lazy-export table
    assert "bertlab.models.albert" in GRAPH["bertlab.models"]  # models/__init__'s table keys


@pytest.mark.parametrize("floor", [name for name, _ in FLOORS])
def test_the_design_document_draws_every_floor(floor):
    with open(DESIGN, encoding="utf-8") as f:
        design = f.read()
    folders = dict(FLOORS)[floor]
    for folder in folders:
        if folder.startswith("__"):
            continue
        assert re.search(rf"`{folder}(/|\.py)?`", design), f"docs/design/architecture.md does not place `{folder}`"
