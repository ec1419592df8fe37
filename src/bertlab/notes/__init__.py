"""The worked examples of the study notes (/work/shared/notes in the project; see docs/notes.md),
each run by bertlab's own code and shown next to the numbers the notes print.

One module per example, one function per module that returns a `Shown`; this registry names them
without importing torch, so `bertlab notes` lists them at once.
"""
import importlib
from dataclasses import dataclass, field

# name: (module, function, whether it draws pictures, one-line description)
EXAMPLES = {
    "attention": ("self_attention", "self_attention", False,
                  "the 3-input self-attention: keys, queries, values, scores, softmax, output"),
    "embeddings": ("embedding_sum", "embedding_sum", False,
                   "token + position + segment embeddings = one-hot concatenation times the tables"),
    "masks": ("masks", "masks", False, "the padding mask and the sequence (causal) mask of the notes' sentences"),
    "positions": ("positions", "positional_encoding", True,
                  "the sinusoidal positional encoding, a few positions and a picture of the table"),
    "pretraining": ("pretraining_instance", "pretraining_instance", False,
                    "google's 80/10/10 masked instance at max_seq_length 15"),
    "it": ("it_attention", "it_attention", True,
           "where 'it' looks in 'The animal didn't cross the street ...' (MiniLM)"),
    "translation": ("translation_walkthrough", "translation_walkthrough", False,
                    "我爱中国 -> I love China: a toy Transformer decoded step by step"),
}


@dataclass
class Shown:
    """What one example shows: `lines` to print, the `values` bertlab computed (for tests), and
    the `files` it wrote."""
    title: str
    section: str  # where in the notes: file and heading
    lines: list[str] = field(default_factory=list)
    values: dict = field(default_factory=dict)
    files: list[str] = field(default_factory=list)

    def compare(self, label: str, notes, ours):
        """Two aligned lines: the notes' value, then bertlab's."""
        self.lines.append(f"{label:<24} notes:   {notes}")
        self.lines.append(f"{'':<24} bertlab: {ours}")

    def say(self, line: str = ""):
        self.lines.append(line)


PICTURES = {"positions": ["positional_encoding.png"], "it": ["it_attention.png"]}  # what each example draws


def check_pictures(names, out_dir: str, overwrite: bool = False) -> list[str]:
    """The pictures examples `names` will write under `out_dir`, each refused now if it exists
    (unless `overwrite`) or cannot be written, so `all` fails before any work, not half-way."""
    import os

    from ..io import check_output_file
    paths = [os.path.join(out_dir, picture) for name in names for picture in PICTURES.get(name, [])]
    for path in paths:
        check_output_file(path, overwrite, flag="-o")
    return paths


def run_example(name: str, out_dir: str, overwrite: bool = False) -> Shown:
    """Run example `name`; pictures go under `out_dir` (only the examples that draw use it)."""
    if name not in EXAMPLES:
        raise ValueError(f"no notes example {name!r}; choose one of {', '.join(EXAMPLES)} or 'all'")
    module, function, draws, _ = EXAMPLES[name]
    example = getattr(importlib.import_module(f".{module}", __name__), function)
    return example(out_dir, overwrite) if draws else example()


def run_examples(names, out_dir: str, overwrite: bool = False):
    """`bertlab notes NAME...`: the Shown of each example, in order, one at a time (an iterator); every
    picture they will draw is checked (check_pictures) before it is returned."""
    check_pictures(names, out_dir, overwrite)
    return (run_example(name, out_dir, overwrite) for name in names)


def rounded(t, digits: int = 4, significant: bool = False):
    """A tensor or array as nested lists for printing: whole numbers as ints, others rounded to
    `digits` decimals (or significant digits)."""
    values = t.tolist() if hasattr(t, "tolist") else t
    if isinstance(values, list):
        return [rounded(v, digits, significant) for v in values]
    value = float(values)
    if value.is_integer():
        return int(value)
    return float(f"{value:.{digits}g}") if significant else round(value, digits) + 0.0
