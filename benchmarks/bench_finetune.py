"""Fine-tuning, bertlab vs HF Trainer: same checkpoint, data, batch size and hyper-parameters.

    python benchmarks/bench_finetune.py --data DIR [--epochs 3] [--mode quality|speed]

DIR holds train/dev/test .tsv with `section` labels and `description` texts (built from this
machine's manual pages by data/manpages/make_manpages.py). Both sides start from the real
all-MiniLM-L6-v2 with a new classifier head, AdamW (--lr, default 5e-5; weight decay 0.01, eps 1e-6),
10% warmup then linear decay, dropout 0.1, --batch-size (default 32), dynamic padding, an evaluation on dev after every
epoch and the best dev model kept, then scored on test. Both use torch's fused AdamW (HF Trainer's default).

Timing: bertlab's seconds cover finetune() whole -- tokenizing the data, every step, and saving the
model folder; HF's cover trainer.train() only (its tokenizing happens before). The ratio is therefore
conservative for bertlab.

--mode quality: the above, plus a TF-IDF + logistic-regression baseline on the same split.
--mode speed: training throughput only (one epoch, no evaluation), HF Trainer with and without
its `group_by_length`. Ratios are examples/s against HF Trainer's defaults.

--seeds 0,1,2 repeats each side per seed (a different classifier-head init and data order) and
prints mean and spread; --sides picks which of tfidf,bertlab,hf run; --max-train N keeps a
random N of the training rows (the same N for every side and seed: a point of a learning curve).
"""
import argparse
import csv
import json
import os
import sys
import tempfile
import time

import numpy as np
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, os.path.dirname(__file__))
from harness import Row, print_table  # noqa: E402

from bertlab.finetune import metrics  # noqa: E402
from bertlab.finetune.classification import SequenceClassificationTask  # noqa: E402
from bertlab.finetune.setup import load_base_model  # noqa: E402
from bertlab.finetune.trainer import FinetuneSettings, finetune, predict_outputs  # noqa: E402
from bertlab.finetune.folder import load_finetuned  # noqa: E402
from bertlab.interop import resolve  # noqa: E402


def read(path):
    with open(path, encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    return [r["description"] for r in rows], [r["section"] for r in rows]


def subsample(folder, max_train, out):
    """A copy of `folder` whose train.tsv keeps a random `max_train` rows (fixed seed)."""
    os.makedirs(out, exist_ok=True)
    for split in ("train", "dev", "test"):
        with open(os.path.join(folder, f"{split}.tsv"), encoding="utf-8") as f:
            header, *rows = f.read().splitlines()
        if split == "train" and max_train < len(rows):
            keep = sorted(np.random.default_rng(1234).choice(len(rows), max_train, replace=False))
            rows = [rows[i] for i in keep]
        with open(os.path.join(out, f"{split}.tsv"), "w", encoding="utf-8") as f:
            f.write("\n".join([header, *rows]) + "\n")
    return out


def scores(gold, pred):
    return {"accuracy": metrics.accuracy(gold, pred), "macro_f1": metrics.f1(gold, pred)}


def tfidf_baseline(data):
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    (xtr, ytr), (xdev, ydev), (xte, yte) = data
    best = None
    for c in (1, 3, 10, 30, 100):  # C chosen on dev, as the fine-tuned models' checkpoints are
        vec = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True)
        clf = LogisticRegression(C=c, max_iter=5000).fit(vec.fit_transform(xtr), ytr)
        dev = metrics.accuracy(ydev, clf.predict(vec.transform(xdev)))
        if best is None or dev > best[0]:
            best = (dev, c, scores(yte, clf.predict(vec.transform(xte))))
    return {"C": best[1], "dev_accuracy": best[0], **best[2]}


def run_bertlab(folder, out, epochs, evaluate=True, lr=5e-5, batch=32, seed=0, group_by_length=False):
    task = SequenceClassificationTask(text_a="description", label="section")
    train = task.read(os.path.join(folder, "train.tsv"))
    task.fit_labels(train)
    dev = task.read(os.path.join(folder, "dev.tsv")) if evaluate else []
    model, tokenizer = load_base_model(task, "minilm", quiet=True)
    settings = FinetuneSettings(epochs=epochs, batch_size=batch, lr=lr, seed=seed, progress=False,
                                group_by_length=group_by_length)
    start = time.perf_counter()
    summary = finetune(task, model, tokenizer, train, dev, out, settings)
    seconds = time.perf_counter() - start
    result = {"seconds": seconds, "examples_per_s": len(train) * epochs / seconds, "dev": summary["dev"],
              "train_steps_examples_per_s": summary["train_examples_per_s"]}  # steps only, no tokenizing/saving
    if evaluate:
        task, model, tokenizer = load_finetuned(os.path.join(out, "model"))
        test = task.read(os.path.join(folder, "test.tsv"))
        features = task.featurize(test, tokenizer)
        outputs = predict_outputs(task, model, features, tokenizer.pad_token_id)
        result["test"] = {k: v for k, v in task.evaluate(test, features, outputs).items() if k in ("accuracy", "macro_f1")}
    return result


