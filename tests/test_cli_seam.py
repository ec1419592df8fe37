"""One seam between flags and the library: every command fills its library call (and settings
dataclasses) with cli.args.flags_for, driven by the call's parameters, so no command copies
`x=args.x` by hand. (a) No function in cli/ has a call keyword `name=args.name` (read from the
files); (b) what flags_for reads, skips and lets `given` override."""
import argparse
import ast
import dataclasses
import pathlib

import pytest

from bertlab.cli import build_parser
from bertlab.cli.args import flags_for

CLI = pathlib.Path(__file__).resolve().parent.parent / "src" / "bertlab" / "cli"


def hand_copies(source: str, filename: str = "<text>") -> list[str]:
    """Every call keyword of the form `name=args.name` (the same name both sides) inside a function."""
    found = []
    for function in ast.walk(ast.parse(source, filename)):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for call in ast.walk(function):
            if not isinstance(call, ast.Call):
                continue
            for keyword in call.keywords:
                value = keyword.value
                if (isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name)
                        and value.value.id == "args" and value.attr == keyword.arg):
                    found.append(f"{filename}:{keyword.lineno} {function.name}: {keyword.arg}=args.{value.attr}")
    return found


def test_no_command_copies_a_flag_by_hand():
    copies = [c for path in sorted(CLI.glob("*.py")) for c in hand_copies(path.read_text(encoding="utf-8"), path.name)]
    assert not copies, "use cli.args.flags_for instead of:\n" + "\n".join(copies)


def test_the_check_finds_a_hand_copy():
    """A planted copy is found, and a renamed or transformed value is not (it is not a copy)."""
    source = ("def run(args):\n"
              "    f(args.model, pooling=args.pooling, model_dir=args.model, progress=not args.quiet)\n")
    assert hand_copies(source) == ["<text>:2 run: pooling=args.pooling"]


def job(model_dir, file, output=None, batch_size=64, progress=False, *, seed=0):
    pass


@dataclasses.dataclass
class Settings:
    lr: float = 1e-4
    out: str = dataclasses.field(default_factory=str)
    needed: int = 0


def test_flags_for_reads_the_parameters_by_name():
    args = argparse.Namespace(file="a.txt", output=None, batch_size=8, seed=3, quiet=True, unrelated=1, model="m")
    # output None: the job's default stays; progress: not --quiet; model_dir is given
    assert flags_for(job, args, model_dir="m") == {"file": "a.txt", "batch_size": 8, "seed": 3, "progress": False,
                                                   "model_dir": "m"}


def test_given_wins_and_settings_fields_count():
    args = argparse.Namespace(file="a.txt", lr=0.5, needed=None, seed=1)
    assert flags_for(job, args, Settings, seed=9, model_dir="m") == {"file": "a.txt", "lr": 0.5, "seed": 9,
                                                                     "model_dir": "m"}
    assert flags_for(Settings, args) == {"lr": 0.5}


def test_an_unset_flag_reaches_a_parameter_without_a_default():
    """recipe_settings(recipe, data, ...) takes recipe=None as 'no recipe': skipping the unset flag
    would leave a required argument missing."""
    args = argparse.Namespace(model_dir=None, file=None)
    assert flags_for(job, args) == {"model_dir": None, "file": None}


def test_export_reads_texts_as_a_file_not_as_lines():
    """export_onnx has both `texts` (lines) and `texts_file`; --texts is the file."""
    from bertlab.inference.onnx_export import export_onnx
    args = build_parser().parse_args(["export", "m", "--onnx", "out", "--texts", "t.txt"])
    keywords = flags_for(export_onnx, args, folder=args.model, out=args.onnx)
    assert keywords["texts_file"] == "t.txt" and "texts" not in keywords


def test_the_old_output_spelling_satisfies_a_required_out():
    """embed and extract-features require -o/--out; the hidden old spelling --output must do too,
    as on the commands that always had it, and giving neither must still be refused."""
    parser = build_parser()
    for command in (["embed", "--model", "minilm", "t.txt"], ["extract-features", "--model", "minilm", "t.txt"],
                    ["vocab", "c.txt"]):
        assert parser.parse_args(command + ["--output", "x"]).out == "x"
        assert parser.parse_args(command + ["-o", "x"]).out == "x"
    with pytest.raises(SystemExit) as stop:
        parser.parse_args(["embed", "--model", "minilm", "t.txt"])
    assert stop.value.code == 2
