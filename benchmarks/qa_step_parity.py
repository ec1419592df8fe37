"""Extractive QA, one training step at a time: bertlab's engine step against HF's Trainer step, from
the same weights on the same batches (issue 35's QA half: is there a difference in training itself?).

    python benchmarks/qa_step_parity.py --data /tmp/qa_big/data --steps 30

Both sides start from all-MiniLM-L6-v2 with the *same* new span head (bertlab's, drawn from
--seed, copied into HF's `qa_outputs`), dropout off (so a step is deterministic), and take the same
batches: --batch-size windows a step, in one shuffled order, cut by bertlab's featurizer (whose
windows and labels equal run_qa's, `qa_parity.py --inspect`) and padded to the batch's longest.

- bertlab: `finetune.objective` optimizer and scheduler, `training.engine.train_step`, the task's loss;
- HF: `BertForQuestionAnswering` with its own loss (start_positions/end_positions), optimizer and
  scheduler from `Trainer.create_optimizer_and_scheduler` with the qa_parity settings, clip 1.0.

Variants change one thing on the HF side at a time, to price each remaining difference:
  hf           HF as it is: its head also scores padding, its warmup starts at lr 0;
  hf-masked    padding logits masked out of HF's loss (as bertlab does);
  hf-ours-lr   HF's optimizer stepped with bertlab's schedule ((step+1)/warmup in warmup);
  hf-both      both of the above: should follow bertlab to rounding if nothing else differs.

Prints each variant's loss per step and its largest difference from bertlab's, and writes
OUT/step_parity.json. One thread; takes a few minutes for 30 steps at length 256.
"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

VARIANTS = ["hf", "hf-masked", "hf-ours-lr", "hf-both"]


def batches_of(task, features, batch_size, steps, seed, pad_id):
    order = np.random.default_rng(seed).permutation(len(features))
    picks = [order[(i * batch_size) % len(order):][:batch_size] for i in range(steps)]
    return [task.collate([features[j] for j in p], pad_id) for p in picks]


def run_bertlab(model, batches, task, a, total_steps):
    from bertlab.finetune.objective import FineTuning, FinetuneSettings
    from bertlab.training.engine import train_step
    s = FinetuneSettings(out="/tmp/unused", lr=a.lr, batch_size=a.batch_size, weight_decay=0.01,
                         warmup_proportion=a.warmup)
    objective = FineTuning.__new__(FineTuning)  # its optimizer() and scheduler() alone
    optimizer = objective.optimizer(model, s)
    scheduler = objective.scheduler(optimizer, s, total_steps)
    model.train()
    batch_iter = iter(batches)
    loss_of = lambda m, b: task.training_loss(m, b)  # noqa: E731
    return [float(train_step(model, optimizer, scheduler, lambda: next(batch_iter), grad_clip=1.0, loss_of=loss_of))
            for _ in batches]


def run_hf(model, batches, a, total_steps, variant, out):
    from transformers import Trainer, TrainingArguments

    from bertlab.training.schedules import make_scheduler
    args = TrainingArguments(output_dir=out, learning_rate=a.lr, weight_decay=0.01, adam_epsilon=1e-6,
                             warmup_steps=int(a.warmup * total_steps), lr_scheduler_type="linear",
                             max_steps=total_steps, report_to=[], use_cpu=True, disable_tqdm=True)
    trainer = Trainer(model=model, args=args)
    trainer.create_optimizer_and_scheduler(num_training_steps=total_steps)
    optimizer, scheduler = trainer.optimizer, trainer.lr_scheduler
    if variant in ("hf-ours-lr", "hf-both"):
        scheduler = make_scheduler(optimizer, "linear", int(a.warmup * total_steps), total_steps, min_ratio=0.0)
    model.train()
    losses = []
    for batch in batches:
        if variant in ("hf-masked", "hf-both"):
            out_ = model.bert(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
            logits = model.qa_outputs(out_[0]).masked_fill(~batch["attention_mask"].bool()[..., None],
                                                           torch.finfo(torch.float32).min)
            start, end = logits.unbind(-1)
            ce = torch.nn.functional.cross_entropy
            loss = (ce(start, batch["start_position"]) + ce(end, batch["end_position"])) / 2
        else:
            loss = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                         token_type_ids=batch["token_type_ids"], start_positions=batch["start_position"],
                         end_positions=batch["end_position"]).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
    return losses


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="a SQuAD v1.1 folder (train.json)")
    parser.add_argument("--out", default="/tmp/qa_step_parity")
    parser.add_argument("--steps", type=int, default=30, help="steps each side takes")
    parser.add_argument("--total-steps", type=int, default=208, help="the schedule's length (the 1,500-question run's)")
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--max-seq-length", type=int, default=256)
    parser.add_argument("--doc-stride", type=int, default=128)
    parser.add_argument("--warmup", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    a = parser.parse_args()
    torch.set_num_threads(1)
    from dataclasses import replace

    from transformers import BertForQuestionAnswering

    from bertlab.finetune.setup import load_base_model
    from bertlab.finetune.squad import QuestionAnsweringTask
    from bertlab.interop.pretrained import resolve

    task = QuestionAnsweringTask(max_seq_length=a.max_seq_length, doc_stride=a.doc_stride)
    built = load_base_model(task, "minilm", quiet=True, seed=a.seed)
    ours, tokenizer = built.model, built.tokenizer
    examples = task.read(os.path.join(a.data, "train.json"))
    features = task.featurize(examples, tokenizer)
    batches = batches_of(task, features, a.batch_size, a.steps, a.seed, tokenizer.pad_token_id)
    no_dropout = replace(ours.config, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    start_state = {k: v.clone() for k, v in ours.state_dict().items()}
    os.makedirs(a.out, exist_ok=True)

    def fresh_ours():
        from bertlab.models.accelerate import accelerate
        model = task.build_model(no_dropout, init_weights=False)
        model.load_state_dict(start_state)
        return accelerate(model)  # as fit() trains it

    def fresh_hf():
        model = BertForQuestionAnswering.from_pretrained(resolve("minilm"), hidden_dropout_prob=0.0,
                                                         attention_probs_dropout_prob=0.0)
        model.qa_outputs.load_state_dict({"weight": start_state["qa_outputs.weight"],
                                          "bias": start_state["qa_outputs.bias"]})
        return model

    results = {"settings": vars(a), "windows": len(features)}
    clock = time.perf_counter()
    results["bertlab"] = run_bertlab(fresh_ours(), batches, task, a, a.total_steps)
    print(f"bertlab: {a.steps} steps in {time.perf_counter() - clock:.0f} s", flush=True)
    for variant in a.variants.split(","):
        clock = time.perf_counter()
        results[variant] = run_hf(fresh_hf(), batches, a, a.total_steps, variant, a.out)
        print(f"{variant}: {a.steps} steps in {time.perf_counter() - clock:.0f} s", flush=True)
    names = ["bertlab", *a.variants.split(",")]
    print("| step | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for i in range(a.steps):
        print(f"| {i} | " + " | ".join(f"{results[n][i]:.5f}" for n in names) + " |")
    print("| max abs diff from bertlab | | " + " | ".join(
        f"{max(abs(x - y) for x, y in zip(results[n], results['bertlab'])):.2e}" for n in names[1:]) + " |")
    print("| mean loss, last 10 steps | " + " | ".join(
        f"{np.mean(results[n][-10:]):.4f}" for n in names) + " |")
    with open(os.path.join(a.out, "step_parity.json"), "w", encoding="utf-8") as f:
        json.dump(results, f, indent=1)
    assert all(math.isfinite(x) for n in names for x in results[n])


if __name__ == "__main__":
    main()
