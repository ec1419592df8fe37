"""Seq2seq Transformer vs HF MarianMTModel, same architecture, random weights, in one process.

    python benchmarks/bench_translate.py --data /tmp/gettext_de --src en --tgt de [--preset small] \
        [--vocab-size 8000] [--max-tokens 4096] [--batches 4] [--repeat 3] [--only train,greedy,beam] [--threads 2]
    python benchmarks/bench_translate.py --model RUN/model --data /tmp/gettext_de --src de --tgt en \
        --only greedy,beam [--decode-sentences 512] [--decode-batch 64]

Both models are built from one TransformerConfig (``marian_config`` maps it to HF's MarianConfig:
post-LN, ReLU, static sinusoids, embeddings times sqrt(d_model), one shared and tied embedding
table) and hold the same random weights (ours copied in by the name tables ``MARIAN_PREFIXES`` and
``MARIAN_PIECES``; equal logits are checked at the start: the two compute the same function); fp32.

Training: the first ``--batches`` batches of epoch 0 of our token-budget batching
(``ParallelData.batches``) over the corpus's training split, encoded with one joint subword
vocabulary (as ``translate-train --joint-vocab``); each timed call is forward + label-smoothed loss
(0.1) + backward + optimizer step on every one of them, dropout on. Ours: the loss of our trainer
(``translation.objective.step_loss_of``: summed smoothed cross-entropy / target tokens); HF: the
logits of ``MarianMTModel(input_ids, attention_mask, decoder_input_ids)`` through ``LabelSmoother``,
exactly what ``Seq2SeqTrainer(label_smoothing_factor=0.1)`` runs. Both use our trainer's optimizer,
torch's fused AdamW (``training.optim.make_adamw``) with the paper's Adam settings: betas (0.9,
0.98), eps 1e-9, no weight decay (HF Trainer's default optimizer is the same fused kernel). No
gradient clipping on either side (our default). Throughput counts target tokens (EOS included).

Decoding: the first ``--decode-batch`` sentences of the test split as one padded batch, greedy and
beam 4, both with a key/value cache. An untrained model emits EOS by chance, which would make the
work depend on the random draw, so both are made to do the same, known work: the EOS row of the
shared embedding table (= the tied output projection; there is no output bias) is zeroed, so EOS's
logit is exactly 0 and never wins against 8k random logits, and every sentence runs to the same
fixed length, ``--new-tokens`` N (ours: ``max_len=N, max_len_a=0, max_len_b=N``; HF:
``max_new_tokens=N``; beam search then spends one more step on a forced EOS on both sides: HF's
``forced_eos_token_id`` with ``max_new_tokens=N + 1``). Output lengths are asserted on both sides;
with equal weights the translations agree too (printed: how many; rounding may flip a near-tie).

With ``--model DIR`` (a trained ``translate-train`` model folder) both sides hold its weights and
vocabulary and translate real test sentences as ``bertlab translate`` does: the first
``--decode-sentences`` lines of the test split, sorted by length into batches of ``--decode-batch``,
EOS allowed, each sentence's length limit min(max_len, 2 * source + 10) on both sides (HF through
the ``LengthLimit`` logits processor of ``translate_hf_trainer.py``). This is the work a user has:
sentences end at different steps, and a finished sentence leaves our batch, while HF's
``generate`` keeps it until the batch's last sentence ends.
"""
import argparse
import os
import sys
import time

import torch
from torch import nn

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Row, measure, print_table  # noqa: E402

from bertlab.core.embeddings import sinusoidal_positions  # noqa: E402
from bertlab.data.parallel import ParallelData, collate  # noqa: E402
from bertlab.inference.translate import beam_search, greedy_decode, translate_ids  # noqa: E402
from bertlab.interop.translation_folder import load_translation_model  # noqa: E402
from bertlab.io import read_lines  # noqa: E402
from bertlab.models.transformer import Seq2SeqTransformer, TransformerConfig  # noqa: E402
from bertlab.tokenization.subword import SubwordTokenizer  # noqa: E402
from bertlab.training.optim import make_adamw  # noqa: E402
from bertlab.translation.objective import step_loss_of  # noqa: E402

HF = "HF MarianMTModel"


