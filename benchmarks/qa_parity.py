"""Extractive QA, bertlab vs HF's run_qa recipe at equal settings, on long answers (issue 35).

    python benchmarks/qa_parity.py --out /tmp/qa_parity                     # option questions, built now
    python benchmarks/qa_parity.py --data data/manpages-qa --out /tmp/qa_small --max-seq-length 128

Without --data it builds, from this machine's manual pages, questions about command-line options
whose answer is the option's description (finetune_tasks.py `options`: 3 to 8 entries of one page a
context, pages split by a hash of their name so test pages are unseen), keeping --train/--dev/--test
questions. Then, for each seed, both sides train MiniLM (all-MiniLM-L6-v2 from its PyPI package)
on the same questions, side order alternating from seed to seed, each in a process of its own:

- bertlab: `bertlab finetune --task squad` (the command line), then its best dev epoch scored on
  test by the same command (--test);
- HF: AutoModelForQuestionAnswering (BertForQuestionAnswering) + Trainer, inputs as run_qa.py's
  prepare_train_features and answers as its postprocess_qa_predictions (finetune_hf.py),
  load_best_model_at_end on dev F1.

Equal settings: epochs, learning rate, batch, max length, warmup proportion, weight decay 0.01,
AdamW eps 1e-6, clip 1.0, max answer length and n-best size. Windows: --doc-stride is google's
doc_stride, the step between window starts, which bertlab takes; HF's `stride` is the overlap of
two windows, so HF gets, for each question, overlap = (max_length - question pieces - 3) - doc_stride,
which cuts the very same windows. Prints a markdown table of every run's dev and test EM/F1, the
training updates each side made (windows and steps), and the mean per side; everything also as
OUT/results.json. --threads (default 1) sets every side's torch threads.

--compare (no training) puts each seed's two test answer files (OUT/bertlab{seed}, OUT/hf{seed})
side by side, question by question, into OUT/compare.json.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def build_data(out, sizes, max_words):
    import finetune_tasks
    folder = os.path.join(out, "data")
    os.makedirs(folder, exist_ok=True)
    stats = finetune_tasks.build_options(folder, sizes=sizes, max_words=max_words)
    print("options data built in", folder, json.dumps(stats), flush=True)
    return folder


def thread_env(threads):
    return {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads), "HF_HUB_OFFLINE": "1"}


def run_bertlab(data, out, seed, a) -> dict:
    cmd = ["bertlab", "finetune", "--task", "squad", "--model", "minilm", "-o", out, "--overwrite", "--quiet",
           "--train", f"{data}/train.json", "--dev", f"{data}/dev.json", "--test", f"{data}/test.json",
           "--epochs", str(a.epochs), "--lr", str(a.lr), "--batch-size", str(a.batch_size),
           "--max-seq-length", str(a.max_seq_length), "--doc-stride", str(a.doc_stride),
           "--max-answer-length", str(a.max_answer_length), "--n-best-size", str(a.n_best_size),
           "--warmup-proportion", str(a.warmup), "--weight-decay", "0.01", "--grad-clip", "1.0",
           "--seed", str(seed), "--device", "cpu", "--precision", "fp32"]
    start = time.perf_counter()
    subprocess.run(cmd, check=True, env=thread_env(a.threads), stdout=subprocess.DEVNULL)
    with open(os.path.join(out, "summary.json"), encoding="utf-8") as f:
        summary = json.load(f)
    keep = lambda s: {k: s[k] for k in ("exact", "f1")}  # noqa: E731
    return {"dev": keep(summary["dev"]), "test": keep(summary["test"]), "steps": summary["steps"],
            "seconds": time.perf_counter() - start, "command": " ".join(cmd)}


def run_hf(data, out, seed, a) -> dict:
    import bench_finetune
    import torch
    torch.set_num_threads(a.threads)
    start = time.perf_counter()
    result = bench_finetune.in_own_process(
        bench_finetune.run_hf_squad, data, out, a.epochs, True, False, lr=a.lr, batch=a.batch_size, seed=seed,
        max_length=a.max_seq_length, doc_stride=a.doc_stride, max_answer_length=a.max_answer_length,
        n_best_size=a.n_best_size, warmup_proportion=a.warmup)
    return {"dev": result["dev"], "test": result["test"], "steps": result["steps"],
            "train_windows": result["train_windows"], "seconds": time.perf_counter() - start}


def inspect(data, a) -> dict:
    """No training: both sides' windows, label positions and answer texts on the same examples, and
    the windows HF's own convention would cut from the same number (--doc-stride as an overlap)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import finetune_hf
    from transformers import AutoTokenizer

    from bertlab.finetune.squad import QuestionAnsweringTask, featurize_squad
    from bertlab.interop import resolve
    from bertlab.tokenization.bert_tokenizer import BertTokenizer
    ours, theirs = BertTokenizer.from_pretrained(resolve("minilm")), AutoTokenizer.from_pretrained(resolve("minilm"))
    task = QuestionAnsweringTask(max_seq_length=a.max_seq_length, doc_stride=a.doc_stride)
    report = {}
    for split in ("train", "dev", "test"):
        examples = task.read(f"{data}/{split}.json")
        mine = featurize_squad(examples, ours, a.max_seq_length, a.doc_stride)
        hf, info = finetune_hf.features_qa(theirs, examples, a.max_seq_length, a.doc_stride)
        same_inputs = sum(m["input_ids"] == h["input_ids"] for m, h in zip(mine, hf)) if len(mine) == len(hf) else None
        same_labels = sum((m["start_position"], m["end_position"]) == (h["start_positions"], h["end_positions"])
                          for m, h in zip(mine, hf)) if len(mine) == len(hf) else None
        hf_overlap, _ = finetune_hf.features_qa(theirs, examples, a.max_seq_length, None, overlap=a.doc_stride)
        report[split] = {
            "questions": len(examples), "bertlab_windows": len(mine), "hf_windows_equal_setting": len(hf),
            "same_input_ids": same_inputs, "same_labels": same_labels,
            f"hf_windows_stride_{a.doc_stride}_as_overlap": len(hf_overlap),
            "windows_labelled_cls": sum(m["start_position"] == 0 for m in mine),
            "answer_in_no_window": sum(not any(m["start_position"] > 0 for m in mine if m["example_index"] == i)
                                       for i in range(len(examples))),
            "answers_recovered_exactly": _recovered(examples, mine), **_max_context_misses(examples, mine)}
    print(json.dumps(report, indent=1))
    return report


