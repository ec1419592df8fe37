"""ROUGE-1/2/L F1 of hypothesis files against one reference file, as a Markdown table.

    python benchmarks/rouge_files.py REF NAME=HYP [NAME=HYP ...]
"""
import sys

from bertlab.inference.unilm import ROUGE_TYPES, rouge
from bertlab.io import read_lines


def main(reference, *systems):
    refs = read_lines(reference)
    print("| system | " + " | ".join(ROUGE_TYPES) + " |\n|---|" + "---|" * len(ROUGE_TYPES))
    for item in systems:
        name, path = item.split("=", 1)
        scores = rouge(read_lines(path, allow_empty_file=True), refs)
        print(f"| {name} | " + " | ".join(f"{scores[k]:.2f}" for k in ROUGE_TYPES) + " |")


if __name__ == "__main__":
    main(*sys.argv[1:])
