"""Fine-tuning, bertlab vs HF Trainer: same checkpoint, data, batch size and hyper-parameters.

    python benchmarks/bench_finetune.py --data DIR [--epochs 3] [--mode quality|speed]
    python benchmarks/bench_finetune.py --task ner|squad [--data DIR] [--mode quality|speed] [--repeats 3]

DIR holds train/dev/test .tsv with `section` labels and `description` texts (built from this
machine's manual pages by data/manpages/make_manpages.py). Both sides start from the real
all-MiniLM-L6-v2 with a new classifier head, AdamW (--lr, default 5e-5; weight decay 0.01, eps 1e-6),
10% warmup then linear decay, dropout 0.1, --batch-size (default 32), dynamic padding, an evaluation on dev after every
epoch and the best dev model kept, then scored on test. Both use torch's fused AdamW (HF Trainer's default).

Timing: bertlab's seconds cover finetune() whole -- tokenizing the data, every step, and saving the
model folder; HF's cover trainer.train() only (its tokenizing happens before). The ratio is therefore
conservative for bertlab. Both sides also report their training steps alone
(`train_steps_examples_per_s`: from the end of one optimizer step to the end of the next, so
fetching and collating each batch counts, on both sides), printed as a second table. torch's
optimizer module imports torch._dynamo on first use (~1.4 s here); transformers imports it anyway,
so the benchmark imports it before timing either side.

--mode quality: the above, plus a TF-IDF + logistic-regression baseline on the same split.
--mode speed: training throughput only (one epoch, no evaluation), HF Trainer with and without
its `group_by_length`. Ratios are examples/s against HF Trainer's defaults.

--precision bf16 runs both sides under bf16 autocast (bertlab's --precision bf16, HF's bf16=True).

--seeds 0,1,2 repeats each side per seed (a different classifier-head init and data order) and
prints mean and spread; --sides picks which of tfidf,bertlab,hf run; --max-train N keeps a
random N of the training rows (the same N for every side and seed: a point of a learning curve).

Memory: each side runs in a fresh process of its own, and reports that process's peak resident
memory (`peak_rss_mb`, getrusage's ru_maxrss, as bertlab's summary.json reports it), printed as a
third table: in one process the second side's peak would be the larger of the two. Linux carries a
process's high-water mark across exec, so a side's peak counts from this process's peak when the
side was started; that floor is printed beside the table (it holds torch and the data, not a run).

--task ner / --task squad: token classification (CoNLL files) and extractive QA (SQuAD v1.1 JSON),
by default on sets built at run time from this machine's manual pages (finetune_tasks.py says how
the tags and the questions are made; --data DIR uses a folder built by it instead), max length 128.
HF's side encodes them as its run_ner.py / run_qa.py examples do (finetune_hf.py). --mode speed
runs bertlab (its default settings) and HF Trainer with group_by_length, --repeats times each,
interleaved, and prints the median examples/s (sentences or questions) and their ratio; --mode
quality trains --epochs, keeps the best dev epoch and prints dev and test entity F1 (ner) or exact
match / F1 (squad) of both sides.
"""
import argparse
import concurrent.futures
import csv
import json
import multiprocessing
import os
import sys
import tempfile
import time

import numpy as np
import torch
import torch._dynamo  # noqa: F401  (see the docstring: a one-time import neither side should be timed for)

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, os.path.dirname(__file__))
import finetune_hf  # noqa: E402
import finetune_tasks  # noqa: E402
from harness import Row, print_table  # noqa: E402