def _recovered(examples, features) -> float:
    """Share of gold answers whose text, cut from the context by the offsets of the labelled tokens,
    equals the gold text (whitespace, punctuation and Unicode round trip)."""
    done, good = set(), 0
    for f in features:
        i = f["example_index"]
        if f["start_position"] > 0 and i not in done:
            done.add(i)
            offsets = f["token_offsets"]
            text = examples[i].context[offsets[f["start_position"]][0]:offsets[f["end_position"]][1]]
            good += text == examples[i].answers[0][0]
    return round(good / max(len(done), 1), 4)


def _max_context_misses(examples, features) -> dict:
    """Questions whose whole answer is in some window, but not in the window where its first token
    has the most context: the only window whose start bertlab's decoder accepts."""
    misses = whole = 0
    by_example = {}
    for f in features:
        by_example.setdefault(f["example_index"], []).append(f)
    for i, feats in by_example.items():
        holding = [f for f in feats if f["start_position"] > 0]
        if not holding:
            continue
        whole += 1
        if not any(f["token_is_max_context"][f["start_position"]] for f in holding):
            misses += 1
    return {"answer_whole_in_a_window": whole, "whole_answer_not_in_start_max_context_window": misses}


def decoders(data, out, a) -> list[dict]:
    """No training: each bertlab model of OUT (bertlab{seed}/model) on test, its logits decoded by
    bertlab's decoder (max-context window, --max-answer-length), by run_qa's (best score over all
    windows, finetune_hf.py) and by bertlab's at the old default max answer length of 30 pieces."""
    import dataclasses

    import finetune_hf
    import torch

    from bertlab.interop.finetuned import load_finetuned
    from bertlab.finetune.tasks import task_from_state
    from bertlab.finetune.squad_metrics import squad_evaluate
    from bertlab.finetune.objective import predict_outputs
    from bertlab.inference.qa import QaSettings, answer_questions
    torch.set_num_threads(a.threads)
    rows = []
    for seed in (int(s) for s in a.seeds.split(",")):
        loaded = load_finetuned(os.path.join(out, f"bertlab{seed}", "model"))
        from bertlab.models.accelerate import accelerate
        accelerate(loaded.model)
        task, model, tokenizer = task_from_state(loaded), loaded.model, loaded.tokenizer
        examples = task.read(f"{data}/test.json")
        features = task.featurize(examples, tokenizer)
        outputs = predict_outputs(task, model, features, tokenizer.pad_token_id)
        gold = {e.qas_id: [t for t, _ in e.answers] for e in examples}
        settings = QaSettings(n_best_size=a.n_best_size, max_answer_length=a.max_answer_length)
        answers = lambda s: {e.qas_id: x.answer for e, x in  # noqa: E731
                             zip(examples, answer_questions([e.context for e in examples], features, outputs, s))}
        info = [{"example_index": f["example_index"], "offsets": f["token_offsets"],
                 "context": [i for i, o in enumerate(f["token_offsets"]) if o is not None]} for f in features]
        runqa = finetune_hf.answers_from_logits([o[0] for o in outputs], [o[1] for o in outputs], info, examples,
                                                a.max_answer_length, a.n_best_size)
        ours = answers(settings)
        row = {"seed": seed, "bertlab": squad_evaluate(gold, ours), "run_qa": squad_evaluate(gold, runqa),
               "bertlab_30": squad_evaluate(gold, answers(dataclasses.replace(settings, max_answer_length=30))),
               "answers_differing_bertlab_vs_run_qa": sum(ours[q] != runqa[q] for q in ours)}
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def _answers(path) -> dict:
    """{question id: answer} of a test_predictions.jsonl (either side's)."""
    with open(path, encoding="utf-8") as f:
        return {row["id"]: row["answer"] for row in map(json.loads, f)}


