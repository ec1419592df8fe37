"""ModernBERT-small against BERT-small, pretrained for the same wall time on the same shipped corpus
(issue 32, point 5).

    python benchmarks/modernbert_pretraining.py --out /tmp/mbp --minutes 10 --threads 1

Both models have the same parameter count (3.41M and 3.42M besides the vocabulary: modernbert-small
is 6 layers of 256 with GeGLU 384, BERT-small 4 layers of 256 with feed-forward 1024) and train on
the shipped docstring summaries (data/python-docs, `bertlab data python-docs`, 10% of the documents
held out) with one 2,000-piece WordPiece vocabulary, each by its own recipe, every step through
`bertlab pretrain`:

- BERT: `--recipe bert`: sentence pairs, next-sentence task, 15% masked (google's instances);
- ModernBERT: `--recipe modernbert`: whole sentences packed across documents, no pair task, 30%
  masked afresh every batch, and in the last phase the global layers' rotary base raised from
  10,000 to 160,000.

Both: batch 32, AdamW at the same peak rate, warmup 1% then linear decay, the last 10% of the
steps on 256-piece instances (phase 2), the rest on 128. "The same wall time": each side's step
time is measured first (a short run of its own), and its step count set so its whole schedule
fits --minutes; the training seconds each side really took are reported beside the scores. By
default the two sides run at the same time, one process each (--threads each), so a machine's
other load falls on both alike; --one-at-a-time runs them in turn.

Scored on the same yardsticks: held-out masked-LM loss and accuracy on the held-out documents made
into whole-sentence instances with 15% of the pieces masked once (neither side's training format
alone; BERT is read without its pair task), and the accuracy of each model fine-tuned on the
shipped man-page section classification (data/manpages: train / dev / test) with one setting.
Writes OUT/results.json and prints a markdown table. One process at a time: time nothing else
beside it.
"""
import argparse
import json
import os
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIDES = {"bert": {"recipe": "bert", "preset": "small"},
         "modernbert": {"recipe": "modernbert", "preset": "modernbert-small"}}


def bertlab(args, threads):
    """Run one bertlab command to its end (an error stops the benchmark with its stderr)."""
    return wait(start(args, threads))


def start(args, threads):
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    print("$ bertlab " + " ".join(args), flush=True)
    return args, subprocess.Popen([sys.executable, "-m", "bertlab", *args], env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)


def wait(started):
    args, process = started
    _, stderr = process.communicate()
    if process.returncode:
        raise SystemExit(f"bertlab {' '.join(args)} failed ({process.returncode}):\n{stderr}")


