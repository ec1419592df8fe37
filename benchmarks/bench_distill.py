"""Distillation (docs/models/distillation.md): does the student keep the teacher's score, is it faster, and
does the teacher's signal matter?

    python benchmarks/bench_distill.py quality --teacher RUN/model --data DIR --work W [--seeds 0,1,2]
        [--sides distill,labels,pretrained] [--epochs 4 --lr 1e-4 --batch-size 16 --layers 3]
    python benchmarks/bench_distill.py speed --teacher A --student B --texts FILE [--rounds 5]
    python benchmarks/bench_distill.py cosine --teacher A --student B FILE... [--layers 3]

quality: DIR holds train/dev/test.tsv (`description` texts, `section` labels; data/manpages or
data/manpages/make_manpages.py's output); the teacher is a `bertlab finetune` folder trained on them.
Per seed, three students of --layers layers, each trained --epochs with the same settings, best dev
epoch kept, scored on test:
  distill     `bertlab distill` (teacher's every other layer; soft targets, labels, hidden cosine)
  labels      the same student and start, labels alone (--alpha-soft 0 --alpha-cos 0 --alpha-hard 1)
  pretrained  the pretrained encoder's every other layer (all-MiniLM-L6-v2 layers 0, 2, 4) fine-tuned
              by `bertlab finetune`: the small model trained without any teacher
Runs whose summary.json exists are read, not rerun (so sides can run in separate processes).

speed: texts/s of the two model folders on the same texts at equal batches (length-sorted batches
of --batch-size, the same for both), rounds interleaved so machine load hits both alike; task
folders classify (the whole head), others embed (mean pooling). Prints the median ratio.

cosine: the mean cosine between the two folders' sentence vectors (mean pooling, as `bertlab embed`)
on the lines of FILEs; with --layers N also for the teacher's every-other-layer copy before training.
"""
import argparse
import json
import os
import statistics
import sys
import time

import numpy as np
import torch

SIDES = ("distill", "labels", "pretrained")


def quality(args):
    from bertlab.distillation.job import distill_job
    from bertlab.finetune.job import finetune_job
    from bertlab.finetune.tasks import make_task
    from bertlab.finetune.objective import FinetuneSettings
    files = {split: os.path.join(args.data, f"{split}.tsv") for split in ("train", "dev", "test")}
    common = dict(epochs=args.epochs, lr=args.lr, batch_size=args.batch_size, device="cpu", progress=False)
    rows = {}
    for side in args.sides.split(","):
        for seed in map(int, args.seeds.split(",")):
            out = os.path.join(args.work, f"{side}-seed{seed}")
            done = os.path.join(out, "summary.json")
            if not os.path.exists(done):
                tick = time.perf_counter()
                if side == "pretrained":
                    task = make_task("classify", text_a="description", label="section")
                    finetune_job(task, small_pretrained(args), FinetuneSettings(out=out, seed=seed, **common),
                                 overwrite=True, **files)
                else:
                    alphas = dict(alpha_soft=0.0, alpha_hard=1.0, alpha_cos=0.0) if side == "labels" else {}
                    distill_job(args.teacher, out, student_layers=args.layers, seed=seed, overwrite=True, **alphas,
                                **common, **files)
                print(f"{side} seed {seed}: {time.perf_counter() - tick:.0f} s", file=sys.stderr)
            with open(done, encoding="utf-8") as f:
                summary = json.load(f)
            if "test" not in summary:  # fit() has written it, the test file is not predicted yet (another process)
                print(f"{side} seed {seed}: unfinished, left out", file=sys.stderr)
                continue
            rows.setdefault(side, []).append(summary["test"])
    report_quality(args, rows)


def small_pretrained(args) -> str:
    """all-MiniLM-L6-v2's encoder cut to its every other layer, saved once (the student's start
    without a fine-tuned teacher)."""
    from bertlab.distillation.objective import copy_sentence_transformers_files
    from bertlab.distillation.student import student_from_teacher
    from bertlab.interop.hf_bert import save_pretrained
    from bertlab.interop.pretrained import load_pretrained, resolve
    from bertlab.models import BertModel
    folder = os.path.join(args.work, f"minilm-l{args.layers}")
    if not os.path.exists(os.path.join(folder, "config.json")):
        loaded = load_pretrained(args.base)
        model, tokenizer = loaded.model, loaded.tokenizer
        save_pretrained(student_from_teacher(model, args.layers, lambda c: BertModel(c, init_weights=False)), folder,
                        tokenizer)
        copy_sentence_transformers_files(resolve(args.base), folder)
    return folder


def report_quality(args, rows):
    from bertlab.finetune.predict import predict_file
    teacher = predict_file(args.teacher, os.path.join(args.data, "test.tsv"), os.devnull, progress=False)
    print(f"teacher (6 layers): test accuracy {teacher['accuracy']:.4f}, macro-F1 {teacher['macro_f1']:.4f}")
    print("| student | seeds | test accuracy (each) | mean ± sd | macro-F1 mean | share of teacher accuracy |")
    print("|---|---|---|---|---|---|")
    for side, tests in rows.items():
        acc = [t["accuracy"] for t in tests]
        f1 = [t["macro_f1"] for t in tests]
        sd = statistics.stdev(acc) if len(acc) > 1 else 0.0
        print(f"| {side} | {len(acc)} | {', '.join(f'{a:.4f}' for a in acc)} | {statistics.mean(acc):.4f} ± {sd:.4f} "
              f"| {statistics.mean(f1):.4f} | {statistics.mean(acc) / teacher['accuracy']:.1%} |")


