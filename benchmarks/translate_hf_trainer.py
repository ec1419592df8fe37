"""The peer's side of the translation comparison: HF `MarianMTModel`, from scratch with our
architecture, trained by HF `Seq2SeqTrainer` on the same corpus, vocabulary, batches, optimiser
settings and wall-clock budget as a `bertlab translate-train` run, then scored on the same test set.

    python benchmarks/translate_hf_trainer.py --data /tmp/gettext_de --src en --tgt de --joint-vocab \
        [--vocab RUN/model] --preset small --max-tokens 4096 [--lr LR] --warmup 4000 --max-minutes M \
        [--threads 2] -o OUT

Each option means what it means to `bertlab translate-train` (same names and defaults; the
vocabulary and the model config are built by its own functions, ``translation_vocabularies`` and
``translation_config``). Writes OUT/summary.json (and prints it as one JSON line): steps, seconds of the
training loop, target tokens/s, validation loss (label-smoothed, as trained), NLL and perplexity per
target token (our trainer's ``validation_loss``), test BLEU and chrF of beam search on the whole
test split (sacreBLEU as `bertlab translate --ref`; tokenize="zh" for a Chinese target), and the
settings; OUT/test.hyp the translations; OUT/vocab the vocabularies.

What is the same as ours:
* Vocabulary: our SubwordTokenizer ids -- from --vocab DIR (a translate-train model folder, OUT/vocab,
  or one vocabulary folder), else learned exactly as translate-train learns it. Marian gets id lists.
* Architecture (``bench_translate.marian_config``): post-LN, ReLU, static sinusoids, embeddings x
  sqrt(d_model) (``scale_embedding=True``), attention dropout 0, no dropout inside the feed-forward
  network (``activation_dropout=0``); with a joint vocabulary one table for source, target and
  output (``share_encoder_decoder_embeddings``), else the target table tied to the output.
  Initialisation is ours (``init_like_bertlab``), with our sinusoid table copied in.
* Ids: pad 0, eos 3, and ``decoder_start_token_id`` = our <s> (2), so the decoder reads <s> +
  target and predicts target + </s>, exactly our tgt_in/tgt_out; labels are tgt_out with pad -> -100.
* Batches: exactly our token-budget batches (``ParallelData.batches(epoch, --max-tokens, seed)``, a
  new shuffle every epoch), handed to Trainer as a batch sampler whose epoch Trainer sets.
* Optimiser: Adam betas (0.9, 0.98), eps 1e-9, no weight decay (HF's default fused AdamW with
  weight_decay 0, the kernel ours uses), the same peak rate (default: the paper's d_model^-0.5 *
  warmup^-0.5), label smoothing 0.1 (``label_smoothing_factor``: HF's LabelSmoother, per target
  token), warmup then inverse square root (``lr_scheduler_type="inverse_sqrt"``), --clip-norm.
* Time budget: --max-minutes of the training loop, checked after every step (a TrainerCallback).
* Decoding: beam 4, length penalty 1.0 over tokens + EOS (HF's rule too), a sentence done once it
  has 4 finished hypotheses (``early_stopping=True``, fairseq's and ours), batches of --batch-size
  sources sorted by length, and our length limit per sentence (``inference.translate.length_limits``:
  min(--max-len, max_position_embeddings - 1, a * source tokens + b)), EOS forced there (``LengthLimit``).

What differs and cannot be matched through HF's API:
* HF's inverse_sqrt schedule is one step behind ours: step/warmup then sqrt(warmup/step), where ours
  is (step+1)/warmup then sqrt(warmup/(step+1)) (HF's first step has learning rate 0).
* Marian adds a zero, untrained final_logits_bias buffer to the logits (no effect), and does not
  mask padded target positions as keys (they come after every real one: no effect on the loss).
* Dropout masks and initial weights are different random draws.
"""
import argparse
import json
import math
import os
import sys
import time

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_translate import TeacherForcing, hf_inputs, init_like_bertlab, marian_config  # noqa: E402
from bertlab.data.parallel import ParallelData, collate  # noqa: E402
from bertlab.inference.translate import length_limits  # noqa: E402
from bertlab.interop.translation_folder import bleu_tokenize  # noqa: E402
from bertlab.io import read_lines  # noqa: E402
from bertlab.translation.objective import (TranslationSettings, translation_config,  # noqa: E402
                                                  translation_vocabularies, validation_loss)


