"""Toy translation tasks on integer tokens (no tokenizer): copy and reverse a random sequence."""
import torch

PAD, BOS, EOS, FIRST = 0, 1, 2, 3  # ids 0-2 are special, FIRST.. are the "words"


def toy_pairs(n, generator, reverse=False, max_len=5, vocab=10):
    """n (source ids, target ids) pairs of 1..max_len words drawn from FIRST..vocab-1."""
    pairs = []
    for length in torch.randint(1, max_len + 1, (n,), generator=generator).tolist():
        x = torch.randint(FIRST, vocab, (length,), generator=generator).tolist()
        pairs.append((x, x[::-1] if reverse else x))
    return pairs


def toy_batch(pairs):
    """(src, tgt_in, tgt_out) right-padded: src + EOS, BOS + target, target + EOS."""
    width = max(max(len(s), len(t)) for s, t in pairs) + 1
    src = torch.full((len(pairs), width), PAD)
    tgt_in, tgt_out = src.clone(), src.clone()
    for i, (s, t) in enumerate(pairs):
        src[i, :len(s) + 1] = torch.tensor(s + [EOS])
        tgt_in[i, :len(t) + 1] = torch.tensor([BOS] + t)
        tgt_out[i, :len(t) + 1] = torch.tensor(t + [EOS])
    return src, tgt_in, tgt_out
