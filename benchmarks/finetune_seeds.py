"""Fine-tune each pretrained model folder on one labelled set with several seeds, one thread each,
and print every run's dev/test scores and each model's mean and spread: how docs/models/electra.md compares
an ELECTRA discriminator with a BERT pretrained for the same compute.

    python benchmarks/finetune_seeds.py --models runs/electra/model runs/bert/model --seeds 0 1 2 \\
        --out runs/ft -- --task classify --train data/manpages/train.tsv --dev data/manpages/dev.tsv \\
        --test data/manpages/test.tsv --text-a description --label section --epochs 5 --lr 3e-4

Everything after `--` goes to `bertlab finetune` unchanged, the same for every model and seed.
A model given as NAME=FOLDER is reported as NAME; `random:FOLDER` fine-tunes FOLDER's architecture
from random weights (--init random), the floor the pretrained models are read against.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys


def finetune(folder: str, seed: int, out: str, finetune_args: list[str], init: str) -> dict:
    cmd = [sys.executable, "-m", "bertlab", "finetune", "--model", folder, "--seed", str(seed), "-o", out,
           "--init", init, "--overwrite", "--quiet", *finetune_args]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
    with open(os.path.join(out, "summary.json"), encoding="utf-8") as f:
        return json.load(f)


def spread(values: list[float]) -> str:
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):.3f} ± {sd:.3f} (min {min(values):.3f}, max {max(values):.3f})"


def main():
    argv = sys.argv[1:]
    split = argv.index("--") if "--" in argv else len(argv)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", required=True, help="model folders, NAME=FOLDER or random:FOLDER")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--out", required=True, help="a folder for the runs")
    args = parser.parse_args(argv[:split])
    finetune_args = argv[split + 1:]
    table = {}
    for spec in args.models:
        name, folder = spec.split("=", 1) if "=" in spec else (spec, spec)
        init = "random" if folder.startswith("random:") else "pretrained"
        folder = folder.removeprefix("random:")
        for seed in args.seeds:
            out = os.path.join(args.out, f"{len(table)}-{os.path.basename(os.path.dirname(folder))}-{init}-{seed}")
            summary = finetune(folder, seed, out, finetune_args, init)
            test = summary.get("test") or {}
            row = {"dev": summary["best_score"], **{f"test_{k}": v for k, v in test.items()}}
            table.setdefault(name if init == "pretrained" else f"{name} (random init)", []).append(row)
            print(f"{name} {init} seed {seed}: " + ", ".join(f"{k} {v:.3f}" for k, v in row.items()), flush=True)
    print()
    for name, rows in table.items():
        print(f"{name}:")
        for key in rows[0]:
            print(f"  {key}: {spread([r[key] for r in rows])}")


if __name__ == "__main__":
    main()