# ---- speed ---------------------------------------------------------------------------------------------
def runner(folder, path, batch_size):
    """A function running the folder's model over the file's texts once (what is timed), and its config.
    A task folder reads the file in its own layout and classifies; another model embeds its lines."""
    from bertlab.finetune.objective import predict_outputs
    from bertlab.inference.embed import embed_texts
    from bertlab.interop.load import load_model
    loaded = load_model(folder)
    model, tokenizer = loaded.model.eval(), loaded.tokenizer
    if loaded.kind == "finetuned":
        task = loaded.extra["task"]
        features = task.featurize(task.read(path), tokenizer)
        return (lambda: predict_outputs(task, model, features, tokenizer.pad_token_id, batch_size)), model.config
    texts = read_lines(path)
    return (lambda: embed_texts(model, tokenizer, texts, batch_size=batch_size)), model.config


def speed(args):
    torch.set_num_threads(args.threads)
    texts = read_lines(args.texts)
    runs = {name: runner(folder, args.texts, args.batch_size) for name, folder in (("teacher", args.teacher),
                                                                              ("student", args.student))}
    seconds = {name: [] for name in runs}
    for name, (run, _) in runs.items():
        run()  # warm-up
    for _ in range(args.rounds):
        for name, (run, _) in runs.items():
            tick = time.perf_counter()
            run()
            seconds[name].append(time.perf_counter() - tick)
    ratios = [t / s for t, s in zip(seconds["teacher"], seconds["student"])]
    for name, (_, config) in runs.items():
        median = statistics.median(seconds[name])
        print(f"{name}: {config.num_hidden_layers} layers, {len(texts) / median:,.1f} texts/s (median of "
              f"{args.rounds} rounds, {len(texts)} texts, batch {args.batch_size}, {args.threads} thread(s))")
    print(f"student / teacher speed: median {statistics.median(ratios):.2f}x (rounds: "
          f"{', '.join(f'{r:.2f}' for r in ratios)})")


# ---- cosine --------------------------------------------------------------------------------------------
def encoder(folder):
    from bertlab.interop.load import load_model
    loaded = load_model(folder)
    model = loaded.model
    return (model.bert if hasattr(model, "bert") else model).eval(), loaded.tokenizer


def cosine(args):
    from bertlab.distillation.student import student_from_teacher
    from bertlab.inference.embed import embed_texts
    from bertlab.models import BertModel
    torch.set_num_threads(args.threads)
    texts = [t for path in args.files for t in read_lines(path)]
    teacher, tokenizer = encoder(args.teacher)
    reference = embed_texts(teacher, tokenizer, texts)
    students = {"student": encoder(args.student)[0]}
    if args.layers:
        students[f"every-other-layer copy, untrained ({args.layers} layers)"] = student_from_teacher(
            teacher, args.layers, lambda c: BertModel(c, init_weights=False)).eval()
    for name, model in students.items():
        vectors = embed_texts(model, tokenizer, texts)
        cos = np.sum(vectors * reference, 1) / (np.linalg.norm(vectors, axis=1) * np.linalg.norm(reference, axis=1))
        print(f"{name}: mean cosine to the teacher {cos.mean():.4f} (min {cos.min():.4f}, 10th percentile "
              f"{np.percentile(cos, 10):.4f}) over {len(texts)} held-out sentences")


def read_lines(path):
    """Non-blank lines; a .tsv's `description` column."""
    with open(path, encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f if line.strip()]
    if path.endswith(".tsv"):
        column = lines[0].split("\t").index("description")
        lines = [line.split("\t")[column] for line in lines[1:]]
    return lines


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="mode", required=True)
    q = sub.add_parser("quality")
    q.add_argument("--teacher", required=True)
    q.add_argument("--data", required=True)
    q.add_argument("--work", required=True)
    q.add_argument("--base", default="minilm", help="the pretrained encoder the teacher was fine-tuned from")
    q.add_argument("--seeds", default="0,1,2")
    q.add_argument("--sides", default=",".join(SIDES))
    q.add_argument("--layers", type=int, default=3)
    q.add_argument("--epochs", type=float, default=4.0)
    q.add_argument("--lr", type=float, default=1e-4)
    q.add_argument("--batch-size", type=int, default=16)
    s = sub.add_parser("speed")
    s.add_argument("--teacher", required=True)
    s.add_argument("--student", required=True)
    s.add_argument("--texts", required=True)
    s.add_argument("--rounds", type=int, default=5)
    s.add_argument("--batch-size", type=int, default=32)
    s.add_argument("--threads", type=int, default=1)
    c = sub.add_parser("cosine")
    c.add_argument("--teacher", required=True)
    c.add_argument("--student", required=True)
    c.add_argument("files", nargs="+")
    c.add_argument("--layers", type=int)
    c.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    {"quality": quality, "speed": speed, "cosine": cosine}[args.mode](args)


if __name__ == "__main__":
    main()
