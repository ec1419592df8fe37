"""我爱中国 -> I love China (file 000, the opening example and "Encoder-Decoder" / "具体事项"): a
tiny Seq2SeqTransformer trained in seconds on a handful of word-segmented sentence pairs with
teacher forcing (all target positions at once under the sequence mask) and the translation
objective's label-smoothed loss, then decoded greedily one word at a time: input embeddings plus
positions, each step's most likely words, and the sequence mask growing by one row a step."""
import math
import time

import torch

from ..core import causal_mask
from ..inference.translate import greedy_decode
from ..models.transformer import Seq2SeqTransformer, TransformerConfig
from ..tokenization import Vocab
from ..training.translation_trainer import label_smoothed_loss
from . import Shown, rounded

PAIRS = [("我 爱 中国", "I love China"), ("我 爱 机器 学习", "I love machine learning"),
         ("机器 学习 很 有趣", "machine learning is interesting"), ("我 爱 你", "I love you"),
         ("你 爱 中国", "you love China"), ("中国 很 大", "China is big"),
         ("你 很 有趣", "you are interesting"),
         ("我 学习", "I learn")]
SPECIALS = ["<pad>", "<bos>", "<eos>"]  # ids 0, 1, 2 on both sides
SOURCE = "我 爱 中国"
NOTES_STEPS = ["I", "Love", "China"]  # the notes' Step 1-3 outputs
STEPS, SEED, TOP = 100, 0, 3


def word_vocab(sentences) -> Vocab:
    words = dict.fromkeys(w for s in sentences for w in s.split())
    return Vocab(SPECIALS + list(words))


def batch(pairs, source: Vocab, target: Vocab):
    """(src + <eos>, <bos> + target, target + <eos>), right-padded with <pad>."""
    def padded(rows):
        width = max(map(len, rows))
        return torch.tensor([row + [0] * (width - len(row)) for row in rows])
    src = [source.convert_tokens_to_ids(s.split()) + [2] for s, _ in pairs]
    tgt = [target.convert_tokens_to_ids(t.split()) for _, t in pairs]
    return padded(src), padded([[1] + t for t in tgt]), padded([t + [2] for t in tgt])


def train_toy_translator(steps: int = STEPS, seed: int = SEED):
    """(model, source vocab, target vocab, final loss): the test-size Transformer on PAIRS."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a model this small only loses time to threads (85 s instead of 5 on 2 busy cores)
    try:
        return _train(steps, seed)
    finally:
        torch.set_num_threads(threads)


def _train(steps: int, seed: int):
    torch.manual_seed(seed)
    source, target = word_vocab(s for s, _ in PAIRS), word_vocab(t for _, t in PAIRS)
    config = TransformerConfig.preset("test", source_vocab_size=len(source), target_vocab_size=len(target),
                                      pad_token_id=0, bos_token_id=1, eos_token_id=2)
    model = Seq2SeqTransformer(config)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    src, tgt_in, tgt_out = batch(PAIRS, source, target)
    for _ in range(steps):
        logits = model(src, tgt_in)  # teacher forcing: every position at once
        loss = label_smoothed_loss(logits, tgt_out, pad_id=0) / (tgt_out != 0).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model.eval(), source, target, loss.item()


def translation_walkthrough() -> Shown:
    with torch.no_grad():
        return _walk()


def _walk() -> Shown:
    shown = Shown("我爱中国 -> I love China, step by step",
                  "000, Transformer (输入：我爱中国; Encoder/Decoder 步骤); Encoder-Decoder")
    start = time.perf_counter()
    with torch.enable_grad():
        model, source, target, loss = train_toy_translator()
    shown.say(f"trained Seq2SeqTransformer (preset 'test', {model.num_parameters():,} parameters) on {len(PAIRS)} "
              f"pairs, {STEPS} steps, in {time.perf_counter() - start:.1f} s; last loss {loss:.3f}")
    words = SOURCE.split()
    src = torch.tensor([source.convert_tokens_to_ids(words) + [2]])
    x = model.embed(model.source_embedding, src)  # what the encoder reads (no dropout in eval mode)
    word_part = model.source_embedding(src) * math.sqrt(model.config.d_model)
    shown.say("encoder input = word embedding x sqrt(d_model) + positional encoding (first 3 of "
              f"{model.config.d_model} dimensions):")
    for i, word in enumerate(words + ["<eos>"]):
        shown.say(f"  {word}\t{rounded(word_part[0, i, :3], 3)} + {rounded(model.positions.pe[i, :3], 3)} "
                  f"= {rounded(x[0, i, :3], 3)}")
    memory, src_mask = model.encode(src)
    tokens = [model.config.bos_token_id]
    names = target.id_to_token
    while len(tokens) <= len(words) + 2:
        step = len(tokens)
        logits = model.decode(torch.tensor([tokens]), memory, src_mask)[0, -1]
        probs = logits.softmax(-1)
        top = probs.topk(TOP)
        shown.say(f"step {step}: decoder input {' '.join(names[t] for t in tokens)}")
        mask = causal_mask(step)
        shown.say(f"  sequence mask {[[int(v) for v in row] for row in mask.tolist()]}")
        shown.say("  candidates: " + ", ".join(f"{names[i]} {p:.3f}" for p, i in zip(top.values.tolist(),
                                                                             top.indices.tolist())))
        tokens.append(int(top.indices[0]))
        if tokens[-1] == model.config.eos_token_id:
            break
    ours = [names[t] for t in tokens[1:] if t != model.config.eos_token_id]
    greedy = [names[t] for t in greedy_decode(model, src)[0]]
    shown.compare("translation", " ".join(NOTES_STEPS), " ".join(ours))
    shown.say(f"(inference.translate.greedy_decode, with its key/value cache, gives: {' '.join(greedy)})")
    shown.values.update(translation=" ".join(ours), greedy=" ".join(greedy), loss=loss)
    return shown
