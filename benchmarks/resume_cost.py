"""What a resume costs, against how far the run had gone: the time from `--resume` to its first new
step, after a checkpoint at step N = 10 and at N = 10,000, for BERT pretraining, GPT and translation.

    python benchmarks/resume_cost.py [--steps 10,10000] [--repeat 2] [--families bert,gpt,translation]

A run that replays its data to find its place (HF Trainer's default `ignore_data_skip=False` reads
and drops every batch before the resume point) pays for N; ours restore a position: BERT's data order
(epoch, index into a seeded permutation: training/data_order.py), GPT's token stream (its generator's
state: lm/token_stream.py) and translation's batch stream (epoch, index: translation/objective.py).

For each family and N: train a tiny model on real text the repo ships (data/python-docs,
data/gettext-gnu-de) with `--save-every N` and a schedule of 20,000 steps; stop it with SIGKILL once
its first checkpoint is written (step N); then start the same command with `--resume` and time
from the process's start to the metrics log's record of step N + 1 (process start, imports, data
setup and the checkpoint load included, equal for both N), then stop it. N alternate within each
repeat. One thread each (OMP_NUM_THREADS=1). Prints one markdown table.
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
SCHEDULE = 20_000


def bertlab(*args, check=True):
    r = subprocess.run([sys.executable, "-m", "bertlab", *args], env=ENV, capture_output=True, text=True)
    if check and r.returncode:
        raise SystemExit(f"bertlab {' '.join(args)} failed:\n{r.stderr[-3000:]}")
    return r


def prepare(root: str) -> dict:
    """The data of each family, made once: text, BERT's vocabulary and shards, a German-English slice."""
    summaries = os.path.join(REPO, "data", "python-docs", "summaries.txt")
    corpus = os.path.join(root, "corpus")
    bertlab("data", "python-docs", "-o", corpus)
    bertlab("vocab", os.path.join(corpus, "train.txt"), "--vocab-size", "2000", "-o", os.path.join(root, "vocab"))
    bertlab("create-pretraining-data", os.path.join(corpus, "train.txt"), "--vocab", os.path.join(root, "vocab"),
            "-o", os.path.join(root, "shards"), "--max-seq-length", "32", "--max-predictions-per-seq", "5",
            "--dupe-factor", "1")
    config = os.path.join(root, "bert_config.json")
    with open(os.path.join(root, "vocab", "vocab.txt"), encoding="utf-8") as f:
        vocab_size = sum(1 for _ in f)
    with open(config, "w") as f:
        json.dump({"vocab_size": vocab_size, "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
                   "intermediate_size": 64, "max_position_embeddings": 32}, f)
    pairs = os.path.join(root, "de-en")
    os.makedirs(pairs)
    for split, lines in (("train", 3000), ("valid", 50)):
        for lang in ("de", "en"):
            with open(os.path.join(REPO, "data", "gettext-gnu-de", f"{split}.{lang}"), encoding="utf-8") as f:
                head = [line for _, line in zip(range(lines), f)]
            with open(os.path.join(pairs, f"{split}.{lang}"), "w", encoding="utf-8") as f:
                f.writelines(head)
    return {"summaries": summaries, "shards": os.path.join(root, "shards"), "config": config, "pairs": pairs}


def command(family: str, data: dict, out: str, save_every: int) -> list[str]:
    common = ["--out", out, "--save-every", str(save_every), "--seed", "3", "--device", "cpu"]
    if family == "bert":
        return ["pretrain", "--data", data["shards"], "--config", data["config"], "--batch-size", "8",
                "--lr", "1e-3", "--warmup", "10", "--max-steps", str(SCHEDULE), "--eval-every", str(10 * SCHEDULE),
                *common]
    if family == "gpt":
        return ["gpt-train", data["summaries"], "--tokenizer", "char", "--preset", "tiny", "--n-layer", "1",
                "--n-embd", "32", "--n-head", "2", "--block-size", "16", "--batch-size", "4",
                "--max-steps", str(SCHEDULE), "--warmup", "10", "--eval-every", str(10 * SCHEDULE),
                "--eval-tokens", "200", "--quiet", *common]
    return ["translate-train", "--data", data["pairs"], "--src", "de", "--tgt", "en", "--joint-vocab",
            "--vocab-size", "500", "--preset", "test", "--max-tokens", "256", "--max-sentence-tokens", "100", "--max-steps", str(SCHEDULE),
            "--warmup", "10", "--eval-interval", str(10 * SCHEDULE), "--bleu-sentences", "4", *common]