class TokenBatches(torch.utils.data.Sampler):
    """Our batches of epoch ``epoch`` (ParallelData.batches), one per pass; Trainer sets the epoch."""

    def __init__(self, data: ParallelData, max_tokens: int, seed: int):
        self.data, self.max_tokens, self.seed, self.epoch = data, max_tokens, seed, 0
        self.count = len(data.batches(0, max_tokens, seed=seed))

    def set_epoch(self, epoch: int):
        self.epoch = epoch

    def __iter__(self):
        return iter(self.data.batches(self.epoch, self.max_tokens, seed=self.seed))

    def __len__(self):
        return self.count


def padding_tokenizer(tokenizer):
    """A PreTrainedTokenizerFast over our vocabulary, for DataCollatorForSeq2Seq's `pad` (it tokenizes nothing)."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from transformers import PreTrainedTokenizerFast
    pieces = tokenizer.pieces
    return PreTrainedTokenizerFast(tokenizer_object=Tokenizer(WordLevel(dict(tokenizer.vocab), pieces[tokenizer.unk_id])),
                                   pad_token=pieces[tokenizer.pad_id], eos_token=pieces[tokenizer.eos_id],
                                   bos_token=pieces[tokenizer.bos_id], unk_token=pieces[tokenizer.unk_id])


class LengthLimit:
    """A generate() logits processor: once a row has made its sentence's limit of tokens, only EOS
    may follow (ours: inference.translate.length_limits, EOS forced at the limit). Rows are
    sentence-major, beams of a sentence together, as generate() expands them."""

    def __init__(self, limits, beams: int, eos_id: int):
        self.limits, self.eos_id = limits.repeat_interleave(beams), eos_id

    def __call__(self, input_ids, scores):
        at_limit = input_ids.size(1) - 1 >= self.limits  # minus the decoder start token
        if at_limit.any():
            eos = scores[at_limit, self.eos_id].clone()
            scores[at_limit] = -math.inf
            scores[at_limit, self.eos_id] = eos
        return scores


@torch.no_grad()
def translate(model, source, target, lines, args) -> list[str]:
    """Beam search over `lines` in length-sorted batches; the translations in input order."""
    model.eval()
    encoded = [source.encode(line) for line in lines]
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))
    out = [""] * len(encoded)
    pad, eos = target.pad_id, target.eos_id
    for start in range(0, len(order), args.batch_size):
        rows = order[start:start + args.batch_size]
        src = collate([(encoded[i], [0]) for i in rows], pad, target.bos_id, eos).src
        limits = length_limits(model, src, args.max_len, args.max_len_a, args.max_len_b)  # reads config's pad/positions
        generated = model.generate(
            input_ids=src, attention_mask=(src != pad).long(), num_beams=args.beam, length_penalty=args.length_penalty,
            early_stopping=True, do_sample=False, max_new_tokens=int(limits.max()) + 1,
            logits_processor=[LengthLimit(limits, args.beam, eos)], decoder_start_token_id=target.bos_id,
            eos_token_id=eos, pad_token_id=pad, forced_eos_token_id=None)
        for i, ids in zip(rows, generated[:, 1:].tolist()):
            out[i] = target.decode(ids[:ids.index(eos)] if eos in ids else ids)
    return out


def score(hypotheses, references, target_language) -> dict:
    import sacrebleu
    bleu = sacrebleu.corpus_bleu(hypotheses, [references], tokenize=bleu_tokenize(target_language))
    chrf = sacrebleu.corpus_chrf(hypotheses, [references])
    return {"test_bleu": bleu.score, "test_chrf": chrf.score, "test_bleu_text": str(bleu), "test_chrf_text": str(chrf)}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-o", "--out", required=True, metavar="DIR")
    g = p.add_argument_group("data (as translate-train)")
    g.add_argument("--data", required=True, metavar="DIR", help="folder with {train,valid,test}.{SRC,TGT}")
    g.add_argument("--src", default="en")
    g.add_argument("--tgt", required=True, help="e.g. de, zh_CN")
    g.add_argument("--max-sentence-tokens", type=int, default=256)
    g.add_argument("--test-limit", type=int, help="translate only the first N test lines (smoke runs)")
    g = p.add_argument_group("vocabulary (as translate-train)")
    g.add_argument("--vocab", metavar="DIR", help="a translate-train model folder, OUT/vocab, or a vocabulary folder")
    g.add_argument("--vocab-size", type=int, default=8000)
    g.add_argument("--joint-vocab", action="store_true")
    g.add_argument("--min-frequency", type=int, default=2)
    g = p.add_argument_group("model (as translate-train)")
    g.add_argument("--preset", default="small")
    for name in ("--layers", "--d-model", "--heads", "--ffn-dim"):
        g.add_argument(name, type=int)
    g.add_argument("--dropout", type=float)
    g.add_argument("--max-positions", type=int, default=512)
    g = p.add_argument_group("optimisation (as translate-train)")
    g.add_argument("--max-tokens", type=int, default=4096, help="padded tokens per batch and side")
    g.add_argument("--lr", type=float, help="peak rate (default: the paper's d_model^-0.5 * warmup^-0.5)")
    g.add_argument("--warmup", type=int, default=4000)
    g.add_argument("--label-smoothing", type=float, default=0.1)
    g.add_argument("--clip-norm", type=float, default=0.0)
    g.add_argument("--max-steps", type=int, default=100_000)
    g.add_argument("--max-minutes", type=float, help="stop after this much training time (default: none)")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--threads", type=int, default=2)
    g = p.add_argument_group("the peer's own recipe, or ours on its model (each an alternative the comparison measures)")
    g.add_argument("--batches", choices=("tokens", "sentences"), default="tokens",
                   help="tokens: exactly our token-budget batches (a batch sampler); sentences: the translation "
                        "example's way, --train-batch-sentences shuffled pairs padded by DataCollatorForSeq2Seq")
    g.add_argument("--train-batch-sentences", type=int, default=32, help="pairs per batch with --batches sentences")
    g.add_argument("--group-by-length", choices=("yes", "no"), default="yes",
                   help="with --batches sentences: train_sampling_strategy group_by_length, HF's way to pad little "
                        "(pairs of similar source length together, in shuffled megabatches); no: plain shuffle")
    g.add_argument("--init", choices=("bertlab", "hf"), default="bertlab",
                   help="bertlab: our initialisation copied in (init_like_bertlab); hf: MarianMTModel's own, N(0, 0.02)")
    g.add_argument("--scale-embedding", choices=("yes", "no"), default="yes",
                   help="MarianConfig.scale_embedding: token embeddings times sqrt(d_model) (ours and the paper: yes)")
    g = p.add_argument_group("decoding the test split (as bertlab translate)")
    g.add_argument("--beam", type=int, default=4)
    g.add_argument("--length-penalty", type=float, default=1.0)
    g.add_argument("--max-len", type=int)
    g.add_argument("--max-len-a", type=float, default=2.0)
    g.add_argument("--max-len-b", type=int, default=10)
    g.add_argument("--batch-size", type=int, default=32, help="sentences decoded together")
    return p.parse_args()


def main():
    args = parse_args()
    torch.set_num_threads(args.threads)
    from transformers import MarianMTModel, Seq2SeqTrainer, Seq2SeqTrainingArguments, TrainerCallback

    def path(split, lang):
        return os.path.join(args.data, f"{split}.{lang}")

    source, target = translation_vocabularies(args.out, path("train", args.src), path("train", args.tgt), args.vocab,
                                              args.joint_vocab, args.vocab_size, args.min_frequency)
    longest = min(args.max_sentence_tokens, args.max_positions - 2)
    train, valid = (ParallelData.from_files(path(split, args.src), path(split, args.tgt), source, target, longest)
                    for split in ("train", "valid"))
    print(f"train {train.summary()}\nvalid {valid.summary()}", file=sys.stderr)
    config = translation_config(source, target, args.preset, args.layers, args.d_model, args.heads, args.ffn_dim,
                                args.dropout, args.max_positions)
    peak_lr = TranslationSettings(out=args.out, model=config, lr=args.lr, warmup=args.warmup).peak_lr
    torch.manual_seed(args.seed)
    model = MarianMTModel(marian_config(config, scale_embedding=args.scale_embedding == "yes"))  # HF's init
    if args.init == "bertlab":
        init_like_bertlab(model)
    sampler = TokenBatches(train, args.max_tokens, args.seed) if args.batches == "tokens" else None

    def collate_batch(indices):
        return hf_inputs(collate([train.pair(i) for i in indices], train.pad_id, train.bos_id, train.eos_id),
                         train.pad_id)

    class CountingTrainer(Seq2SeqTrainer):
        target_tokens = 0

        def training_step(self, model, inputs, *rest, **kwargs):
            self.target_tokens += int((inputs["labels"] != -100).sum())
            return super().training_step(model, inputs, *rest, **kwargs)

    class TokenBudgetTrainer(CountingTrainer):
        def get_train_dataloader(self):
            loader = torch.utils.data.DataLoader(range(len(train)), batch_sampler=sampler, collate_fn=collate_batch)
            return self.accelerator.prepare(loader)

    class Budget(TrainerCallback):
        def on_train_begin(self, *a, **k):
            self.start = time.perf_counter()

        def on_step_end(self, targs, state, control, **k):
            self.seconds = time.perf_counter() - self.start
            if args.max_minutes is not None and self.seconds > 60 * args.max_minutes:
                control.should_training_stop = True

    targs = Seq2SeqTrainingArguments(
        output_dir=args.out, max_steps=args.max_steps,
        per_device_train_batch_size=args.train_batch_sentences if sampler is None else 1,  # else: the sampler's
        learning_rate=peak_lr, weight_decay=0.0, adam_beta1=0.9, adam_beta2=0.98, adam_epsilon=1e-9,
        warmup_steps=args.warmup, lr_scheduler_type="inverse_sqrt", label_smoothing_factor=args.label_smoothing,
        max_grad_norm=args.clip_norm, save_strategy="no", eval_strategy="no", report_to=[], disable_tqdm=True,
        seed=args.seed, use_cpu=True, dataloader_num_workers=0, logging_steps=50, remove_unused_columns=False,
        train_sampling_strategy="group_by_length" if sampler is None and args.group_by_length == "yes" else "random")
    budget = Budget()
    if sampler is not None:
        trainer = TokenBudgetTrainer(model=model, args=targs, train_dataset=range(len(train)), callbacks=[budget])
    else:  # the translation example's way: a dataset of token ids, shuffled, padded by DataCollatorForSeq2Seq
        from transformers import DataCollatorForSeq2Seq
        dataset = [{"input_ids": s + [train.eos_id], "labels": t + [train.eos_id]}
                   for s, t in (train.pair(i) for i in range(len(train)))]
        collator = DataCollatorForSeq2Seq(padding_tokenizer(target), model=model, label_pad_token_id=-100)
        trainer = CountingTrainer(model=model, args=targs, train_dataset=dataset, data_collator=collator,
                                  callbacks=[budget])
    trainer.train()
    result = {"side": "HF MarianMTModel + Seq2SeqTrainer", "steps": trainer.state.global_step,
              "epoch": trainer.state.epoch, "seconds": budget.seconds, "target_tokens": trainer.target_tokens,
              "target_tokens_per_s": trainer.target_tokens / budget.seconds, "peak_lr": peak_lr,
              "parameters": sum(p.numel() for p in model.parameters() if p.requires_grad)}
    values = validation_loss(TeacherForcing(model), valid, args.max_tokens, args.label_smoothing)
    result.update({f"valid_{k}": v for k, v in values.items()})

    lines, refs = read_lines(path("test", args.src)), read_lines(path("test", args.tgt))
    lines, refs = lines[:args.test_limit], refs[:args.test_limit]
    start = time.perf_counter()
    hypotheses = translate(model, source, target, lines, args)
    result.update(test_sentences=len(lines), decode_seconds=time.perf_counter() - start,
                  **score(hypotheses, refs, args.tgt))
    result.update(model=config.to_dict(), settings=vars(args), data=train.report)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(result, f, indent=1)
    with open(os.path.join(args.out, "test.hyp"), "w", encoding="utf-8") as f:
        f.writelines(h + "\n" for h in hypotheses)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