def marian_config(c: TransformerConfig, scale_embedding: bool = True):
    """HF MarianConfig with our architecture. Marian is post-LN (as ours; it has no pre-LN switch),
    adds a fixed sinusoidal table, drops out the embedding sum and the sublayer outputs, and its
    LayerNorms use torch's eps 1e-5 (fixed in its code: c.layer_norm_eps must be 1e-5)."""
    from transformers import MarianConfig
    if c.layer_norm_eps != 1e-5:
        raise ValueError(f"MarianMTModel's LayerNorm eps is fixed at 1e-5, this config has {c.layer_norm_eps}")
    return MarianConfig(
        vocab_size=c.source_vocab_size, decoder_vocab_size=c.target_vocab_size, d_model=c.d_model,
        encoder_layers=c.encoder_layers, decoder_layers=c.decoder_layers,
        encoder_attention_heads=c.attention_heads, decoder_attention_heads=c.attention_heads,
        encoder_ffn_dim=c.ffn_dim, decoder_ffn_dim=c.ffn_dim, activation_function=c.activation_function,
        dropout=c.dropout, attention_dropout=c.attention_dropout, activation_dropout=0.0,
        max_position_embeddings=c.max_position_embeddings, scale_embedding=scale_embedding, init_std=c.init_std,
        share_encoder_decoder_embeddings=c.share_embeddings,  # one table for source, target and output
        tie_word_embeddings=c.tie_word_embeddings or c.share_embeddings,  # target table = output projection
        pad_token_id=c.pad_token_id, bos_token_id=c.bos_token_id, eos_token_id=c.eos_token_id,
        decoder_start_token_id=c.bos_token_id, forced_eos_token_id=None)


@torch.no_grad()
def init_like_bertlab(model):
    """Our initialisation on a MarianMTModel: N(0, init_std) matrices and tables as HF's own, with
    the padding row zeroed and the biases zero, and our sinusoid layout (sin/cos interleaved;
    Marian puts all sines first, a fixed permutation of the features), so the two models differ
    only in their random draws."""
    std = model.config.init_std
    tables = {id(m.weight) for m in model.modules() if isinstance(m, nn.Embedding)}
    for module in model.modules():
        if isinstance(module, nn.Linear) and id(module.weight) not in tables:  # a tied lm_head is a table
            nn.init.normal_(module.weight, mean=0.0, std=std)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding) and module.weight.requires_grad:  # not the sinusoids
            nn.init.normal_(module.weight, mean=0.0, std=std)
            module.weight[module.padding_idx].zero_()
    for stack in (model.model.encoder, model.model.decoder):
        table = stack.embed_positions.weight
        table.copy_(sinusoidal_positions(table.size(0), table.size(1)))
    return model


# Our parameter names -> MarianMTModel's: the first prefix that fits, then every piece in order.
MARIAN_PREFIXES = [("source_embedding.", "model.encoder.embed_tokens."),
                   ("target_embedding.", "model.decoder.embed_tokens."),
                   ("encoder.", "model.encoder.layers."), ("decoder.", "model.decoder.layers.")]
MARIAN_PIECES = [
    (".attention.", ".self_attn."), (".self_attention.", ".self_attn."), (".cross_attention.", ".encoder_attn."),
    (".query.", ".q_proj."), (".key.", ".k_proj."), (".value.", ".v_proj."), ("_attn.output.", "_attn.out_proj."),
    (".attention_sublayer.norm.", ".self_attn_layer_norm."),
    (".self_attention_sublayer.norm.", ".self_attn_layer_norm."),
    (".cross_attention_sublayer.norm.", ".encoder_attn_layer_norm."),
    (".feed_forward.intermediate.", ".fc1."), (".feed_forward.output.", ".fc2."),
    (".feed_forward_sublayer.norm.", ".final_layer_norm."),
]


def marian_name(name: str) -> str:
    ours, theirs = next((o, t) for o, t in MARIAN_PREFIXES if name.startswith(o))
    name = theirs + name[len(ours):]
    for ours, theirs in MARIAN_PIECES:
        name = name.replace(ours, theirs)
    return name


@torch.no_grad()
def copy_into_marian(ours, hf):
    """Our weights into a MarianMTModel of marian_config(ours.config): the same function after."""
    theirs = dict(hf.named_parameters(remove_duplicate=False))
    for name, p in ours.named_parameters(remove_duplicate=False):
        if name != "output.weight":  # the output projection is tied on both sides
            theirs[marian_name(name)].copy_(p)


