"""The seq2seq Transformer and its decoding: it learns toy tasks, its masks hide what they must,
cached decoding equals recomputation, and beam search scores what a forward pass scores."""
import dataclasses
import json
import math

import pytest
import torch
import torch.nn.functional as F

from bertlab.inference.translate import beam_search, greedy_decode
from bertlab.models.transformer import Seq2SeqTransformer, TransformerConfig
from translation_toy import BOS, EOS, PAD, toy_batch, toy_pairs


@pytest.fixture(autouse=True, scope="module")  # module scope: set before module fixtures train
def one_thread():
    # a loaded 2-core machine runs these tiny matmuls many times slower on two threads than on one
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def toy_config(**overrides):
    return TransformerConfig.preset("test", **{"source_vocab_size": 10, "target_vocab_size": 10, "pad_token_id": PAD,
                                               "bos_token_id": BOS, "eos_token_id": EOS, **overrides})


def random_model(seed=0, vocab=24, **overrides):
    torch.manual_seed(seed)
    return Seq2SeqTransformer(toy_config(source_vocab_size=vocab, target_vocab_size=vocab, **overrides)).eval()


def train_toy(reverse, steps=400, seed=0):
    """Adam, 20 warmup steps then linear decay to 0 (exact outputs need the rate to come down), on
    fresh random pairs every step, teacher forcing."""
    torch.manual_seed(seed)
    model = Seq2SeqTransformer(toy_config())
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2, betas=(0.9, 0.98), eps=1e-9)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, (step + 1) / 20) * (1 - step / steps))
    generator = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        src, tgt_in, tgt_out = toy_batch(toy_pairs(64, generator, reverse))
        loss = F.cross_entropy(model(src, tgt_in).flatten(0, 1), tgt_out.flatten(), ignore_index=PAD)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()
    return model.eval()


def exact_match(model, reverse, n=300):
    pairs = toy_pairs(n, torch.Generator().manual_seed(1234), reverse)
    out = greedy_decode(model, toy_batch(pairs)[0])
    return sum(o == t for o, (_, t) in zip(out, pairs)) / n


@pytest.fixture(scope="module")
def copy_model():
    return train_toy(reverse=False)


def test_copy_task_is_learned(copy_model):
    assert exact_match(copy_model, reverse=False) >= 0.99


def test_reverse_task_is_learned():
    assert exact_match(train_toy(reverse=True), reverse=True) >= 0.99


def sources(n=6, seed=0, vocab=24):
    g = torch.Generator().manual_seed(seed)
    return toy_batch(toy_pairs(n, g, max_len=7, vocab=vocab))[0]


@pytest.mark.parametrize("trained", [False, True])
def test_cached_greedy_equals_uncached(trained, copy_model):
    model = copy_model if trained else random_model()
    src = sources(vocab=10 if trained else 24)
    assert greedy_decode(model, src, use_cache=True) == greedy_decode(model, src, use_cache=False)


@pytest.mark.parametrize("trained", [False, True])
def test_cached_beam_equals_uncached(trained, copy_model):
    model = copy_model if trained else random_model()
    src = sources(vocab=10 if trained else 24)
    cached = beam_search(model, src, beam_size=3, nbest=3, use_cache=True)
    uncached = beam_search(model, src, beam_size=3, nbest=3, use_cache=False)
    assert [[h.tokens for h in hyps] for hyps in cached] == [[h.tokens for h in hyps] for hyps in uncached]
    for a, b in zip(cached, uncached):
        assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-4)


def test_causal_mask_hides_the_future():
    model = random_model().train()  # training-mode forward; the test preset has no dropout
    src, tgt_in, _ = toy_batch(toy_pairs(4, torch.Generator().manual_seed(0), max_len=6, vocab=24))
    tgt_in[:, 1:] = torch.randint(3, 24, tgt_in[:, 1:].shape)  # no padding: every position is real
    t = 2
    changed = tgt_in.clone()
    changed[:, t + 1] = (changed[:, t + 1] - 3 + 1) % 21 + 3
    before, after = model(src, tgt_in), model(src, changed)
    torch.testing.assert_close(after[:, :t + 1], before[:, :t + 1])
    assert not torch.allclose(after[:, t + 1], before[:, t + 1])


def test_padding_does_not_change_a_sentence():
    model = random_model()
    pairs = toy_pairs(5, torch.Generator().manual_seed(3), max_len=8, vocab=24)
    pairs[0] = ([5, 6], [7])  # the shortest, so it is padded in the batch
    src, tgt_in, _ = toy_batch(pairs)
    alone_src, alone_tgt, _ = toy_batch(pairs[:1])
    memory, _ = model.encode(src)
    alone_memory, _ = model.encode(alone_src)
    torch.testing.assert_close(memory[:1, :alone_src.size(1)], alone_memory)
    logits = model(src, tgt_in)
    torch.testing.assert_close(logits[:1, :alone_tgt.size(1)], model(alone_src, alone_tgt))
    assert greedy_decode(model, src)[0] == greedy_decode(model, alone_src)[0]
    assert beam_search(model, src, 3)[0][0].tokens == beam_search(model, alone_src, 3)[0][0].tokens


