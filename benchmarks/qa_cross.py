"""Extractive QA: which part of a side decides how it learns? Each run pairs one model with one
training loop and one draw of the new span head (issue 35: HF's runs jumped in their second epoch and
bertlab's did not; these runs cleared the training loop, and --plain showed bertlab's model,
without its speed paths, training exactly as HF's: docs/results/qa-parity.md).

    python benchmarks/qa_cross.py --data /tmp/qa_big/data --model hf --loop bertlab --head hf --seed 1
    python benchmarks/qa_cross.py --data /tmp/qa_big/data --model bertlab --loop hf --head bertlab --seed 1

--model   bertlab: its BertForQuestionAnswering (load_base_model); hf: transformers'
          BertForQuestionAnswering.from_pretrained, called through a wrapper that masks the padding
          out of its logits as bertlab's head does (so both loops train the same loss).
--loop    bertlab: `finetune` (fit + FineTuning) with the CLI's settings; hf: qa_parity's HF side
          (bench_finetune.run_hf_squad: Trainer, run_qa's windows and post-processing).
--head    the span head's initial weights: bertlab = what load_base_model draws for --seed, hf = what
          HF's from_pretrained draws under torch.manual_seed(seed), normal = normal(0, 0.02) drawn
          for --seed, truncated = normal(0, 0.02) cut at two standard deviations (google's). Since
          39497dd bertlab, hf and normal are one tensor (bertlab draws HF's for the seed).
--plain   bertlab's model without its CPU speed paths for the whole run: `padding`:
          the padded layout (accelerate() without BERT's packing or bucketing); `dropout`: torch's
          F.dropout in place of every numpy-drawn mask; `all` (or the flag alone): both, so only
          the notes' formulas remain.

Settings are qa_parity's (2 epochs, lr 1e-4, batch 16, length 256, stride 128, max answer 128,
warmup 0.1, weight decay 0.01, clip 1.0), one torch thread. Prints dev F1 after each epoch (and,
for --loop hf, test) and writes OUT/cross.json. A run of the 1,639-question build takes ~12 minutes
an epoch on the 2-core dev CPU.
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def span_head(name, seed, task):
    """(weight, bias) of the new span head, drawn as --head says."""
    from bertlab.finetune.setup import load_base_model
    from bertlab.interop.pretrained import resolve
    if name == "bertlab":
        model = load_base_model(task, "minilm", quiet=True, seed=seed).model
        return model.qa_outputs.weight.detach().clone(), model.qa_outputs.bias.detach().clone()
    if name == "hf":
        from transformers import BertForQuestionAnswering
        torch.manual_seed(seed)
        head = BertForQuestionAnswering.from_pretrained(resolve("minilm")).qa_outputs
        return head.weight.detach().clone(), head.bias.detach().clone()
    weight = torch.empty(2, 384)
    torch.manual_seed(seed)
    if name == "normal":
        torch.nn.init.normal_(weight, std=0.02)
    else:
        torch.nn.init.trunc_normal_(weight, std=0.02, a=-0.04, b=0.04)
    return weight, torch.zeros(2)


class HFSpanModel(torch.nn.Module):
    """transformers' BertForQuestionAnswering called as bertlab's model is: (ids, types, mask) ->
    (start, end) logits, the padding masked out."""

    def __init__(self, hf, config):
        super().__init__()
        self.hf, self.config = hf, config

    def forward(self, input_ids, token_type_ids=None, attention_mask=None):
        out = self.hf(input_ids=input_ids, token_type_ids=token_type_ids, attention_mask=attention_mask)
        padding, low = ~attention_mask.bool(), torch.finfo(out.start_logits.dtype).min
        return out.start_logits.masked_fill(padding, low), out.end_logits.masked_fill(padding, low)


class BertlabForQuestionAnswering(torch.nn.Module):
    """bertlab's model called as HF's Trainer calls a QA model (the class name lets Trainer find
    start_positions/end_positions as its labels)."""
    main_input_name = "input_ids"

    def __init__(self, model):
        super().__init__()
        self.m = model

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, start_positions=None,
                end_positions=None, **_):
        from transformers.modeling_outputs import QuestionAnsweringModelOutput
        start, end = self.m(input_ids, token_type_ids, attention_mask)
        loss = None
        if start_positions is not None:
            ce = torch.nn.functional.cross_entropy
            loss = (ce(start, start_positions) + ce(end, end_positions)) / 2
        return QuestionAnsweringModelOutput(loss=loss, start_logits=start, end_logits=end)


def plain(what):
    """The rest of the run on the plain path and/or every dropout torch's (--plain)."""
    import importlib

    import torch.nn.functional as F
    nd = importlib.import_module("bertlab.core.fast_paths.numpy_dropout")  # the module, not its function
    if what in ("padding", "all"):  # accelerate() leaves BERT's padded layout alone from now on
        acc = importlib.import_module("bertlab.models.accelerate")
        acc.FAST[:] = [(p, f) for p, f in acc.FAST if p.__name__ not in ("BertModel", "BertEmbeddings")]
    if what == "padding":
        return
    nd._NumpyDropout.apply = staticmethod(lambda x, p: F.dropout(x, p, True))
    nd._NumpyDropoutAdd.apply = staticmethod(lambda x, residual, p: residual + F.dropout(x, p, True))