def models(config, seed=0):
    """Ours, random, and a MarianMTModel holding the same weights (checked: equal logits)."""
    from transformers import MarianMTModel
    torch.manual_seed(seed)
    from bertlab.models.accelerate import accelerate
    ours = accelerate(Seq2SeqTransformer(config))
    hf = init_like_bertlab(MarianMTModel(marian_config(config)))
    copy_into_marian(ours, hf)
    assert hf.lm_head.weight.data_ptr() == hf.model.decoder.embed_tokens.weight.data_ptr(), "lm_head is not tied"
    return ours, hf


@torch.no_grad()
def check_same_function(ours, hf, batch, pad_id):
    ours.eval(), hf.eval()
    real = batch.tgt_out != pad_id
    a = ours(batch.src, batch.tgt_in)[real]
    b = TeacherForcing(hf)(batch.src, batch.tgt_in)[real]
    torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)
    print(f"same weights, same logits: max |difference| {float((a - b).abs().max()):.2e}", flush=True)


class TeacherForcing(nn.Module):
    """A MarianMTModel called as ours is, model(src, tgt_in) -> logits, so that our trainer's
    validation_loss scores it exactly as it scores ours."""

    def __init__(self, marian):
        super().__init__()
        self.marian = marian

    def forward(self, src, tgt_in):
        pad = self.marian.config.pad_token_id
        return self.marian(input_ids=src, attention_mask=(src != pad).long(), decoder_input_ids=tgt_in).logits


def hf_inputs(batch, pad_id):
    """A TranslationBatch as MarianMTModel's keyword arguments; labels pad -> -100."""
    return {"input_ids": batch.src, "attention_mask": (batch.src != pad_id).long(),
            "decoder_input_ids": batch.tgt_in, "labels": batch.tgt_out.masked_fill(batch.tgt_out == pad_id, -100)}


def our_loss(model, batch, pad_id, smoothing=0.1):
    return step_loss_of(pad_id, smoothing, batch.num_tokens, 1, "cpu")(model, batch)


def hf_loss(model, batch, pad_id, smoothing=0.1):
    from transformers.trainer_pt_utils import LabelSmoother
    inputs = hf_inputs(batch, pad_id)
    labels = inputs.pop("labels")
    return LabelSmoother(epsilon=smoothing)(model(**inputs), labels)


def training_rows(ours, hf, batches, pad_id, repeat):
    ours.train(), hf.train()
    tokens = sum(b.num_tokens for b in batches)

    def steps(model, loss_of):
        optimizer = make_adamw(model, lr=1e-4, weight_decay=0.0, betas=(0.9, 0.98), eps=1e-9)

        def run():
            for b in batches:
                loss_of(model, b, pad_id).backward()
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
        return run

    shapes = ", ".join(f"{tuple(b.src.shape)}->{tuple(b.tgt_out.shape)}" for b in batches)
    print(f"training batches (src -> tgt): {shapes}; {tokens} target tokens", flush=True)
    work = f"train {len(batches)} batches, {tokens} tgt tokens"
    # rounds alternate (ours, HF, ours, ...) after a warm-up call each, so that a change in the
    # machine's load falls on both sides alike
    runs = {"bertlab": steps(ours, our_loss), HF: steps(hf, hf_loss)}
    seconds = {side: [] for side in runs}
    for side, run in runs.items():
        run()
    for _ in range(repeat):
        for side, run in runs.items():
            seconds[side] += measure(run, repeat=1, warmup=0)
    return [Row(work, side, tokens, "tgt tokens/s", seconds[side]) for side in runs]