from bertlab.finetune import metrics  # noqa: E402
from bertlab.finetune.classification import SequenceClassificationTask  # noqa: E402
from bertlab.finetune.entities import entity_scores  # noqa: E402
from bertlab.interop.finetuned import load_finetuned  # noqa: E402
from bertlab.finetune.tasks import task_from_state  # noqa: E402
from bertlab.finetune.ner import TokenClassificationTask  # noqa: E402
from bertlab.finetune.setup import load_base_model  # noqa: E402
from bertlab.finetune.squad import QuestionAnsweringTask  # noqa: E402
from bertlab.finetune.squad_metrics import squad_evaluate  # noqa: E402
from bertlab.finetune.objective import FinetuneSettings, finetune, predict_outputs  # noqa: E402
from bertlab.interop import resolve  # noqa: E402
from bertlab.training.memory import peak_rss_mb  # noqa: E402


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
    """tfidf_classify's baseline on words and word bigrams, C chosen on dev from 1-100."""
    from tfidf_classify import tfidf_baseline as baseline
    best = baseline(*data, features="words", cs=(1, 3, 10, 30, 100))
    return {"C": best["C"], "dev_accuracy": best["dev_accuracy"], "accuracy": best["test_accuracy"],
            "macro_f1": best["test_macro_f1"]}


# Each task's train/dev/test files and the scores reported for it.
FILES = {"classify": ("train.tsv", "dev.tsv", "test.tsv"), "ner": ("train.txt", "dev.txt", "test.txt"),
         "squad": ("train.json", "dev.json", "test.json")}
PRECISION = "fp32"  # --precision: both sides' autocast (set once by main)
SCORES = {"classify": ("accuracy", "macro_f1"), "ner": ("f1", "precision", "recall"), "squad": ("exact", "f1")}


def bertlab_task(name):
    if name == "ner":
        return TokenClassificationTask()
    if name == "squad":
        return QuestionAnsweringTask(max_seq_length=128)  # run_hf_squad's default max_length
    return SequenceClassificationTask(text_a="description", label="section")


def run_bertlab(folder, out, epochs, evaluate=True, lr=5e-5, batch=32, seed=0, group_by_length=False,
                task_name="classify"):
    task = bertlab_task(task_name)
    train_file, dev_file, test_file = (os.path.join(folder, f) for f in FILES[task_name])
    train = task.read(train_file)
    task.fit_labels(train)
    dev = task.read(dev_file) if evaluate else []
    built = load_base_model(task, "minilm", quiet=True, seed=seed)
    model, tokenizer = built.model, built.tokenizer
    settings = FinetuneSettings(epochs=epochs, batch_size=batch, lr=lr, seed=seed, progress=False,
                                group_by_length=group_by_length, precision=PRECISION)
    start = time.perf_counter()
    summary = finetune(task, model, tokenizer, train, dev, out, settings)
    seconds = time.perf_counter() - start
    result = {"seconds": seconds, "examples_per_s": len(train) * epochs / seconds, "dev": summary.get("dev"),
              "train_steps_examples_per_s": summary["train_examples_per_s"]}  # steps only, no tokenizing/saving
    if evaluate:
        loaded = load_finetuned(os.path.join(out, "model"))
        from bertlab.models.accelerate import accelerate
        accelerate(loaded.model)
        task, model, tokenizer = task_from_state(loaded), loaded.model, loaded.tokenizer
        test = task.read(test_file)
        features = task.featurize(test, tokenizer)
        outputs = predict_outputs(task, model, features, tokenizer.pad_token_id)
        result["test"] = {k: v for k, v in task.evaluate(test, features, outputs).items() if k in SCORES[task_name]}
    return result


