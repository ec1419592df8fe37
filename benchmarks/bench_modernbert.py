"""bertlab's ModernBERT vs transformers' ModernBertModel on the same random ModernBERT-base-shaped
weights, in one process (issue 32, point 6).

    python benchmarks/bench_modernbert.py [--rounds 3] [--texts 32] [--train-batch 8]
        [--lengths 512,1024,2048,4096,8192] [--curve-layers 6] [--hf-attn sdpa] [--only infer,curve,train]

The weights: transformers builds ModernBertForSequenceClassification from a ModernBertConfig of
ModernBERT-base's shape (22 layers, hidden 768, GeGLU 1152, 12 heads, vocabulary 50,368, a local
window of 128 with a global layer every third, 8,192 positions) with seed 0 and saves it; bertlab
reads that folder with load_model, so both hold the same tensors. Their outputs must agree within
1e-4 at every real position of a small padded batch longer than the window before anything is timed.

The text: real lines the repo ships (data/python-docs/summaries.txt, data/manpages), joined in
order until a text reaches its length, drawn uniformly from 8 to 512 tokens, then shuffled (a
realistic, unsorted order); tokenized once by bertlab's tokenizer.json reader with a byte-level BPE
trained in ModernBERT's settings on the same text (no real ModernBERT tokenizer.json can be
downloaded here; only the token counts matter for speed). Both sides get the same padded
(batch, longest) ids and attention mask; HF computes every padded position, bertlab packs the real
tokens (its unpadded path) and computes those alone.

1. infer: the encoder over --texts texts in batches of 32, no gradients; real tokens/s.
2. curve: one forward of 1 input of L tokens for each --lengths L, and of 16 inputs of 512, per
   side, on a model of --curve-layers layers (default 6, of which 2 global) with base's width,
   window and global every third, so that HF's side at 8,192 tokens fits in minutes on 2 cores.
3. train: ModernBertForSequenceClassification steps on batches of --train-batch texts: forward,
   cross-entropy, backward, gradient-norm clip at 1.0, torch's fused AdamW step, the same code for
   both sides.

The two sides' calls alternate (ours, HF, then HF, ours, ...; harness.alternating) and the
speed-up is the median over rounds of the ratio of one round's two calls.
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "tests"))  # modernbert_fixtures: tokenizer.json in ModernBERT's settings

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from harness import alternating, round_ratios  # noqa: E402

from bertlab import load_model  # noqa: E402
from bertlab.io import read_lines  # noqa: E402

BASE = dict(vocab_size=50368, hidden_size=768, intermediate_size=1152, num_hidden_layers=22, num_attention_heads=12,
            local_attention=128, global_attn_every_n_layers=3, max_position_embeddings=8192)
SPECIALS = dict(pad_token_id=50283, cls_token_id=50281, sep_token_id=50282, bos_token_id=50281, eos_token_id=50282)
BATCH = 32


def real_lines() -> list[str]:
    lines = read_lines(os.path.join(REPO, "data", "python-docs", "summaries.txt"))
    for row in read_lines(os.path.join(REPO, "data", "manpages", "train.tsv"))[1:]:
        name, _, description = row.split("\t")
        lines.append(f"{name} - {description}")
    return [line for line in lines if line.strip()]


def make_folder(folder: str, layers: int, attn: str, seed: int = 0):
    """An HF ModernBERT-base-shaped classifier folder on random weights, its tokenizer.json beside;
    returns the HF model (eval mode)."""
    import transformers
    from modernbert_fixtures import train_tokenizer_json
    tok = train_tokenizer_json(os.path.join(folder, "tokenizer.json"), "\n".join(real_lines()), vocab_size=8000)
    ids = {name: tok.token_to_id(name) for name in ("[PAD]", "[CLS]", "[SEP]")}
    config = transformers.ModernBertConfig(**{**BASE, "num_hidden_layers": layers}, attn_implementation=attn,
                                           pad_token_id=ids["[PAD]"], cls_token_id=ids["[CLS]"],
                                           sep_token_id=ids["[SEP]"], bos_token_id=ids["[CLS]"],
                                           eos_token_id=ids["[SEP]"], num_labels=2)
    torch.manual_seed(seed)
    model = transformers.ModernBertForSequenceClassification(config).eval()
    model.save_pretrained(folder)
    return model


def texts_of_lengths(tokenizer, lengths: list[int], seed: int = 0) -> list[list[int]]:
    """For each length, [CLS] + the ids of consecutive real lines (from a random start) cut to fit + [SEP]."""
    rng = random.Random(seed)
    encoded = [tokenizer.encode(line + "\n") for line in real_lines()]
    out = []
    for n in lengths:
        i, ids = rng.randrange(len(encoded)), []
        while len(ids) < n - 2:
            ids += encoded[i % len(encoded)]
            i += 1
        out.append([tokenizer.cls_token_id] + ids[: n - 2] + [tokenizer.sep_token_id])
    return out


def padded(texts: list[list[int]], pad_id: int):
    """(ids, attention_mask), right-padded to the longest text."""
    longest = max(map(len, texts))
    ids = torch.full((len(texts), longest), pad_id, dtype=torch.long)
    mask = torch.zeros(len(texts), longest, dtype=torch.long)
    for row, t in enumerate(texts):
        ids[row, : len(t)], mask[row, : len(t)] = torch.tensor(t), 1
    return ids, mask


def report(name: str, work: float, unit: str, ours, theirs):
    """One markdown row: both sides' throughput (median call), the median of the rounds' ratios."""
    (ours_s, _), (hf_s, _) = ours, theirs
    rounds = round_ratios(ours_s, hf_s)
    line = (f"| {name} | {work / statistics.median(ours_s):,.3g} | {work / statistics.median(hf_s):,.3g} | {unit} "
            f"| **{statistics.median(rounds):.2f}x** ({' '.join(f'{r:.2f}' for r in rounds)}) |")
    print(line, flush=True)
    return line


def check_parity(ours, hf, tokenizer, pad_id):
    ids, mask = padded(texts_of_lengths(tokenizer, [300, 40, 9], seed=7), pad_id)
    with torch.inference_mode():
        mine = ours.modernbert(ids, mask).sequence_output
        theirs = hf.model(input_ids=ids, attention_mask=mask).last_hidden_state
        logits = (ours(ids, attention_mask=mask), hf(input_ids=ids, attention_mask=mask).logits)
    real = mask.bool()
    diff = (mine[real] - theirs[real]).abs().max().item()
    logit_diff = (logits[0] - logits[1]).abs().max().item()
    print(f"parity on 3 texts of 300/40/9 tokens: max |bertlab - HF| hidden {diff:.1e}, logits {logit_diff:.1e}")
    if diff > 1e-4 or logit_diff > 1e-4:
        raise SystemExit("the two sides disagree by more than 1e-4: nothing to time")


def inference(ours, hf, texts, pad_id, rounds):
    batches = [padded(texts[i : i + BATCH], pad_id) for i in range(0, len(texts), BATCH)]
    real = sum(map(len, texts))
    computed = sum(ids.numel() for ids, _ in batches)
    print(f"\n{len(texts)} texts, {real:,} real tokens, batches of {BATCH}: HF computes {computed:,} positions "
          f"(padding {1 - real / computed:.1%}), bertlab {real:,} (padding 0.0%: unpadded)")

    @torch.inference_mode()
    def run_ours():
        for ids, mask in batches:
            ours.modernbert(ids, mask)

    @torch.inference_mode()
    def run_hf():
        for ids, mask in batches:
            hf.model(input_ids=ids, attention_mask=mask)

    return report(f"inference, {len(texts)} texts of 8-512 tokens", real, "real tokens/s",
                  *alternating(run_ours, run_hf, rounds))


def curve(ours, hf, tokenizer, lengths, rounds):
    """Seconds of one forward pass per input shape, per side; 16 x 512 beside 1 x 8192."""
    shapes = [(1, n) for n in lengths] + [(16, 512)]
    long_text = texts_of_lengths(tokenizer, [max(lengths)], seed=3)[0]
    lines = []
    for rows, n in shapes:
        ids = torch.tensor([long_text[:n]] * rows)
        mask = torch.ones_like(ids)

        @torch.inference_mode()
        def run_ours():
            ours.modernbert(ids, mask)

        @torch.inference_mode()
        def run_hf():
            hf.model(input_ids=ids, attention_mask=mask)

        (ours_s, _), (hf_s, _) = alternating(run_ours, run_hf, rounds, warmup=int(not lines))  # the first: one untimed
        lines.append((rows, n, statistics.median(ours_s), statistics.median(hf_s)))
        print(f"  {rows} x {n}: bertlab {lines[-1][2]:.2f} s, HF {lines[-1][3]:.2f} s", flush=True)
    # cost per token against 16 short inputs of the same total: 1.00 is linear in L
    short_ours, short_hf = lines[-1][2] / 8192, lines[-1][3] / 8192
    table = ["| input | tokens | bertlab s | bertlab s/token vs 16 x 512 | HF s | HF s/token vs 16 x 512 "
             "| speed-up |", "|---|---:|---:|---:|---:|---:|---:|"]
    for rows, n, mine, theirs in lines:
        tokens = rows * n
        table.append(f"| {rows} x {n} | {tokens:,} | {mine:.2f} | {mine / tokens / short_ours:.2f} | {theirs:.2f} "
                     f"| {theirs / tokens / short_hf:.2f} | {theirs / mine:.2f}x |")
    print("\n".join(table), flush=True)
    return table


def training(ours, hf, texts, pad_id, batch_size, rounds):
    batch = texts[:batch_size]
    ids, mask = padded(batch, pad_id)
    labels = torch.tensor([i % 2 for i in range(len(batch))])
    real = sum(map(len, batch))
    print(f"\ntraining batch: {len(batch)} texts, {real:,} real tokens, HF computes {ids.numel():,} positions "
          f"(padding {1 - real / ids.numel():.1%}), bertlab {real:,}")

    def step_of(model, logits_of):
        model.train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=True)

        def step():
            loss = F.cross_entropy(logits_of(model), labels)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        return step

    step_ours = step_of(ours, lambda m: m(ids, attention_mask=mask))
    step_hf = step_of(hf, lambda m: m(input_ids=ids, attention_mask=mask).logits)
    return report(f"fine-tuning step, batch {len(batch)} texts of 8-512 tokens", 1.0, "steps/s",
                  *alternating(step_ours, step_hf, rounds))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3, help="timed rounds per side (default 3)")
    p.add_argument("--texts", type=int, default=32, help=f"inference texts, in batches of {BATCH} (default 32)")
    p.add_argument("--train-batch", type=int, default=8, help="texts per fine-tuning step (default 8)")
    p.add_argument("--lengths", default="512,1024,2048,4096,8192", help="the length curve's single inputs")
    p.add_argument("--curve-rounds", type=int, default=1, help="timed rounds per length (default 1)")
    p.add_argument("--curve-layers", type=int, default=6,
                   help="layers of the length curve's models (default 6: 2 global, 4 local, base's width; 22 is "
                        "base's depth, too slow on 2 cores for 8,192 tokens on HF's side)")
    p.add_argument("--hf-attn", choices=["sdpa", "eager"], default="sdpa", help="HF's attn_implementation")
    p.add_argument("--only", default="infer,curve,train")
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    jobs = args.only.split(",")
    start = time.time()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, HF attn_implementation "
          f"{args.hf_attn}, load {os.getloadavg()}", flush=True)
    with tempfile.TemporaryDirectory() as folder:
        hf = make_folder(folder, BASE["num_hidden_layers"], args.hf_attn)
        loaded = load_model(folder)
        ours, tokenizer = loaded.model, loaded.tokenizer
        pad_id = tokenizer.pad_token_id
        check_parity(ours, hf, tokenizer, pad_id)
        rng = random.Random(0)
        texts = texts_of_lengths(tokenizer, [rng.randint(8, 512) for _ in range(max(args.texts, args.train_batch))])
        rng.shuffle(texts)
        rows = ["| workload | bertlab | HF | unit | speed-up (median of rounds; rounds) |", "|---|---:|---:|---|---|"]
        if "infer" in jobs:
            rows.append(inference(ours, hf, texts[: args.texts], pad_id, args.rounds))
        if "curve" in jobs:
            lengths = [int(n) for n in args.lengths.split(",")]
            print(f"\nlength curve, {args.curve_layers} layers:", flush=True)
            if args.curve_layers != BASE["num_hidden_layers"]:
                with tempfile.TemporaryDirectory() as small:
                    small_hf = make_folder(small, args.curve_layers, args.hf_attn)
                    curve(load_model(small).model, small_hf, tokenizer, lengths, args.curve_rounds)
            else:
                curve(ours, hf, tokenizer, lengths, args.curve_rounds)
        if "train" in jobs:
            rows.append(training(ours, hf, texts, pad_id, args.train_batch, args.rounds))
    print("\n" + "\n".join(rows))
    print(f"({time.time() - start:.0f} s, load after {os.getloadavg()})")


if __name__ == "__main__":
    main()
