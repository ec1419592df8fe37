"""The peer's side of the pretraining comparison: HF `BertForPreTraining` trained with HF `Trainer`
on the same shard folder, preset, batch size, optimiser settings, step count and wall-clock budget
as a `bertlab pretrain` run, then scored on the same held-out shards.

    python benchmarks/pretrain_hf_trainer.py --data DIR --eval-data DIR --preset small \
        --batch-size 32 --lr 1e-4 --warmup 100 --max-steps N --max-minutes M -o OUT \
        [--device cpu|cuda] [--precision fp32|bf16]

HF is fed its own standard way: `labels` hold the original token at each masked position and -100
elsewhere, so its head runs the vocabulary decoder at every position (what bertlab avoids by
gathering the masked positions). AdamW: weight decay 0.01 except biases and LayerNorm, eps 1e-6,
linear warmup then linear decay over --max-steps; the run stops at --max-minutes like ours.
Held-out metrics are computed exactly as bertlab's evaluation does: accuracy over the masked
positions (weights > 0) and over the next-sentence labels.
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_pretrain import hf_labels  # noqa: E402
from bertlab.pretraining.shards import PretrainingData  # noqa: E402
from bertlab.pretraining.objective import PRESETS  # noqa: E402


def hf_batch(data, indices):
    b = data.batch(indices)
    return {"input_ids": b["input_ids"], "token_type_ids": b["token_type_ids"], "attention_mask": b["attention_mask"],
            "labels": hf_labels(b), "next_sentence_label": b["next_sentence_labels"]}


@torch.no_grad()
def held_out(model, data, batch_size=64) -> dict:
    model.eval()
    device = next(model.parameters()).device
    mlm_hit = mlm_n = nsp_hit = nsp_n = 0.0
    for start in range(0, len(data), batch_size):
        b = {k: v.to(device) for k, v in data.batch(np.arange(start, min(start + batch_size, len(data)))).items()}
        out = model(input_ids=b["input_ids"], token_type_ids=b["token_type_ids"], attention_mask=b["attention_mask"])
        index = b["masked_lm_positions"][..., None].expand(-1, -1, out.prediction_logits.size(-1))
        pred = out.prediction_logits.gather(1, index).argmax(-1)
        mlm_hit += float(((pred == b["masked_lm_ids"]).float() * b["masked_lm_weights"]).sum())
        mlm_n += float(b["masked_lm_weights"].sum())
        nsp_hit += float((out.seq_relationship_logits.argmax(-1) == b["next_sentence_labels"]).sum())
        nsp_n += len(b["next_sentence_labels"])
    return {"mlm_accuracy": mlm_hit / mlm_n, "nsp_accuracy": nsp_hit / nsp_n, "instances": len(data)}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", required=True)
    p.add_argument("--eval-data", required=True)
    p.add_argument("--preset", default="small", choices=sorted(PRESETS))
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--max-steps", type=int, required=True)
    p.add_argument("--max-minutes", type=float, required=True)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32", help="bf16: the Trainer's bf16=True")
    p.add_argument("-o", "--output", required=True)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    from transformers import BertConfig, BertForPreTraining, Trainer, TrainerCallback, TrainingArguments

    data, heldout = PretrainingData(args.data), PretrainingData(args.eval_data)
    torch.manual_seed(args.seed)
    from bertlab.models.accelerate import accelerate
    model = accelerate(BertForPreTraining(BertConfig(vocab_size=data.meta["vocab_size"], **PRESETS[args.preset])))

    class Budget(TrainerCallback):
        def on_train_begin(self, *a, **k):
            self.start = time.perf_counter()

        def on_step_end(self, targs, state, control, **k):
            if time.perf_counter() - self.start > 60 * args.max_minutes:
                control.should_training_stop = True

    targs = TrainingArguments(
        output_dir=args.output, max_steps=args.max_steps, per_device_train_batch_size=args.batch_size,
        learning_rate=args.lr, weight_decay=0.01, adam_beta1=0.9, adam_beta2=0.999, adam_epsilon=1e-6,
        warmup_steps=args.warmup, lr_scheduler_type="linear", max_grad_norm=1.0, save_strategy="no",
        eval_strategy="no", report_to=[], disable_tqdm=True, seed=args.seed, use_cpu=args.device == "cpu",
        bf16=args.precision == "bf16",
        dataloader_num_workers=0, logging_steps=50, remove_unused_columns=False)
    budget = Budget()
    trainer = Trainer(model=model, args=targs, train_dataset=list(range(len(data))),
                      data_collator=lambda indices: hf_batch(data, indices), callbacks=[budget])
    start = time.perf_counter()
    trainer.train()
    seconds = time.perf_counter() - start
    steps = trainer.state.global_step
    tokens = steps * args.batch_size * data.meta["max_seq_length"]
    result = {"side": "HF BertForPreTraining + Trainer", "steps": steps, "seconds": seconds,
              "max_seq_length_tokens_per_s": tokens / seconds, "held_out": held_out(model, heldout),
              "settings": vars(args)}
    os.makedirs(args.output, exist_ok=True)
    with open(os.path.join(args.output, "summary.json"), "w") as f:
        json.dump(result, f, indent=1)
    print(json.dumps(result), file=sys.stderr)


if __name__ == "__main__":
    main()