def _hf_test_answers(data, folder, a) -> dict:
    """{question id: answer} of an HF run's folder: its test_predictions.jsonl, or, for runs made
    before the benchmark wrote one, its best checkpoint (trainer_state.json's best_model_checkpoint)
    rescored on test the way run_hf_squad scores it (finetune_hf.py's windows and decoder)."""
    path = os.path.join(folder, "test_predictions.jsonl")
    if not os.path.exists(path):
        import finetune_hf
        import torch
        from transformers import AutoTokenizer, BertForQuestionAnswering

        from bertlab.finetune.squad import QuestionAnsweringTask
        torch.set_num_threads(a.threads)
        checkpoints = sorted(d for d in os.listdir(folder) if d.startswith("checkpoint-"))
        with open(os.path.join(folder, checkpoints[-1], "trainer_state.json"), encoding="utf-8") as f:
            best = json.load(f)["best_model_checkpoint"]
        best = os.path.join(folder, os.path.basename(best))
        task = QuestionAnsweringTask(max_seq_length=a.max_seq_length, doc_stride=a.doc_stride)
        examples = task.read(os.path.join(data, "test.json"))
        tok = AutoTokenizer.from_pretrained(best)
        model = BertForQuestionAnswering.from_pretrained(best).eval()
        inputs, info = finetune_hf.features_qa(tok, examples, a.max_seq_length, a.doc_stride)
        starts, ends = [], []
        with torch.inference_mode():
            for k in range(0, len(inputs), 32):
                batch = tok.pad([{key: x[key] for key in ("input_ids", "token_type_ids", "attention_mask")}
                                 for x in inputs[k:k + 32]], return_tensors="pt")
                out = model(**batch)
                starts += out.start_logits.tolist()
                ends += out.end_logits.tolist()
        answers = finetune_hf.answers_from_logits(starts, ends, info, examples, a.max_answer_length, a.n_best_size)
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            for e in examples:
                f.write(json.dumps({"id": e.qas_id, "answer": answers.get(e.qas_id, ""),
                                    "rescored_from": os.path.basename(best)}) + "\n")
        os.replace(path + ".tmp", path)
    return _answers(path)


def compare(data, out, a) -> dict:
    """No training: each seed's bertlab and HF test answers (OUT/bertlab{seed}, OUT/hf{seed}) side by
    side, question by question: which answers differ and which side each difference favours, how
    each side's wrong answers are wrong (cut short, run long, overlapping, missed), and F1 by the
    gold answer's length in words."""
    from bertlab.finetune.squad import QuestionAnsweringTask
    from bertlab.finetune.squad_metrics import exact_match, f1_score, normalize_answer
    examples = QuestionAnsweringTask().read(os.path.join(data, "test.json"))
    gold = {e.qas_id: [t for t, _ in e.answers] for e in examples}
    words = {e.qas_id: len(e.answers[0][0].split()) for e in examples}
    buckets = {"1-10 words": range(1, 11), "11-22 words": range(11, 23), "23+ words": range(23, 10 ** 6)}

    def kind(prediction, answers):
        p = normalize_answer(prediction)
        if any(exact_match(prediction, g) for g in answers):
            return "exact"
        if any(p and p in normalize_answer(g) for g in answers):
            return "cut short"
        if any(normalize_answer(g) in p for g in answers):
            return "runs long"
        return "overlaps" if max(f1_score(prediction, g) for g in answers) > 0 else "missed"

    report = {"seeds": []}
    for seed in (int(s) for s in a.seeds.split(",")):
        sides = {"bertlab": _answers(os.path.join(out, f"bertlab{seed}", "test_predictions.jsonl")),
                 "hf": _hf_test_answers(data, os.path.join(out, f"hf{seed}"), a)}
        f1 = {side: {q: max(f1_score(answers.get(q, ""), g) for g in gold[q]) for q in gold}
              for side, answers in sides.items()}
        differ = [q for q in gold if sides["bertlab"].get(q, "") != sides["hf"].get(q, "")]
        row = {"seed": seed, "questions": len(gold),
               "f1": {side: 100 * statistics.mean(v.values()) for side, v in f1.items()},
               "answers_differing": len(differ),
               "bertlab_better": sum(f1["bertlab"][q] > f1["hf"][q] for q in differ),
               "hf_better": sum(f1["hf"][q] > f1["bertlab"][q] for q in differ),
               "kinds": {side: {k: sum(kind(answers.get(q, ""), gold[q]) == k for q in gold)
                                for k in ("exact", "cut short", "runs long", "overlaps", "missed")}
                         for side, answers in sides.items()},
               "f1_by_length": {name: {"questions": sum(words[q] in r for q in gold),
                                       **{side: 100 * statistics.mean(scores) if (scores := [f1[side][q] for q in gold if words[q] in r])
                                          else None for side in sides}}
                                for name, r in buckets.items()}}
        report["seeds"].append(row)
        report.setdefault("differing", {}).update({f"{seed}:{q}": {"gold": gold[q][0], **{s: sides[s].get(q, "") for s in sides}}
                                               for q in differ})
        print(json.dumps(row), flush=True)
    return report


