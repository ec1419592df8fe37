"""What a training run was prepared from: its data files (size and SHA-256, so a moved copy still
counts as the same file) and the settings that shaped its vocabulary and data. A run records them
in OUT/inputs.json once its data is ready; --resume refuses other files or settings, which would
otherwise train on one corpus with the vocabulary and token files of another."""
import hashlib
import json
import os

from ..io import atomic_write_text, read_json

NAME = "inputs.json"


def describe_file(path) -> dict:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return {"path": os.path.abspath(path), "bytes": os.path.getsize(path), "sha256": digest.hexdigest()}


def clear(out):
    """A fresh run is preparing its data in `out`: forget the inputs of the run before it, so that
    an interrupted preparation cannot be resumed as if it were that run's."""
    path = os.path.join(out, NAME)
    if os.path.exists(path):
        os.remove(path)


def record(out, files, settings: dict):
    """Write OUT/inputs.json: the files (in order) and `settings` ({flag: value})."""
    entry = {"files": [describe_file(p) for p in files], "settings": settings}
    atomic_write_text(os.path.join(out, NAME), json.dumps(entry, indent=2) + "\n")


def check(out, files, settings: dict):
    """Refuse (ValueError) to resume the run in `out` with other files or settings than it was
    prepared with, naming the first difference."""
    path = os.path.join(out, NAME)
    if not os.path.exists(path):
        raise ValueError(f"{path} is missing: the run's data preparation was interrupted (or predates this "
                         "record), so resuming could mix two corpora; start again with --overwrite")
    saved = read_json(path)
    again = "; resume with the same files and settings, or start again with --overwrite"
    for flag, value in settings.items():
        if saved["settings"].get(flag) != value:
            raise ValueError(f"{out} was prepared with {flag} {saved['settings'].get(flag)}, not {value}" + again)
    before = saved["files"]
    if len(before) != len(files):
        raise ValueError(f"{out} was prepared from {len(before)} file(s), not {len(files)}" + again)
    for given, old in zip(files, before):
        now = describe_file(given)
        if (now["bytes"], now["sha256"]) != (old["bytes"], old["sha256"]):
            raise ValueError(f"{given} is not the file {out} was prepared from ({old['path']}, {old['bytes']:,} "
                             f"bytes, SHA-256 {old['sha256'][:12]}...)" + again)