def make_data(out, threads, vocab_size):
    corpus, vocab = os.path.join(out, "corpus"), os.path.join(out, "vocab")
    bertlab(["data", "python-docs", "-o", corpus, "--heldout", "0.1", "--overwrite"], threads)
    bertlab(["vocab", os.path.join(corpus, "train.txt"), "--vocab-size", str(vocab_size), "-o", vocab,
             "--overwrite"], threads)
    common = ["--vocab", vocab, "--workers", "1", "--quiet", "--overwrite"]
    folders = {}
    for side, recipe in SIDES.items():
        for length in (128, 256):
            folder = os.path.join(out, f"{side}{length}")
            extra = ["--max-predictions-per-seq", str(length * 20 // 128)] if side == "bert" else []
            bertlab(["create-pretraining-data", os.path.join(corpus, "train.txt"), "-o", folder, "--recipe",
                     recipe["recipe"], "--max-seq-length", str(length), *extra, *common], threads)
            folders[side, length] = folder
    folders["eval"] = os.path.join(out, "eval128")
    bertlab(["create-pretraining-data", os.path.join(corpus, "heldout.txt"), "-o", folders["eval"], "--mode",
             "full-sentences", "--masked-lm-prob", "0.15", "--dupe-factor", "1", *common], threads)
    return folders


def pretrain_args(side, folders, out, steps, a, minutes=None):
    args = ["pretrain", "--recipe", SIDES[side]["recipe"], "--preset", SIDES[side]["preset"],
            "--data", folders[side, 128], "--data-512", folders[side, 256], "--phase2-fraction", "0.1",
            "--batch-size", str(a.batch_size), "--lr", str(a.lr), "--max-steps", str(steps),
            "--eval-every", str(steps), "--save-every", str(steps), "--seed", str(a.seed), "--device", "cpu",
            "--precision", "fp32", "-o", out, "--overwrite", "--quiet"]
    if minutes is not None:
        args += ["--eval-data", folders["eval"], "--max-minutes", f"{minutes:.2f}"]
    return args


def read_summary(out):
    with open(os.path.join(out, "summary.json"), encoding="utf-8") as f:
        return json.load(f)


def pretrain_sides(sides, folders, out, steps, a, minutes=None) -> dict:
    """{side: summary} of one pretraining run per side, all at once or one at a time."""
    runs = {side: pretrain_args(side, folders, os.path.join(a.out, out.format(side=side)), steps[side], a, minutes)
            for side in sides}
    if a.one_at_a_time:
        for args in runs.values():
            bertlab(args, a.threads)
    else:
        for started in [start(args, a.threads) for args in runs.values()]:
            wait(started)
    return {side: read_summary(os.path.join(a.out, out.format(side=side))) for side in sides}


def finetune(model, out, a):
    data = os.path.join(REPO, "data", "manpages")
    bertlab(["finetune", "--task", "classify", "--model", model, "--text-a", "description", "--label", "section",
             "--train", os.path.join(data, "train.tsv"), "--dev", os.path.join(data, "dev.tsv"),
             "--test", os.path.join(data, "test.tsv"), "--epochs", str(a.finetune_epochs), "--batch-size", "16",
             "--lr", str(a.finetune_lr), "--seed", str(a.seed), "--device", "cpu", "--precision", "fp32",
             "-o", out, "--overwrite", "--quiet"], a.threads)
    with open(os.path.join(out, "summary.json"), encoding="utf-8") as f:
        summary = json.load(f)
    return {"dev_accuracy": summary["dev"]["accuracy"], "test_accuracy": summary["test"]["accuracy"]}


def parameters(side, folders):
    import torch  # noqa: F401  (the models need it)
    from bertlab.models import BertForPreTraining, ModernBertForPreTraining
    from bertlab.pretraining.objective import open_shards, preset_config
    data = open_shards(folders[side, 128], "--data")
    config = preset_config(SIDES[side]["preset"], data.meta["vocab_size"], vocab=data.vocab)
    model = (ModernBertForPreTraining if side == "modernbert" else BertForPreTraining)(config)
    return sum(p.numel() for p in model.parameters()), config.vocab_size * config.hidden_size


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--minutes", type=float, default=10.0, help="pretraining wall time of each side")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--vocab-size", type=int, default=2000)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=5e-4, help="peak pretraining rate, both sides")
    parser.add_argument("--calibration-steps", type=int, default=30)
    parser.add_argument("--finetune-epochs", type=int, default=5)
    parser.add_argument("--finetune-lr", type=float, default=1e-4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sides", default="modernbert,bert")
    parser.add_argument("--one-at-a-time", action="store_true", help="the sides in turn, not side by side")
    a = parser.parse_args()
    os.makedirs(a.out, exist_ok=True)
    started = time.time()
    folders = make_data(a.out, a.threads, a.vocab_size)
    print(f"data made in {(time.time() - started) / 60:.1f} min", flush=True)
    results, sides = [], a.sides.split(",")
    calibration = pretrain_sides(sides, folders, "{side}-calibration", dict.fromkeys(sides, a.calibration_steps), a)
    # phase 2's instances are twice as long: its tenth of the steps costs about twice as much
    steps = {side: max(10, int(a.minutes * 60 / (c["seconds"] / c["steps"] * 1.1))) for side, c in calibration.items()}
    summaries = pretrain_sides(sides, folders, "{side}", steps, a, minutes=a.minutes * 1.25)
    for side in sides:
        summary, run = summaries[side], os.path.join(a.out, side)
        count, table = parameters(side, folders)
        result = {"side": side, "recipe": SIDES[side]["recipe"], "preset": SIDES[side]["preset"],
                  "parameters": count, "parameters_besides_vocabulary": count - table, "steps": summary["steps"],
                  "planned_steps": steps[side], "train_seconds": summary["seconds"],
                  "real_tokens": summary["real_tokens"],
                  "stopped_by_time": summary["stopped_by_time"],
                  "held_out_mlm_loss": summary["held_out"]["mlm_loss"],
                  "held_out_mlm_accuracy": summary["held_out"]["mlm_accuracy"],
                  **finetune(os.path.join(run, "model"), os.path.join(a.out, f"{side}-classify"), a)}
        results.append(result)
        print(json.dumps(result), flush=True)
        with open(os.path.join(a.out, "results.json"), "w", encoding="utf-8") as f:
            json.dump({"settings": vars(a), "runs": results}, f, indent=1)
    print(f"\n{len(results)} sides in {(time.time() - started) / 60:.1f} min\n")
    print("| model | parameters (besides vocabulary) | steps | train s | real tokens | held-out MLM loss | "
          "held-out MLM accuracy | classify dev | classify test |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['preset']} (--recipe {r['recipe']}) | {r['parameters']:,} ({r['parameters_besides_vocabulary']:,}) "
              f"| {r['steps']} | {r['train_seconds']:.0f} | {r['real_tokens']:,} | {r['held_out_mlm_loss']:.3f} | "
              f"{r['held_out_mlm_accuracy']:.3f} | {r['dev_accuracy']:.3f} | {r['test_accuracy']:.3f} |")


if __name__ == "__main__":
    main()