def last_step(out: str) -> int:
    try:
        with open(os.path.join(out, "metrics.jsonl"), encoding="utf-8") as f:
            steps = [r["step"] for r in map(json.loads, f) if r.get("kind") == "train"]
    except (OSError, ValueError):  # not yet written, or a line being written
        return 0
    return max(steps, default=0)


def run_until(args: list[str], done, timeout: float) -> float:
    """Start `bertlab *args`, wait until done() (polled), SIGKILL it; the seconds it took."""
    log = tempfile.TemporaryFile()
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "bertlab", *args], env=ENV, stdout=log, stderr=log)
    try:
        while not done():
            if proc.poll() is not None:
                log.seek(0)
                raise SystemExit(f"bertlab {' '.join(args)} ended ({proc.returncode}):\n"
                                 f"{log.read().decode(errors='replace')[-3000:]}")
            if time.perf_counter() - start > timeout:
                raise SystemExit(f"bertlab {' '.join(args)}: not done after {timeout:.0f} s")
            time.sleep(0.01)
        return time.perf_counter() - start
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        proc.wait()


def resume_seconds(family: str, data: dict, root: str, n: int) -> tuple[int, float, float]:
    """(the checkpoint's step, seconds to train to it, seconds from --resume to the step after it)."""
    out = tempfile.mkdtemp(prefix=f"{family}-{n}-", dir=root)
    os.rmdir(out)
    args = command(family, data, out, n)
    to_checkpoint = run_until(args, lambda: os.path.exists(os.path.join(out, "checkpoint.pt")), timeout=1800)
    # a fast run may have logged steps past its checkpoint (or saved again, at 2N) before it was
    # killed: the resume starts at the checkpoint's step, and keeps the log up to it (as the run's
    # own resume does, done here first so that its first new step is the only one past it)
    import torch
    at = torch.load(os.path.join(out, "checkpoint.pt"), weights_only=False)["step"]
    log = os.path.join(out, "metrics.jsonl")
    with open(log, encoding="utf-8") as f:
        kept = [line for line in f if json.loads(line)["step"] <= at]
    with open(log, "w", encoding="utf-8") as f:
        f.writelines(kept)
    resumed = run_until(args + ["--resume"], lambda: last_step(out) > at, timeout=600)
    return at, to_checkpoint, resumed


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", default="10,10000", help="checkpoint steps N to compare (default 10,10000)")
    p.add_argument("--repeat", type=int, default=2, help="runs of each (family, N); the table shows the median")
    p.add_argument("--families", default="bert,gpt,translation")
    args = p.parse_args()
    steps = [int(s) for s in args.steps.split(",")]
    families = args.families.split(",")
    with tempfile.TemporaryDirectory(prefix="resume-cost-") as root:
        data = prepare(root)
        results = {(f, n): [] for f in families for n in steps}
        for r in range(args.repeat):
            for family in families:
                for n in (steps if r % 2 == 0 else steps[::-1]):
                    at, trained, resumed = resume_seconds(family, data, root, n)
                    results[family, n].append(resumed)
                    print(f"{family}: checkpoint at step {at:,} after {trained:.1f} s; --resume reached step "
                          f"{at + 1:,} in {resumed:.2f} s", flush=True)
    print("\n| family | " + " | ".join(f"--resume to its first step, N = {n:,}: median, fastest (all)" for n in steps)
          + " | ratio of medians | ratio of fastest |")
    print("|---|" + "---:|" * (len(steps) + 2))
    for family in families:
        medians = [statistics.median(results[family, n]) for n in steps]
        fastest = [min(results[family, n]) for n in steps]
        cells = [f"{m:.2f} s, {f:.2f} s ({', '.join(f'{x:.2f}' for x in results[family, n])})"
                 for m, f, n in zip(medians, fastest, steps)]
        print(f"| {family} | " + " | ".join(cells) + f" | {medians[-1] / medians[0]:.2f}x | {fastest[-1] / fastest[0]:.2f}x |")


if __name__ == "__main__":
    main()