@pytest.mark.parametrize("trained", [False, True])
def test_each_sentence_decodes_as_it_would_alone(trained, copy_model):
    # Sentences end at different steps and leave the batch (with their cache rows): what is left
    # must go on exactly as it would without them.
    model = copy_model if trained else random_model(seed=2)
    vocab = 10 if trained else 24
    pairs = toy_pairs(7, torch.Generator().manual_seed(5), max_len=8, vocab=vocab)
    src = toy_batch(pairs)[0]
    greedy = greedy_decode(model, src, max_len_a=1.0, max_len_b=2)
    beams = beam_search(model, src, 3, nbest=3, max_len_a=1.0, max_len_b=2)
    assert len({len(t) for t in greedy}) > 1  # the sentences do end at different steps
    for i, (source, _) in enumerate(pairs):
        alone = toy_batch([(source, [EOS])])[0]
        assert greedy_decode(model, alone, max_len_a=1.0, max_len_b=2)[0] == greedy[i]
        by_itself = beam_search(model, alone, 3, nbest=3, max_len_a=1.0, max_len_b=2)[0]
        assert [h.score for h in by_itself] == pytest.approx([h.score for h in beams[i]], abs=1e-4)
        for mine, batched in zip(by_itself, beams[i]):
            if mine.tokens != batched.tokens:  # allowed only for a tie: the batch's pick scores the same alone
                assert forced_log_prob(model, alone, batched.tokens) == pytest.approx(mine.log_prob, abs=1e-4)


def forced_log_prob(model, src, tokens):
    """log P(tokens + EOS | src) by one teacher-forced forward pass. A batch and a lone sentence
    compute scores that differ in the last float digits, so of two hypotheses of equal probability
    (the trained copy model has such) either may take the last place in the beam."""
    target = torch.tensor([tokens + [EOS]])
    tgt_in = torch.tensor([[BOS] + tokens])
    return model(src, tgt_in).log_softmax(-1).gather(-1, target[..., None]).sum().item()


def test_beam_of_one_is_greedy():
    model, src = random_model(seed=1), sources(8, seed=1)
    assert [h[0].tokens for h in beam_search(model, src, beam_size=1)] == greedy_decode(model, src)


@pytest.mark.parametrize("length_penalty", [0.0, 1.0])
def test_nbest_scores_are_sorted_and_rescore(copy_model, length_penalty):
    src = sources(4, seed=2, vocab=10)
    for row, hyps in enumerate(beam_search(copy_model, src, beam_size=4, nbest=4, length_penalty=length_penalty)):
        assert len(hyps) == 4
        scores = [h.score for h in hyps]
        assert scores == sorted(scores, reverse=True)
        real = src[row][src[row] != PAD][None]
        for h in hyps:
            target = torch.tensor([h.tokens + [EOS]])
            tgt_in = torch.tensor([[BOS] + h.tokens])
            log_prob = copy_model(real, tgt_in).log_softmax(-1).gather(-1, target[..., None]).sum().item()
            assert h.log_prob == pytest.approx(log_prob, abs=1e-4)
            assert h.score == pytest.approx(log_prob / (len(h.tokens) + 1) ** length_penalty, abs=1e-4)


def test_length_limit_and_eos():
    model, src = random_model(seed=2), sources(5, seed=5)
    for hyp in greedy_decode(model, src, max_len=3):
        assert len(hyp) <= 3 and EOS not in hyp
    lengths = (src != PAD).sum(1)
    for hyps, n in zip(beam_search(model, src, 2, nbest=2, max_len_a=1.0, max_len_b=0), lengths.tolist()):
        assert all(len(h.tokens) <= n and EOS not in h.tokens for h in hyps)


def test_config_round_trips_through_json(tmp_path):
    config = TransformerConfig.preset("base", source_vocab_size=123, target_vocab_size=456)
    path = tmp_path / "config.json"
    config.to_json_file(path)
    assert TransformerConfig.from_json_file(path) == config
    assert json.loads(path.read_text())["d_model"] == 512
    assert dataclasses.replace(config, dropout=0.3) != config


def test_presets_and_their_errors():
    base = TransformerConfig.preset("base")
    assert (base.encoder_layers, base.decoder_layers, base.d_model, base.attention_heads, base.ffn_dim,
            base.dropout, base.activation_function) == (6, 6, 512, 8, 2048, 0.1, "relu")
    with pytest.raises(ValueError, match="joint vocabulary"):
        TransformerConfig(source_vocab_size=10, target_vocab_size=11, share_embeddings=True)
    with pytest.raises(ValueError, match="unknown Transformer preset"):
        TransformerConfig.preset("huge")


def test_shared_embeddings_are_one_parameter():
    shared = Seq2SeqTransformer(toy_config(share_embeddings=True))
    assert shared.source_embedding.weight is shared.target_embedding.weight is shared.output.weight
    separate = Seq2SeqTransformer(toy_config())  # tied target/output, separate source
    assert separate.target_embedding.weight is separate.output.weight
    assert separate.source_embedding.weight is not separate.target_embedding.weight
    untied = Seq2SeqTransformer(toy_config(tie_word_embeddings=False))
    assert untied.output.weight is not untied.target_embedding.weight
    count = sum(p.numel() for p in separate.parameters())
    assert sum(p.numel() for p in shared.parameters()) == count - 10 * 32
    assert not math.isnan(shared(sources(2, vocab=10), torch.tensor([[BOS, 4], [BOS, 5]])).sum().item())
