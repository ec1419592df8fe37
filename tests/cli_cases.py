"""The hardening matrix's tools: run `bertlab ...` in-process and check that bad input ends in
one clear line (exit 2, `bertlab CMD: error: ...`, no traceback), and make broken copies of
model folders (truncated or corrupt weights, garbage JSON, non-finite weights)."""
import contextlib
import io
import os
import shutil
import sys
from dataclasses import dataclass

from bertlab.cli import main


@dataclass
class Result:
    code: int
    out: str
    err: str

    @property
    def last_line(self) -> str:
        lines = [line for line in self.err.splitlines() if line.strip()]
        return lines[-1] if lines else ""


def run_cli(*argv, stdin: bytes | None = None) -> Result:
    """`bertlab ARGV` in this process; stdout and stderr captured, SystemExit turned into a code."""
    out, err = io.StringIO(), io.StringIO()
    old_stdin = sys.stdin
    if stdin is not None:
        sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main([str(a) for a in argv])
            except SystemExit as e:  # argparse: --help, usage errors
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    finally:
        sys.stdin = old_stdin
    return Result(code, out.getvalue(), err.getvalue())


def assert_error(result: Result, *needles: str):
    """Exit 2, no traceback, and the last line of stderr is `bertlab ...: error: ...` containing
    every needle (case-insensitive)."""
    assert "Traceback" not in result.err, result.err
    assert result.code == 2, (result.code, result.err[-2000:])
    line = result.last_line
    assert line.startswith("bertlab") and "error:" in line, result.err[-2000:]
    for needle in needles:
        assert needle.lower() in line.lower(), (needle, line)
    return line


def assert_ok(result: Result):
    assert "Traceback" not in result.err, result.err
    assert result.code == 0, (result.code, result.err[-2000:])
    return result


# ---- broken copies of a model folder -------------------------------------------------------------

def broken_copy(folder, tmp_path, how: str):
    """A copy of `folder` with one thing wrong. `how`: truncated-weights, garbage-weights,
    nan-weights, garbage-config, missing-config, missing-weights, empty-vocab."""
    copy = os.path.join(str(tmp_path), f"broken-{how}")
    shutil.copytree(folder, copy)
    weights = os.path.join(copy, "model.safetensors")
    if how == "truncated-weights":
        size = os.path.getsize(weights)
        with open(weights, "r+b") as f:
            f.truncate(size // 2)
    elif how == "garbage-weights":
        with open(weights, "wb") as f:
            f.write(b"\x00\x01this is not a safetensors file" * 10)
    elif how == "nan-weights":
        from safetensors.torch import load_file, save_file
        tensors = load_file(weights)
        name = next(n for n, t in tensors.items() if t.is_floating_point() and t.dim() == 2)
        tensors[name] = tensors[name].clone().fill_(float("nan"))
        save_file(tensors, weights, metadata={"format": "pt"})
    elif how == "garbage-config":
        with open(os.path.join(copy, "config.json"), "w") as f:
            f.write('{"hidden_size": 32,')
    elif how == "missing-config":
        os.remove(os.path.join(copy, "config.json"))
    elif how == "missing-weights":
        os.remove(weights)
    elif how == "empty-vocab":
        open(os.path.join(copy, "vocab.txt"), "w").close()
    else:
        raise ValueError(how)
    return copy


BROKEN = ["truncated-weights", "garbage-weights", "nan-weights", "garbage-config", "missing-config",
          "missing-weights"]


def write(path, data: str | bytes) -> str:
    """Write text (UTF-8) or bytes to `path`; returns the path as a string."""
    path = str(path)
    with open(path, "wb") as f:
        f.write(data.encode("utf-8") if isinstance(data, str) else data)
    return path


NON_UTF8 = b"good line\nbad \xff\xfe line\n"


BAD_INPUTS = {"missing": None, "empty": b"", "blank-only": b"\n  \n\t\n", "non-UTF-8": NON_UTF8, "folder": "folder"}


def bad_input(path, kind: str) -> str:
    """Make `path` the bad input `kind` of BAD_INPUTS: nothing there, a folder, or those bytes."""
    path, content = str(path), BAD_INPUTS[kind]
    if content == "folder":
        os.mkdir(path)
    elif content is not None:
        write(path, content)
    return path
