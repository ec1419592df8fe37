"""bertlab.api: one function per command (per action of a command with actions), and it is the
function the command itself calls, so the command line stays a thin layer over the Python API."""
import argparse
import ast
import inspect
import subprocess
import sys

import pytest

from bertlab import api
from bertlab.cli import build_parser


def leaf_commands() -> dict:
    """{"embed": run function, "word2vec train": run function, ...} from the real parser."""
    def subparsers(parser):
        return next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)

    found = {}
    top = subparsers(build_parser())
    for name, parser in top.choices.items():
        if name in top._name_parser_map and name != parser.prog.split()[-1]:
            continue  # an alias
        inner = subparsers(parser)
        if inner is None:
            found[name] = parser._defaults["run"]
            continue
        for action, sub in inner.choices.items():
            if action == sub.prog.split()[-1]:  # not an alias
                found[f"{name} {action}"] = sub._defaults["run"]
    return found


LEAVES = leaf_commands()


def test_every_command_has_one_api_function_and_no_more():
    assert set(api.COMMANDS) == set(LEAVES)
    assert sorted(api.python_name(c) for c in LEAVES) == sorted(n for n in api.__all__ if n not in api.LIBRARY)


@pytest.mark.parametrize("command", sorted(LEAVES))
def test_the_command_calls_its_api_function(command):
    """The command's module imports the very function api names for it (resolved from its relative
    import), and api gives that function object itself."""
    module_name, function = api.COMMANDS[command]
    target = "bertlab" + module_name
    run = LEAVES[command]
    source = inspect.getsource(sys.modules[run.__module__])
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 2:  # from ..x.y import f, in bertlab/cli/
            imported |= {(f"bertlab.{node.module}" if node.module else "bertlab", a.name) for a in node.names}
    assert (target, function) in imported, f"{run.__module__} does not import {target}.{function}"
    library = getattr(__import__(target, fromlist=[function]), function)
    assert getattr(api, api.python_name(command)) is library


def test_the_api_names_a_loader_and_fails_clearly_on_a_typo():
    assert api.load_model.__name__ == "load_model"
    with pytest.raises(AttributeError, match="finetun"):
        api.finetun  # noqa: B018


def test_importing_the_api_does_not_import_torch():
    code = "import sys, bertlab.api; print('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "False"
