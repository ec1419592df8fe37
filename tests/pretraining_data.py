"""Small pretraining shard folders from real text for the training tests, and readers of a run's
outputs. The folders: a WordPiece vocabulary of the text's commonest words plus every character (so
nothing is [UNK]), sentence pairs of consecutive lines (half with a random B), and a fixed number of
masked positions per instance so every micro-batch weighs its MLM loss the same (which is what makes
accumulated or data-parallel gradients equal a big batch's under run_pretraining's per-batch MLM
mean)."""
import json
import os
from collections import Counter

import numpy as np
import torch

from bertlab.pretraining.shards import ShardWriter, write_meta
from bertlab.tokenization import BertTokenizer
from bertlab.tokenization.basic import BasicTokenizer

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUMMARIES = os.path.join(REPO, "data", "python-docs", "summaries.txt")
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
TINY = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
            max_position_embeddings=64)


def real_lines() -> list[str]:
    """The shipped docstring summaries without their "module.name: " prefix."""
    with open(SUMMARIES, encoding="utf-8") as f:
        return [line.split(": ", 1)[-1].strip() for line in f if line.strip()]


def build_tokenizer(lines, words: int = 1500) -> BertTokenizer:
    basic = BasicTokenizer(do_lower_case=True)
    counts = Counter(t for line in lines for t in basic.tokenize(line))
    chars = sorted({c for t in counts for c in t})
    common = [w for w, _ in counts.most_common(words) if len(w) > 1]
    tokens = SPECIALS + chars + [f"##{c}" for c in chars] + common
    return BertTokenizer({t: i for i, t in enumerate(dict.fromkeys(tokens))}, do_lower_case=True)


def make_instances(lines, tokenizer, max_seq_length: int, masked: int, seed: int = 0) -> list[dict]:
    """[CLS] A [SEP] B [SEP] from consecutive lines (or a random B, label 1), pairs trimmed from the
    longer side to fit, exactly `masked` non-special positions replaced by [MASK]."""
    rng = np.random.default_rng(seed)
    ids = tokenizer.tokenize_ids_batch(lines, add_special_tokens=False)
    cls, sep, mask = tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.mask_token_id
    out = []
    for i in range(len(ids) - 1):
        random_b = rng.random() < 0.5
        a, b = list(ids[i]), list(ids[int(rng.integers(len(ids)))] if random_b else ids[i + 1])
        while len(a) + len(b) > max_seq_length - 3:
            (a if len(a) > len(b) else b).pop()
        if len(a) + len(b) < masked or not a or not b:
            continue
        tokens = [cls, *a, sep, *b, sep]
        candidates = [k for k, t in enumerate(tokens) if t not in (cls, sep)]
        positions = sorted(rng.choice(candidates, masked, replace=False).tolist())
        originals = [tokens[k] for k in positions]
        for k in positions:
            tokens[k] = mask
        out.append({"input_ids": tokens, "segment_ids": [0] * (len(a) + 2) + [1] * (len(b) + 1),
                    "next_sentence_label": int(random_b), "masked_lm_positions": positions,
                    "masked_lm_ids": originals})
    return out


def write_folder(folder, instances, tokenizer, max_seq_length: int, masked: int, nsp: bool = True,
                 shard_size: int = 300) -> str:
    os.makedirs(folder, exist_ok=True)
    vocab_size = len(tokenizer.vocab)
    writer = ShardWriter(folder, "train", max_seq_length, masked, vocab_size, shard_size=shard_size)
    for instance in instances:
        writer.add(instance)
    tokenizer.vocab.save(os.path.join(folder, "vocab.txt"))
    write_meta(folder, writer.close(), max_seq_length=max_seq_length, max_predictions_per_seq=masked,
               vocab_size=vocab_size, dynamic_masking=False, nsp=nsp, settings={"do_lower_case": True})
    return str(folder)


def make_folders(root, max_seq_length: int = 32, masked: int = 4, held_out: int = 200, nsp: bool = True,
                 limit: int | None = None, tokenizer=None):
    """(train folder, held-out folder, tokenizer): the last `held_out` lines are held out."""
    lines = real_lines()[:limit]
    tokenizer = tokenizer or build_tokenizer(lines)
    train = make_instances(lines[:-held_out], tokenizer, max_seq_length, masked, seed=1)
    dev = make_instances(lines[-held_out:], tokenizer, max_seq_length, masked, seed=2)
    return (write_folder(os.path.join(root, f"train{max_seq_length}"), train, tokenizer, max_seq_length, masked, nsp),
            write_folder(os.path.join(root, f"dev{max_seq_length}"), dev, tokenizer, max_seq_length, masked, nsp),
            tokenizer)


def train_records(out, kind="train"):
    with open(os.path.join(out, "metrics.jsonl"), encoding="utf-8") as f:
        return [r for r in map(json.loads, f) if r["kind"] == kind]


def checkpoint(out):
    return torch.load(os.path.join(out, "checkpoint.pt"), weights_only=False)


def sharded_checkpoint(out):
    """A sharded checkpoint's model and optimizer state, read whole (keyed by parameter name) from the
    folder its checkpoint.pt names, with torch.distributed.checkpoint's own converter."""
    import tempfile

    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save
    folder = os.path.join(out, checkpoint(out)["extra"]["shards"])
    with tempfile.TemporaryDirectory() as tmp:
        dcp_to_torch_save(folder, os.path.join(tmp, "whole.pt"))
        return torch.load(os.path.join(tmp, "whole.pt"), weights_only=False)


def assert_same_training_state(a, b, atol=1e-6, sharded=False):
    """Parameters and the optimizer's moments (exp_avg is (1 - beta1) x the gradient after one step,
    so unlike Adam's scale-free update it shows a gradient off by any factor). `sharded`: both runs
    wrote sharded checkpoints."""
    ca, cb = (sharded_checkpoint(a), sharded_checkpoint(b)) if sharded else (checkpoint(a), checkpoint(b))
    assert ca["model"] and ca["optimizer"]["state"]
    for name, p in ca["model"].items():
        torch.testing.assert_close(cb["model"][name], p, atol=atol, rtol=1e-5, msg=name)
    for k, state in ca["optimizer"]["state"].items():
        for key in ("exp_avg", "exp_avg_sq"):
            torch.testing.assert_close(cb["optimizer"]["state"][k][key], state[key], atol=atol, rtol=1e-4,
                                       msg=f"{k} {key}")