def table(results) -> str:
    rows = ["| side | seed | dev EM | dev F1 | test EM | test F1 | updates (steps) | minutes |",
            "|---|---|---|---|---|---|---|---|"]
    for side in ("bertlab", "hf"):
        runs = [r for r in results if r["side"] == side]
        for r in runs:
            rows.append(f"| {side} | {r['seed']} | {100 * r['dev']['exact']:.1f} | {100 * r['dev']['f1']:.1f} | "
                        f"{100 * r['test']['exact']:.1f} | {100 * r['test']['f1']:.1f} | {r['steps']} | "
                        f"{r['seconds'] / 60:.1f} |")
        if runs:
            mean = lambda split, k: 100 * statistics.mean(r[split][k] for r in runs)  # noqa: E731
            rows.append(f"| **{side} mean** | {len(runs)} seeds | {mean('dev', 'exact'):.1f} | {mean('dev', 'f1'):.1f} | "
                        f"{mean('test', 'exact'):.1f} | **{mean('test', 'f1'):.1f}** | "
                        f"{statistics.mean(r['steps'] for r in runs):g} | |")
    return "\n".join(rows)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", help="a SQuAD v1.1 folder (train/dev/test.json); default: option questions built now")
    parser.add_argument("--out", required=True)
    parser.add_argument("--train", type=int, default=1500)
    parser.add_argument("--dev", type=int, default=300)
    parser.add_argument("--test", type=int, default=300)
    parser.add_argument("--max-words", type=int, default=150, help="built data: words of a context at most")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--sides", default="bertlab,hf")
    parser.add_argument("--epochs", type=float, default=2)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--max-seq-length", type=int, default=256)
    parser.add_argument("--doc-stride", type=int, default=128, help="google's: the step between window starts")
    parser.add_argument("--max-answer-length", type=int, default=128)
    parser.add_argument("--n-best-size", type=int, default=20)
    parser.add_argument("--warmup", type=float, default=0.1, help="warmup proportion of the steps, both sides")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--inspect", action="store_true",
                        help="no training: compare both sides' windows, labels and answer texts on the data")
    parser.add_argument("--decoders", action="store_true",
                        help="no training: rescore OUT's bertlab models on test with both sides' decoders")
    parser.add_argument("--compare", action="store_true",
                        help="no training: OUT's bertlab and HF test answers of each seed, question by question")
    a = parser.parse_args()
    os.makedirs(a.out, exist_ok=True)
    data = a.data or build_data(a.out, {"train": a.train, "dev": a.dev, "test": a.test}, a.max_words)
    if a.decoders:
        with open(os.path.join(a.out, "decoders.json"), "w", encoding="utf-8") as f:
            json.dump(decoders(data, a.out, a), f, indent=1)
        return
    if a.compare:
        with open(os.path.join(a.out, "compare.json"), "w", encoding="utf-8") as f:
            json.dump(compare(data, a.out, a), f, indent=1)
        return
    if a.inspect:
        with open(os.path.join(a.out, "inspect.json"), "w", encoding="utf-8") as f:
            json.dump(inspect(data, a), f, indent=1)
        return
    runners = {"bertlab": run_bertlab, "hf": run_hf}
    sides = a.sides.split(",")
    results = []
    for n, seed in enumerate(int(s) for s in a.seeds.split(",")):
        for side in sides if n % 2 == 0 else sides[::-1]:  # each side first in turn
            result = {"side": side, "seed": seed, **runners[side](data, os.path.join(a.out, f"{side}{seed}"), seed, a)}
            results.append(result)
            print(json.dumps(result), flush=True)
            with open(os.path.join(a.out, "results.json"), "w", encoding="utf-8") as f:
                json.dump({"settings": vars(a), "data": data, "runs": results}, f, indent=1)
    print(table(results))


if __name__ == "__main__":
    main()
