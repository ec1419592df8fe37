"""The command line sits on a library: outside cli/, no module parses arguments or takes an argparse
namespace, and the benchmarks call the library, not the command line's modules."""
import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "src" / "bertlab"


def _modules(folder, skip=()):
    for path in sorted(folder.rglob("*.py")):
        # a hidden folder is not ours: benchmarks/.venv-infinity holds infinity's own environment
        if not any(part in skip or part.startswith(".") for part in path.relative_to(folder).parts):
            yield path, ast.parse(path.read_text(encoding="utf-8"), str(path))


def _imported(tree) -> list[str]:
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            names += [module] + [f"{module}.{alias.name}" for alias in node.names]
    return names


def _namespace_args(tree) -> list[str]:
    """Functions with a parameter `args` read as a namespace (args.something), not *args."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            params = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
            if any(p.arg == "args" for p in params) and any(
                    isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "args"
                    for n in ast.walk(node)):
                found.append(f"{node.name} (line {node.lineno})")
    return found


def test_the_library_neither_parses_arguments_nor_takes_a_namespace():
    problems = []
    for path, tree in _modules(PACKAGE, skip=("cli",)):
        where = path.relative_to(PACKAGE)
        problems += [f"{where}: imports argparse" for name in _imported(tree) if name.split(".")[0] == "argparse"]
        problems += [f"{where}: {f} takes an argparse namespace" for f in _namespace_args(tree)]
    assert not problems, "\n".join(problems)


def test_the_benchmarks_import_nothing_from_the_command_line():
    problems = [f"{path.name}: imports {name}" for path, tree in _modules(ROOT / "benchmarks")
                for name in _imported(tree) if name.startswith("bertlab.cli") or name == "bertlab.cli"]
    assert not problems, "\n".join(problems)


def test_the_checks_see_a_namespace_and_a_cli_import():
    """The two checks above would catch what they look for."""
    tree = ast.parse("import argparse\nfrom bertlab.cli.finetune import run\ndef f(task, args):\n    return args.x\n"
                     "def g(*args):\n    return args[0]\n")
    assert _namespace_args(tree) == ["f (line 3)"]
    assert "argparse" in _imported(tree) and "bertlab.cli.finetune.run" in _imported(tree)