def hf_trainer(model, collator, train, dev, out, epochs, evaluate, group_by_length, lr, batch, seed,
               compute_metrics, metric, metrics_read_inputs=False, warmup_proportion=0.1):
    """HF Trainer with the settings bertlab's fine-tuning uses (see the module docstring)."""
    import inspect
    import math

    from transformers import Trainer, TrainingArguments
    total_steps = math.ceil(epochs * math.ceil(len(train) / batch))
    grouping = {"group_by_length": group_by_length}  # transformers 4.x; 5.x names it a sampling strategy
    if "group_by_length" not in inspect.signature(TrainingArguments).parameters:
        grouping = {"train_sampling_strategy": "group_by_length"} if group_by_length else {}
    args = TrainingArguments(
        output_dir=out, num_train_epochs=epochs, per_device_train_batch_size=batch, per_device_eval_batch_size=64,
        learning_rate=lr, weight_decay=0.01, adam_epsilon=1e-6, warmup_steps=int(warmup_proportion * total_steps),
        lr_scheduler_type="linear", **grouping,
        eval_strategy="epoch" if evaluate else "no", save_strategy="epoch" if evaluate else "no",
        load_best_model_at_end=evaluate, metric_for_best_model=metric, save_total_limit=1,
        report_to=[], disable_tqdm=True, seed=seed, use_cpu=True, bf16=PRECISION == "bf16",
        dataloader_num_workers=0, logging_strategy="no",
        **({"include_for_metrics": ["inputs"]} if metrics_read_inputs else {}))  # finetune_hf.in_dataset_order
    return Trainer(model=model, args=args, train_dataset=train, eval_dataset=dev if evaluate else None,
                   data_collator=collator, compute_metrics=compute_metrics, callbacks=[StepClock()])


class StepClock:
    """Seconds spent in training steps, batch fetching and collation included: from the start of
    each epoch, or the end of the previous step, to the end of a step (what bertlab's engine counts
    as train_seconds). Evaluation and saving happen after on_step_end and are left out."""

    seconds = 0.0

    def __getattr__(self, name):  # every other TrainerCallback event: nothing to do
        if name.startswith("on_"):
            return lambda *args, **kwargs: None
        raise AttributeError(name)

    def on_epoch_begin(self, *args, **kwargs):
        self.last = time.perf_counter()

    def on_step_end(self, *args, **kwargs):
        now = time.perf_counter()
        self.seconds += now - self.last
        self.last = now


def timed_train(trainer, examples, epochs) -> dict:
    clock = next(c for c in trainer.callback_handler.callbacks if isinstance(c, StepClock))
    start = time.perf_counter()
    trainer.train()
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "examples_per_s": examples * epochs / seconds,
            "train_steps_examples_per_s": round(examples * epochs / clock.seconds, 1)}


def run_hf(folder, out, epochs, evaluate=True, group_by_length=False, lr=5e-5, batch=32, seed=0):
    from transformers import AutoTokenizer, BertForSequenceClassification, DataCollatorWithPadding
    data = [read(os.path.join(folder, f"{s}.tsv")) for s in ("train", "dev", "test")]
    labels = sorted(set(data[0][1]))
    tok = AutoTokenizer.from_pretrained(resolve("minilm"))
    encode = lambda xs, ys: [{**tok(x, truncation=True, max_length=128), "labels": labels.index(y)}  # noqa: E731
                             for x, y in zip(xs, ys)]
    train, dev, test = (encode(*d) for d in data)
    torch.manual_seed(seed)
    model = BertForSequenceClassification.from_pretrained(resolve("minilm"), num_labels=len(labels))

    def compute(p):
        pred = np.asarray(p.predictions).argmax(-1)
        return scores(list(p.label_ids), list(pred))

    trainer = hf_trainer(model, DataCollatorWithPadding(tok), train, dev, out, epochs, evaluate,
                         group_by_length, lr, batch, seed, compute, "accuracy")
    result = timed_train(trainer, len(train), epochs)
    if evaluate:
        test_scores = trainer.evaluate(test)
        result["test"] = {k: test_scores[f"eval_{k}"] for k in ("accuracy", "macro_f1")}
    return result


def scored(trainer, features, compute_metrics, keys) -> dict:
    """The trained model's scores on `features` (compute_metrics reads that set's examples)."""
    trainer.compute_metrics = compute_metrics
    metrics = trainer.evaluate(features)
    return {k: metrics[f"eval_{k}"] for k in keys}