def build(a, task):
    from bertlab.finetune.setup import load_base_model
    from bertlab.interop.pretrained import read_config, resolve
    weight, bias = span_head(a.head, a.seed, task)
    if a.model == "hf":
        from transformers import BertForQuestionAnswering
        torch.manual_seed(a.seed)
        hf = BertForQuestionAnswering.from_pretrained(resolve("minilm"))
        hf.qa_outputs.load_state_dict({"weight": weight, "bias": bias})
        return HFSpanModel(hf, read_config(resolve("minilm")))
    model = load_base_model(task, "minilm", quiet=True, seed=a.seed).model
    model.qa_outputs.load_state_dict({"weight": weight, "bias": bias})
    return model


def bertlab_loop(a, task, model) -> dict:
    from bertlab.finetune import objective
    from bertlab.interop.pretrained import resolve
    from bertlab.tokenization.bert_tokenizer import BertTokenizer
    objective.save_finetuned = lambda *args, **kwargs: None  # an HF model has no bertlab folder; dev F1 is logged
    s = objective.FinetuneSettings(out=a.out, epochs=2, lr=1e-4, batch_size=16, warmup_proportion=0.1,
                                   weight_decay=0.01, grad_clip=1.0, seed=a.seed, device="cpu", precision="fp32",
                                   progress=False)
    objective.finetune(task, model, BertTokenizer.from_pretrained(resolve("minilm")),
                       task.read(f"{a.data}/train.json"), task.read(f"{a.data}/dev.json"), a.out, s)
    with open(os.path.join(a.out, "metrics.jsonl"), encoding="utf-8") as f:
        evals = [r for r in map(json.loads, f) if r["kind"] == "eval"]
    return {"dev_f1_by_epoch": [round(100 * r["f1"], 1) for r in evals]}


def hf_loop(a, model) -> dict:
    import bench_finetune
    import transformers
    wrapped = BertlabForQuestionAnswering(model) if a.model == "bertlab" else model.hf
    built = staticmethod(lambda *args, **kwargs: wrapped)  # run_hf_squad's from_pretrained returns this model
    transformers.BertForQuestionAnswering = type("Built", (), {"from_pretrained": built})
    result = bench_finetune.run_hf_squad(a.data, a.out, 2, True, False, lr=1e-4, batch=16, seed=a.seed, max_length=256,
                                         doc_stride=128, max_answer_length=128, n_best_size=20, warmup_proportion=0.1)
    import glob
    states = [json.load(open(path, encoding="utf-8"))["log_history"]
              for path in glob.glob(os.path.join(a.out, "checkpoint-*", "trainer_state.json"))]
    history = max(states, key=len, default=[])  # the last checkpoint's holds every evaluation
    return {"dev_f1_by_epoch": [round(100 * h["eval_f1"], 1) for h in history if "eval_f1" in h][:2],
            "test_f1": round(100 * result["test"]["f1"], 1)}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="a SQuAD v1.1 folder (train/dev/test.json)")
    parser.add_argument("--out", default="/tmp/qa_cross")
    parser.add_argument("--model", choices=["bertlab", "hf"], required=True)
    parser.add_argument("--loop", choices=["bertlab", "hf"], required=True)
    parser.add_argument("--head", choices=["bertlab", "hf", "normal", "truncated"], required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--plain", nargs="?", const="all", choices=["padding", "dropout", "all"],
                        help="bertlab's model without (some of) its speed paths (above)")
    a = parser.parse_args()
    if a.plain:
        plain(a.plain)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    torch.set_num_threads(1)
    from bertlab.finetune.squad import QuestionAnsweringTask
    task = QuestionAnsweringTask(max_seq_length=256, doc_stride=128, max_answer_length=128, n_best_size=20)
    os.makedirs(a.out, exist_ok=True)
    model = build(a, task)
    result = bertlab_loop(a, task, model) if a.loop == "bertlab" else hf_loop(a, model)
    result = {"model": a.model, "loop": a.loop, "head": a.head, "seed": a.seed, "plain": a.plain, **result}
    print(json.dumps(result), flush=True)
    with open(os.path.join(a.out, "cross.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