def run_hf(folder, out, epochs, evaluate=True, group_by_length=False, lr=5e-5, batch=32, seed=0):
    from transformers import (AutoTokenizer, BertForSequenceClassification, DataCollatorWithPadding, Trainer,
                              TrainingArguments)
    data = [read(os.path.join(folder, f"{s}.tsv")) for s in ("train", "dev", "test")]
    labels = sorted(set(data[0][1]))
    tok = AutoTokenizer.from_pretrained(resolve("minilm"))
    encode = lambda xs, ys: [{**tok(x, truncation=True, max_length=128), "labels": labels.index(y)}  # noqa: E731
                             for x, y in zip(xs, ys)]
    train, dev, test = (encode(*d) for d in data)
    torch.manual_seed(seed)
    model = BertForSequenceClassification.from_pretrained(resolve("minilm"), num_labels=len(labels))
    import inspect
    import math
    total_steps = math.ceil(epochs * math.ceil(len(train) / batch))
    grouping = {"group_by_length": group_by_length}  # transformers 4.x; 5.x names it a sampling strategy
    if "group_by_length" not in inspect.signature(TrainingArguments).parameters:
        grouping = {"train_sampling_strategy": "group_by_length"} if group_by_length else {}
    args = TrainingArguments(
        output_dir=out, num_train_epochs=epochs, per_device_train_batch_size=batch, per_device_eval_batch_size=64,
        learning_rate=lr, weight_decay=0.01, adam_epsilon=1e-6, warmup_steps=int(0.1 * total_steps),
        lr_scheduler_type="linear", **grouping,
        eval_strategy="epoch" if evaluate else "no", save_strategy="epoch" if evaluate else "no",
        load_best_model_at_end=evaluate, metric_for_best_model="accuracy", save_total_limit=1,
        report_to=[], disable_tqdm=True, seed=seed, use_cpu=True,
        dataloader_num_workers=0, logging_strategy="no")

    def compute(p):
        pred = np.asarray(p.predictions).argmax(-1)
        return scores(list(p.label_ids), list(pred))

    trainer = Trainer(model=model, args=args, train_dataset=train, eval_dataset=dev if evaluate else None,
                      data_collator=DataCollatorWithPadding(tok), compute_metrics=compute)
    start = time.perf_counter()
    trainer.train()
    seconds = time.perf_counter() - start
    result = {"seconds": seconds, "examples_per_s": len(train) * epochs / seconds}
    if evaluate:
        test_scores = trainer.evaluate(test)
        result["test"] = {k: test_scores[f"eval_{k}"] for k in ("accuracy", "macro_f1")}
    return result


def summarize(runs):
    """Mean and min..max of each test score over seeds."""
    out = {}
    for key in ("accuracy", "macro_f1"):
        values = [r["test"][key] for r in runs]
        out[key] = {"mean": float(np.mean(values)), "min": min(values), "max": max(values)}
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True)
    parser.add_argument("--epochs", type=float, default=3)
    parser.add_argument("--mode", choices=["quality", "speed"], default="quality")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seeds", default="0", help="comma-separated seeds, each side run once per seed")
    parser.add_argument("--sides", default="tfidf,bertlab,hf", help="which of tfidf,bertlab,hf to run")
    parser.add_argument("--max-train", type=int, default=None, help="keep a random N training rows")
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--group-by-length", action="store_true",
                        help="bertlab side: length-grouped batches (default: plain shuffled, as HF Trainer's default)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    tmp = tempfile.mkdtemp(prefix="bench_finetune_")
    folder = subsample(args.data, args.max_train, f"{tmp}/data") if args.max_train else args.data
    seeds = [int(s) for s in args.seeds.split(",")]
    sides = args.sides.split(",")
    evaluate = args.mode == "quality"
    epochs = args.epochs if evaluate else 1
    results = {}
    if evaluate and "tfidf" in sides:
        data = [read(os.path.join(folder, f"{s}.tsv")) for s in ("train", "dev", "test")]
        results["tfidf"] = tfidf_baseline(data)
        print("TF-IDF + LR:", json.dumps(results["tfidf"]), flush=True)
    runners = {"bertlab": lambda out, seed, **kw: run_bertlab(
                   folder, out, epochs, evaluate, args.lr, args.batch_size, seed, args.group_by_length),
               "hf": lambda out, seed, group_by_length=False: run_hf(
                   folder, out, epochs, evaluate, group_by_length, lr=args.lr, batch=args.batch_size, seed=seed)}
    for side in ("bertlab", "hf"):
        if side not in sides:
            continue
        results[side] = []
        for seed in seeds:
            results[side].append(runners[side](f"{tmp}/{side}{seed}", seed))
            print(f"{side} seed {seed}:", json.dumps(results[side][-1]), flush=True)
        if not evaluate and side == "hf":
            results["hf_grouped"] = [runners["hf"](f"{tmp}/hf_grouped", seeds[0], group_by_length=True)]
    if evaluate:
        print(f"test scores over seeds {seeds} ({len(read(f'{folder}/train.tsv')[0])} training rows):")
        for side in ("bertlab", "hf"):
            if side in results:
                print(f"  {side}: {json.dumps(summarize(results[side]))}")
    train_rows = epochs * len(read(f"{folder}/train.tsv")[0])
    labels = {"hf": "HF Trainer", "hf_grouped": "HF Trainer group_by_length", "bertlab": "bertlab"}
    rows = [Row(f"fine-tune MiniLM, {epochs:g} epoch(s)", labels[side], train_rows, "examples/s",
                [r["seconds"] for r in results[side]]) for side in ("hf", "hf_grouped", "bertlab") if side in results]
    if rows:
        print_table(rows, baseline="HF Trainer")
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