def run_hf_ner(folder, out, epochs, evaluate=True, group_by_length=True, lr=5e-5, batch=32, seed=0):
    from transformers import AutoTokenizer, BertForTokenClassification, DataCollatorForTokenClassification
    task = bertlab_task("ner")
    examples = [task.read(os.path.join(folder, f)) for f in FILES["ner"]]
    task.fit_labels(examples[0])
    splits = [[(e.words, e.tags) for e in split] for split in examples]
    tok = AutoTokenizer.from_pretrained(resolve("minilm"))
    train, dev, test = (finetune_hf.features_ner(tok, sentences, task.labels, 128) for sentences in splits)
    torch.manual_seed(seed)
    model = BertForTokenClassification.from_pretrained(resolve("minilm"), num_labels=len(task.labels))

    def ner_scores(features, sentences):
        def compute(p):
            logits = finetune_hf.in_dataset_order(p.predictions, p.inputs, features)
            predicted = finetune_hf.tags_from_logits(logits, features, sentences, task.labels)
            found = entity_scores([tags for _, tags in sentences], predicted)
            return {k: found[k] for k in SCORES["ner"]}
        return compute

    trainer = hf_trainer(model, DataCollatorForTokenClassification(tok), train, dev, out, epochs, evaluate,
                         group_by_length, lr, batch, seed, ner_scores(dev, splits[1]), "f1", metrics_read_inputs=True)
    result = timed_train(trainer, len(train), epochs)
    if evaluate:
        result["dev"] = scored(trainer, dev, ner_scores(dev, splits[1]), SCORES["ner"])
        result["test"] = scored(trainer, test, ner_scores(test, splits[2]), SCORES["ner"])
    return result


def run_hf_squad(folder, out, epochs, evaluate=True, group_by_length=True, lr=5e-5, batch=32, seed=0,
                 max_length=128, doc_stride=None, max_answer_length=30, n_best_size=20, warmup_proportion=0.1):
    """HF Trainer on the squad files of `folder`, inputs and answers as run_qa.py makes them
    (finetune_hf.py); doc_stride is bertlab's (google's step between windows, default half a
    window), turned into HF's overlap for each question."""
    from transformers import AutoTokenizer, BertForQuestionAnswering, DataCollatorWithPadding
    task = QuestionAnsweringTask(max_seq_length=max_length, **({"doc_stride": doc_stride} if doc_stride else {}))
    splits = [task.read(os.path.join(folder, f)) for f in FILES["squad"]]
    tok = AutoTokenizer.from_pretrained(resolve("minilm"))
    (train, _), dev, test = (finetune_hf.features_qa(tok, examples, max_length, task.options["doc_stride"])
                             for examples in splits)
    torch.manual_seed(seed)
    model = BertForQuestionAnswering.from_pretrained(resolve("minilm"))

    last_answers = {}                     # the latest evaluation's {question id: answer}

    def squad_scores(features, examples):
        inputs, info = features

        def compute(p):
            logits = finetune_hf.in_dataset_order(p.predictions, p.inputs, inputs)
            answers = finetune_hf.answers_from_logits(*logits, info, examples, max_answer_length, n_best_size)
            last_answers.clear()
            last_answers.update(answers)
            found = squad_evaluate({e.qas_id: [text for text, _ in e.answers] for e in examples}, answers)
            return {k: found[k] for k in SCORES["squad"]}
        return compute

    trainer = hf_trainer(model, DataCollatorWithPadding(tok), train, dev[0], out, epochs, evaluate,
                         group_by_length, lr, batch, seed, squad_scores(dev, splits[1]), "f1",
                         metrics_read_inputs=True, warmup_proportion=warmup_proportion)
    result = timed_train(trainer, len(splits[0]), epochs)
    result["windows_per_question"] = len(train) / len(splits[0])
    result["train_windows"], result["steps"] = len(train), trainer.state.global_step
    if evaluate:
        result["dev"] = scored(trainer, dev[0], squad_scores(dev, splits[1]), SCORES["squad"])
        result["test"] = scored(trainer, test[0], squad_scores(test, splits[2]), SCORES["squad"])
        # the test answers, one JSON line per question as bertlab's test_predictions.jsonl, so that
        # the two sides can be compared question by question
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, "test_predictions.jsonl"), "w", encoding="utf-8") as f:
            for e in splits[2]:
                f.write(json.dumps({"id": e.qas_id, "answer": last_answers.get(e.qas_id, "")}) + "\n")
    return result