def decoding_rows(ours, hf, src, pad_id, eos_id, bos_id, beam, new_tokens, repeat):
    ours.eval(), hf.eval()
    with torch.no_grad():  # EOS can never win: every sentence decodes exactly new_tokens tokens
        ours.target_embedding.weight[eos_id].zero_()
        hf.model.decoder.embed_tokens.weight[eos_id].zero_()
    mask = (src != pad_id).long()

    outputs = {}

    def run_ours():
        if beam == 1:
            out = greedy_decode(ours, src, max_len=new_tokens, max_len_a=0, max_len_b=new_tokens)
        else:
            out = [h[0].tokens for h in beam_search(ours, src, beam_size=beam, length_penalty=1.0,
                                                    max_len=new_tokens, max_len_a=0, max_len_b=new_tokens)]
        assert all(len(o) == new_tokens for o in out), sorted({len(o) for o in out})
        outputs["bertlab"] = out

    def run_hf():
        # beam search: N tokens, then a step that can only give EOS, as ours at its length limit
        extra = 0 if beam == 1 else 1
        search = {} if beam == 1 else dict(num_beams=beam, length_penalty=1.0, early_stopping=True)
        with torch.inference_mode():
            out = hf.generate(input_ids=src, attention_mask=mask, do_sample=False, max_new_tokens=new_tokens + extra,
                              forced_eos_token_id=eos_id if beam > 1 else None, eos_token_id=eos_id,
                              pad_token_id=pad_id, decoder_start_token_id=bos_id, use_cache=True, **search)
        assert out.shape[1] == 1 + new_tokens + extra, out.shape
        assert not (out[:, 1:1 + new_tokens] == eos_id).any()
        outputs[HF] = out[:, 1:1 + new_tokens].tolist()

    name = "greedy" if beam == 1 else f"beam {beam}"
    work = f"{name}, {src.size(0)} sentences, {new_tokens} tokens each"
    rows = [Row(work, "bertlab", src.size(0), "sentences/s", measure(run_ours, repeat=repeat)),
            Row(work, HF, src.size(0), "sentences/s", measure(run_hf, repeat=repeat))]
    same = sum(a == b for a, b in zip(outputs["bertlab"], outputs[HF]))
    print(f"{name}: the same translation on both sides for {same} of {src.size(0)} sentences", flush=True)
    return rows


def real_decoding_rows(ours, hf, source, target, lines, beam, batch_size, repeat):
    """Translate real `lines` with the trained weights on both sides, as `bertlab translate` does."""
    from argparse import Namespace

    from translate_hf_trainer import translate as hf_translate
    ours.eval(), hf.eval()
    outputs = {}
    encoded = [source.encode(line) for line in lines]
    settings = Namespace(batch_size=batch_size, beam=beam, length_penalty=1.0, max_len=None, max_len_a=2.0,
                         max_len_b=10)

    def run_ours():
        hyps = translate_ids(ours, encoded, beam_size=beam, batch_size=batch_size, length_penalty=1.0)
        outputs["bertlab"] = [target.decode(h[0].tokens) for h in hyps]

    def run_hf():
        with torch.inference_mode():
            outputs[HF] = hf_translate(hf, source, target, lines, settings)

    name = "greedy" if beam == 1 else f"beam {beam}"
    work = f"{name}, {len(lines)} real test sentences, batches of {batch_size}"
    rows = [Row(work, "bertlab", len(lines), "sentences/s", measure(run_ours, repeat=repeat)),
            Row(work, HF, len(lines), "sentences/s", measure(run_hf, repeat=repeat))]
    same = sum(a == b for a, b in zip(outputs["bertlab"], outputs[HF]))
    words = sum(len(t.split()) for t in outputs["bertlab"]) / max(1, len(lines))
    print(f"{name}: the same translation on both sides for {same} of {len(lines)} sentences "
          f"({words:.1f} words per translation)", flush=True)
    return rows


