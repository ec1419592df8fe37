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
from ..translation.objective import label_smoothed_loss
from . import Shown, rounded

PAIRS = [("我 爱 中国", "I love China"), ("我 爱 机器 学习", "I love machine learning"),
         ("机器 学习 很 有趣", "machine learning is interesting"), ("我 爱 你", "I love you"),
         ("你 爱 中国", "you love China"), ("中国 很 大", "China is big"),
         ("你 很 有趣", "you are interesting"),
         ("我 学习", "I learn")]
SPECIALS = ["<pad>", "<bos>", "<eos>"]
PAD, BOS, EOS = 0, 1, 2  # their ids, on both sides
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
        return torch.tensor([row + [PAD] * (width - len(row)) for row in rows])
    src = [source.convert_tokens_to_ids(s.split()) + [EOS] for s, _ in pairs]
    tgt = [target.convert_tokens_to_ids(t.split()) for _, t in pairs]
    return padded(src), padded([[BOS] + t for t in tgt]), padded([t + [EOS] for t in tgt])


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
                                      pad_token_id=PAD, bos_token_id=BOS, eos_token_id=EOS)
    model = Seq2SeqTransformer(config)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    src, tgt_in, tgt_out = batch(PAIRS, source, target)
    for _ in range(steps):
        logits = model(src, tgt_in)  # teacher forcing: every position at once
        loss = label_smoothed_loss(logits, tgt_out, pad_id=PAD) / (tgt_out != PAD).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model.eval(), source, target, loss.item()


def translation_walkthrough() -> Shown:
    shown = Shown("我爱中国 -> I love China, step by step",
                  "000, Transformer (输入：我爱中国; Encoder/Decoder 步骤); Encoder-Decoder")
    start = time.perf_counter()
    model, source, target, loss = train_toy_translator()
    shown.say(f"trained Seq2SeqTransformer (preset 'test', {model.num_parameters():,} parameters) on {len(PAIRS)} "
              f"pairs, {STEPS} steps, in {time.perf_counter() - start:.1f} s; last loss {loss:.3f}")
    src = torch.tensor([source.convert_tokens_to_ids(SOURCE.split()) + [EOS]])
    with torch.no_grad():
        show_encoder_input(shown, model, src, SOURCE.split() + ["<eos>"])
        tokens = decode_step_by_step(shown, model, src, target.id_to_token)
        greedy = [target.id_to_token[t] for t in greedy_decode(model, src)[0]]
    ours = [target.id_to_token[t] for t in tokens[1:] if t != EOS]
    shown.compare("translation", " ".join(NOTES_STEPS), " ".join(ours))
    shown.say(f"(inference.translate.greedy_decode, with its key/value cache, gives: {' '.join(greedy)})")
    shown.values.update(translation=" ".join(ours), greedy=" ".join(greedy), loss=loss)
    return shown


def show_encoder_input(shown: Shown, model, src, words):
    """Each source word's scaled embedding + its sinusoid = what the encoder reads (first 3 dims)."""
    x = model.embed(model.source_embedding, src)  # no dropout in eval mode
    word_part = model.source_embedding(src) * math.sqrt(model.config.d_model)
    shown.say("encoder input = word embedding x sqrt(d_model) + positional encoding (first 3 of "
              f"{model.config.d_model} dimensions):")
    for i, word in enumerate(words):
        shown.say(f"  {word}\t{rounded(word_part[0, i, :3], 3)} + {rounded(model.positions.pe[i, :3], 3)} "
                  f"= {rounded(x[0, i, :3], 3)}")


def decode_step_by_step(shown: Shown, model, src, names, max_steps: int = 10) -> list[int]:
    """Greedy decoding without a cache, as the notes walk it: at step t the decoder reads <bos> and
    the t-1 words chosen so far under a t x t sequence mask, and the most likely next word is kept."""
    memory, src_mask = model.encode(src)
    tokens = [BOS]
    while len(tokens) <= max_steps and tokens[-1] != EOS:
        step = len(tokens)
        probs = model.decode(torch.tensor([tokens]), memory, src_mask)[0, -1].softmax(-1)
        top = probs.topk(TOP)
        shown.say(f"step {step}: decoder input {' '.join(names[t] for t in tokens)}")
        shown.say(f"  sequence mask {[[int(v) for v in row] for row in causal_mask(step).tolist()]}")
        shown.say("  candidates: " + ", ".join(f"{names[i]} {p:.3f}"
                                               for p, i in zip(top.values.tolist(), top.indices.tolist())))
        tokens.append(int(top.indices[0]))
    return tokens