def in_own_process(run, *args, **kwargs) -> dict:
    """run(*args, **kwargs) in a fresh interpreter (the module docstring's Memory), its result with
    that process's `peak_rss_mb`; the precision and thread count are this process's."""
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=context) as pool:
        return pool.submit(_measured, run, PRECISION, torch.get_num_threads(), args, kwargs).result()


def _measured(run, precision, threads, args, kwargs):
    global PRECISION
    PRECISION = precision
    torch.set_num_threads(threads)
    return {**run(*args, **kwargs), "peak_rss_mb": peak_rss_mb()}


def summarize(runs, keys):
    """Mean and min..max of each test score over seeds."""
    out = {}
    for key in keys:
        values = [r["test"][key] for r in runs]
        out[key] = {"mean": float(np.mean(values)), "min": min(values), "max": max(values)}
    return out


def built_data(task_name, data, tmp, max_train):
    """The task's data folder: --data, or for ner/squad a set built now from this machine's manual pages."""
    if data is None:
        if task_name == "classify":
            raise ValueError("--task classify needs --data DIR (data/manpages/make_manpages.py builds one)")
        data = f"{tmp}/{task_name}"
        os.makedirs(data)
        build = finetune_tasks.build_ner if task_name == "ner" else finetune_tasks.build_squad
        print(f"{task_name} data built in {data}:", json.dumps(build(data, sizes={"train": 3000, "dev": 400,
                                                                                   "test": 400})), flush=True)
    if max_train and task_name != "classify":
        raise ValueError("--max-train is for --task classify")
    return subsample(data, max_train, f"{tmp}/data") if max_train else data


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", choices=["classify", "ner", "squad"], default="classify")
    parser.add_argument("--data", help="the task's data folder (ner, squad: built from the manual pages if left out)")
    parser.add_argument("--epochs", type=float, default=3)
    parser.add_argument("--mode", choices=["quality", "speed"], default="quality")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seeds", default="0", help="comma-separated seeds, each side run once per seed")
    parser.add_argument("--sides", default=None,
                        help="which of tfidf,bertlab,hf,hf_grouped to run (default: tfidf,bertlab,hf for classify, "
                             "bertlab,hf_grouped for ner and squad; speed mode adds hf_grouped to classify's)")
    parser.add_argument("--repeats", type=int, default=1, help="speed mode: runs of each side, interleaved (median)")
    parser.add_argument("--max-train", type=int, default=None, help="keep a random N training rows")
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--group-by-length", action="store_true",
                        help="bertlab side: length-grouped batches (default: plain shuffled, as HF Trainer's default)")
    parser.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                        help="both sides: fp32, or bf16 autocast (bertlab --precision bf16, HF bf16=True); "
                             "for CPUs with native bf16 (AVX-512 BF16, AMX)")
    args = parser.parse_args()
    global PRECISION
    PRECISION = args.precision
    torch.set_num_threads(args.threads)
    tmp = tempfile.mkdtemp(prefix="bench_finetune_")
    folder = built_data(args.task, args.data, tmp, args.max_train)
    seeds = [int(s) for s in args.seeds.split(",")]
    evaluate = args.mode == "quality"
    sides = (args.sides or ("tfidf,bertlab,hf" if args.task == "classify" else "bertlab,hf_grouped")).split(",")
    if not evaluate and args.task == "classify" and args.sides is None:
        sides.append("hf_grouped")  # speed mode compares with both of HF's batchings
    epochs = args.epochs if evaluate else 1
    results = {}
    if evaluate and "tfidf" in sides and args.task == "classify":
        data = [read(os.path.join(folder, f"{s}.tsv")) for s in ("train", "dev", "test")]
        results["tfidf"] = tfidf_baseline(data)
        print("TF-IDF + LR:", json.dumps(results["tfidf"]), flush=True)
    hf = {"classify": run_hf, "ner": run_hf_ner, "squad": run_hf_squad}[args.task]
    runners = {"bertlab": lambda out, seed: in_own_process(run_bertlab, folder, out, epochs, evaluate, args.lr,
                                                          args.batch_size, seed, args.group_by_length, args.task),
               "hf": lambda out, seed: in_own_process(hf, folder, out, epochs, evaluate, False, lr=args.lr,
                                                     batch=args.batch_size, seed=seed),
               "hf_grouped": lambda out, seed: in_own_process(hf, folder, out, epochs, evaluate, True, lr=args.lr,
                                                             batch=args.batch_size, seed=seed)}
    order = [side for side in ("bertlab", "hf", "hf_grouped") if side in sides]
    for repeat in range(args.repeats if not evaluate else 1):
        for side in order if repeat % 2 == 0 else order[::-1]:  # interleaved, each side first in turn
            for seed in seeds:
                results.setdefault(side, []).append(runners[side](f"{tmp}/{side}{seed}-{repeat}", seed))
                print(f"{side} seed {seed} run {repeat + 1}:", json.dumps(results[side][-1]), flush=True)
    if evaluate:
        print(f"test scores over seeds {seeds}:")
        for side in order:
            print(f"  {side}: {json.dumps(summarize(results[side], SCORES[args.task]))}")
    train_rows = epochs * {"classify": lambda: len(read(f"{folder}/train.tsv")[0]),
                           "ner": lambda: len(bertlab_task("ner").read(f"{folder}/train.txt")),
                           "squad": lambda: len(bertlab_task("squad").read(f"{folder}/train.json"))}[args.task]()
    labels = {"hf": "HF Trainer", "hf_grouped": "HF Trainer group_by_length", "bertlab": "bertlab"}
    rows = [Row(f"fine-tune MiniLM ({args.task}), {epochs:g} epoch(s)", labels[side], train_rows, "examples/s",
                [r["seconds"] for r in results[side]]) for side in ("hf", "hf_grouped", "bertlab") if side in results]
    if rows:
        baseline = "HF Trainer" if "hf" in results else "HF Trainer group_by_length"
        stat = "median" if args.repeats > 1 else "best"
        print_table(rows, baseline=baseline, stat=stat)
        print("training steps alone (batches fetched and collated, forward, backward, clipping, AdamW):")
        print_table([Row(row.workload.replace("epoch(s)", "epoch(s), steps only"), row.implementation, train_rows,
                         "examples/s", [train_rows / r["train_steps_examples_per_s"] for r in results[side]])
                     for row, side in zip(rows, [s for s in ("hf", "hf_grouped", "bertlab") if s in results])],
                    baseline=baseline, stat=stat)
        print_memory(rows, results, [s for s in ("hf", "hf_grouped", "bertlab") if s in results])
    print(json.dumps(results, indent=1))


def print_memory(rows, results, sides):
    """Each side's peak resident memory (the largest over its runs), each run in a process of its own."""
    print(f"peak resident memory, each run in its own process (this process's own peak, a floor: "
          f"{peak_rss_mb():,.0f} MB):")
    print("| workload | implementation | peak RSS (MB) | runs |")
    print("|---|---|---|---|")
    for row, side in zip(rows, sides):
        peaks = [r["peak_rss_mb"] for r in results[side]]
        runs = ", ".join(f"{p:,.0f}" for p in peaks)
        print(f"| {row.workload} | {row.implementation} | {max(peaks):,.0f} | {runs} |")


if __name__ == "__main__":
    main()