def load_data(args):
    def path(split, lang):
        return os.path.join(args.data, f"{split}.{lang}")

    sources, targets = read_lines(path("train", args.src)), read_lines(path("train", args.tgt))
    start = time.perf_counter()
    tokenizer = SubwordTokenizer.train(sources + targets, vocab_size=args.vocab_size)
    data = ParallelData.from_files(path("train", args.src), path("train", args.tgt), tokenizer, tokenizer)
    print(f"{data.summary()}; joint vocabulary {len(tokenizer)} ({time.perf_counter() - start:.0f} s to learn "
          f"it and encode)", flush=True)
    batches = [collate([data.pair(i) for i in b], data.pad_id, data.bos_id, data.eos_id)
               for b in data.batches(epoch=0, max_tokens=args.max_tokens, seed=args.seed)[:args.batches]]
    pairs = [(tokenizer.encode(s), [0]) for s in read_lines(path("test", args.src))[:args.decode_batch]]
    src = collate(pairs, data.pad_id, data.bos_id, data.eos_id).src
    print(f"decoding: {src.size(0)} test sources, {float((src != data.pad_id).sum(1).float().mean()):.1f} "
          f"tokens on average (EOS included), padded to {src.size(1)}", flush=True)
    return tokenizer, batches, src


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", required=True, help="folder with {train,test}.{SRC,TGT} (`bertlab data gettext`)")
    p.add_argument("--src", default="en")
    p.add_argument("--tgt", required=True, help="e.g. de, zh_CN")
    p.add_argument("--vocab-size", type=int, default=8000, help="joint subword vocabulary learned (8000)")
    p.add_argument("--preset", default="small")
    p.add_argument("--max-tokens", type=int, default=4096, help="padded tokens per training batch")
    p.add_argument("--batches", type=int, default=4, help="training batches per timed call")
    p.add_argument("--model", metavar="DIR", help="a trained translate-train model folder: its weights and "
                   "vocabulary on both sides, real test sentences decoded with EOS allowed")
    p.add_argument("--decode-batch", type=int, default=64)
    p.add_argument("--decode-sentences", type=int, default=512, help="test lines translated with --model")
    p.add_argument("--new-tokens", type=int, default=32)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--only", default="train,greedy,beam")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, load {os.getloadavg()}", flush=True)
    if args.model:
        return main_trained(args)
    tokenizer, batches, src = load_data(args)
    config = TransformerConfig.preset(args.preset, source_vocab_size=len(tokenizer), target_vocab_size=len(tokenizer),
                                      share_embeddings=True, max_position_embeddings=512)  # translate-train's
    ours, hf = models(config, args.seed)
    check_same_function(ours, hf, batches[0], tokenizer.pad_id)
    print(f"parameters: bertlab {ours.num_parameters():,}, HF {hf.num_parameters():,} "
          f"(HF counts its frozen sinusoid tables)", flush=True)
    ids = dict(pad_id=tokenizer.pad_id, eos_id=tokenizer.eos_id, bos_id=tokenizer.bos_id)
    rows, start = [], time.time()
    for job in args.only.split(","):
        if job == "train":
            rows += training_rows(ours, hf, batches, tokenizer.pad_id, args.repeat)
        elif job in ("greedy", "beam"):
            rows += decoding_rows(ours, hf, src, **ids, beam=1 if job == "greedy" else 4,
                                  new_tokens=args.new_tokens, repeat=args.repeat)
        else:
            raise SystemExit(f"unknown job {job!r}: choose from train, greedy, beam")
        print_table(rows)
    print_ratios(rows, start)


def main_trained(args):
    """--model: decoding only, with trained weights on real sentences."""
    from transformers import MarianMTModel
    loaded = load_translation_model(args.model)
    from bertlab.models.accelerate import accelerate
    accelerate(loaded.model)
    ours, source, target = loaded.model, loaded.tokenizer, loaded.extra["target_tokenizer"]
    hf = init_like_bertlab(MarianMTModel(marian_config(ours.config)))  # our sinusoid layout
    copy_into_marian(ours, hf)
    lines = read_lines(os.path.join(args.data, f"test.{args.src}"))[:args.decode_sentences]
    pairs = [(source.encode(line), target.encode(line)[:8] + [target.eos_id]) for line in lines[:16]]
    check_same_function(ours, hf, collate(pairs, target.pad_id, target.bos_id, target.eos_id), target.pad_id)
    rows, start = [], time.time()
    for job in args.only.split(","):
        if job not in ("greedy", "beam"):
            raise SystemExit(f"unknown job {job!r} with --model: choose from greedy, beam")
        rows += real_decoding_rows(ours, hf, source, target, lines, 1 if job == "greedy" else 4,
                                   args.decode_batch, args.repeat)
        print_table(rows)
    print_ratios(rows, start)


def print_ratios(rows, start):
    for work in dict.fromkeys(r.workload for r in rows):
        ours_row, hf_row = (next(r for r in rows if r.workload == work and r.implementation == name)
                            for name in ("bertlab", HF))
        for stat in ("best", "median"):
            print(f"speed-up {work} ({stat}): {ours_row.throughput(stat) / hf_row.throughput(stat):.2f}x")
    print(f"({time.time() - start:.0f} s, load after {os.getloadavg()})")


if __name__ == "__main__":
    main()
