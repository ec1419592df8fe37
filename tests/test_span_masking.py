"""Span masking (SpanBERT), ERNIE's word-level spans from jieba, the span boundaries in the shards
and the span-boundary objective (pretraining/span_masking.py, models/span_boundary.py)."""
import math
import os
import random
from collections import Counter

import numpy as np
import pytest
import torch

from bertlab.cli import main
from bertlab.models import BertConfig
from bertlab.models.span_boundary import BertForSpanBoundaryPreTraining, SpanBoundaryHead
from bertlab.pretraining.create import load_vocab_tokenizer
from bertlab.models.losses import pretraining_loss
from bertlab.pretraining.shards import PretrainingData
from bertlab.pretraining.span_masking import (create_span_masked_lm_predictions, span_length_weights,
                                              words_of)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUMMARIES = os.path.join(REPO, "data", "python-docs", "summaries.txt")


def test_span_lengths_are_the_clipped_geometric_of_mean_3_8():
    weights = span_length_weights()
    assert len(weights) == 10 and math.isclose(sum(weights), 1)
    assert math.isclose(sum(n * w for n, w in zip(range(1, 11), weights)), 3.797, abs_tol=1e-3)  # the paper's 3.8
    assert all(a / b == pytest.approx(1 / 0.8) for a, b in zip(weights, weights[1:]))  # geometric, p = 0.2
    draws = random.Random(0).choices(range(1, 11), weights, k=40_000)
    assert np.mean(draws) == pytest.approx(3.797, abs=0.05) and max(draws) == 10


@pytest.fixture(scope="module")
def real_instances(bert_vocab_path):
    """[CLS] pieces [SEP] of real text (stdlib docstring summaries, joined to ~254 pieces), and which
    pieces continue a word (## pieces)."""
    tokenizer = load_vocab_tokenizer(bert_vocab_path)
    with open(SUMMARIES, encoding="utf-8") as f:
        ids = [i for line in f.read().splitlines()[:3000] for i in tokenizer.tokenize_ids(line)]
    subword = np.array([t.startswith("##") for t in tokenizer.vocab.id_to_token])
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    rows = [[cls, *ids[k:k + 254], sep] for k in range(0, len(ids) - 254, 254)][:60]
    return tokenizer, rows, [[bool(subword[t]) and 0 < p < 255 for p, t in enumerate(row)] for row in rows]


def test_span_masking_statistics_on_real_text(real_instances):
    """Over many draws: 15% of the pieces masked, spans of whole words only (never starting or
    ending inside a ## continuation), a realized mean span length near the drawn 3.8 words (below
    it, as the last span of an instance is cut to the budget), 80/10/10 decided per span."""
    tokenizer, rows, continues = real_instances
    mask_id = tokenizer.vocab.token_to_id["[MASK]"]
    specials = frozenset((tokenizer.cls_token_id, tokenizer.sep_token_id))
    masked_share, span_words, kinds = [], [], Counter()
    for draw in range(3):
        rng = random.Random(draw)
        for row, cont in zip(rows, continues):
            out, positions, labels, bounds = create_span_masked_lm_predictions(
                row, 0.15, 80, len(tokenizer.vocab), rng, never_mask=specials, mask_id=mask_id, continues=cont)
            assert labels == [row[p] for p in positions] and positions == sorted(set(positions))
            masked_share.append(len(positions) / len(row))
            starts = {s for s, _ in words_of(row, specials, cont)}
            for left, right in set(bounds):
                span = range(left + 1, right)
                assert left + 1 in starts and (right in starts or row[right] in specials), "a split word"
                assert set(span) <= set(positions)
                span_words.append(sum(p in starts for p in span))
                replaced = [out[p] for p in span]
                if all(t == mask_id for t in replaced):
                    kinds["mask"] += 1
                elif replaced == [row[p] for p in span]:
                    kinds["keep"] += 1
                else:
                    kinds["random"] += 1  # (a random piece may equal the original: rare)
    assert np.mean(masked_share) == pytest.approx(0.15, abs=0.005)
    assert 3.3 < np.mean(span_words) < 3.8 and max(span_words) <= 10
    total = sum(kinds.values())
    assert total > 1000
    assert kinds["mask"] / total == pytest.approx(0.8, abs=0.04)
    assert kinds["keep"] / total == pytest.approx(0.1, abs=0.03)


def test_span_boundaries_travel_through_the_shards(tmp_path, bert_vocab_path):
    """create-pretraining-data --masking span stores each prediction's span boundaries; batches
    carry them; a folder made before (token masking) reads as it did, without them."""
    for masking in ("span", "token"):
        out = tmp_path / masking
        assert main(["create-pretraining-data", SUMMARIES, "--vocab", bert_vocab_path, "-o", str(out),
                     "--masking", masking, "--max-seq-length", "64", "--max-predictions-per-seq", "10",
                     "--dupe-factor", "1", "--workers", "1", "--quiet"]) == 0
        data = PretrainingData(str(out))
        batch = data.batch(np.arange(min(64, len(data))))
        assert data.meta["settings"]["masking"] == masking
        if masking == "token":
            assert "span_boundaries" not in data.meta and "masked_lm_boundaries" not in batch
            continue
        assert data.meta["span_boundaries"] is True
        b, pos, w = batch["masked_lm_boundaries"], batch["masked_lm_positions"], batch["masked_lm_weights"].bool()
        assert ((b[..., 0] < pos) & (pos < b[..., 1]))[w].all()
        assert (b[..., 1] < batch["attention_mask"].sum(1, keepdim=True))[w].all()
        assert (w.sum(1) > 0).all()


def test_ernie_spans_are_jieba_words(tmp_path):
    """--masking ernie: every span is exactly one jieba word (phrase or name), never a part of one."""
    import jieba
    lines = ["我们在北京大学学习自然语言处理。", "今天天气很好，我们去公园散步。", "研究人员发现了新的方法。",
             "他喜欢阅读历史书籍和科学杂志。"] * 20
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *sorted(set("".join(lines)))]) + "\n",
                     encoding="utf-8")
    text = tmp_path / "zh.txt"
    text.write_text("\n\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    assert main(["create-pretraining-data", str(text), "--vocab", str(vocab), "-o", str(out), "--masking", "ernie",
                 "--mode", "full-sentences", "--max-seq-length", "24", "--max-predictions-per-seq", "6", "--masked-lm-prob", "0.3",
                 "--dupe-factor", "3", "--workers", "1", "--quiet"]) == 0
    data = PretrainingData(str(out))
    words = {line: jieba.lcut(line) for line in set(lines)}
    id_to_token = load_vocab_tokenizer(str(vocab)).vocab.id_to_token
    r, seen = data.rows(np.arange(len(data))), Counter()
    for i in range(len(data)):
        tokens = r["input_ids"][i, :r["lengths"][i]].astype(np.int64).copy()
        m = r["masked_lm_counts"][i]
        tokens[r["masked_lm_positions"][i, :m]] = r["masked_lm_ids"][i, :m]
        line = "".join(id_to_token[t] for t in tokens[1:-1])
        starts = np.cumsum([1] + [len(w) for w in words[line]])  # piece positions where a jieba word starts
        for left, right in {tuple(b) for b in r["masked_lm_boundaries"][i, :m].tolist()}:
            assert left + 1 in starts and right in starts, (line, left, right)
            k = list(starts).index(left + 1)
            assert starts[k + 1] == right  # one word exactly
            seen[len(words[line][k])] += 1
    assert seen[4] > 0 and seen[2] > 0  # 北京大学, 自然语言 and two-character words, each whole


def test_span_boundary_loss_by_hand():
    """One span of two pieces at positions 2, 3 of a 5-piece sequence, hidden size 2, vocabulary 3:
    h0 = [x1; x4; p_k], two GeLU + LayerNorm layers, logits y E^T + b, cross-entropy averaged."""
    config = BertConfig(vocab_size=3, hidden_size=2, num_attention_heads=1, num_hidden_layers=1, intermediate_size=4,
                        hidden_act="gelu")
    table = torch.nn.Parameter(torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]))
    head = SpanBoundaryHead(config, table, max_span_pieces=4)
    with torch.no_grad():
        head.position_embeddings.weight.copy_(torch.tensor([[0.5, -0.5], [2.0, -4.0], [0.0, 0.0], [0.0, 0.0]]))
        head.dense1.weight.copy_(torch.tensor([[1.0, 0, 0, 0, 1, 0], [0, 1, 0, -1, 0, 1]]))
        head.dense1.bias.zero_()
        head.dense2.weight.copy_(torch.tensor([[2.0, 0], [0, 1]]))
        head.dense2.bias.copy_(torch.tensor([0.0, 1.0]))
        head.bias.copy_(torch.tensor([0.0, 0.1, -0.1]))
    x = torch.tensor([[[0.0, 0], [1, 2], [9, 9], [9, 9], [3, -1]]])  # x1 = (1, 2), x4 = (3, -1)
    left, right = x[:, [1, 1]], x[:, [4, 4]]
    logits = head(left, right, torch.tensor([[0, 1]]))

    def gelu(v):
        return 0.5 * v * (1 + math.erf(v / math.sqrt(2)))

    def layer_norm(a, b):  # two values: normalised they are -1 and 1 (sign of a - b), eps 1e-12
        return (-1.0, 1.0) if a < b else (1.0, -1.0)

    expected = []
    for p in ((0.5, -0.5), (2.0, -4.0)):  # h0 = [1, 2, 3, -1, p0, p1]; W1 h0 = [1 + p0, 2 + 1 + p1]
        h1 = layer_norm(gelu(1 + p[0]), gelu(2 + 1 + p[1]))
        h2 = layer_norm(gelu(2 * h1[0]), gelu(h1[1] + 1))
        expected.append([h2[0] + 0.0, h2[1] + 0.1, h2[0] + h2[1] - 0.1])
    torch.testing.assert_close(logits[0], torch.tensor(expected), atol=1e-5, rtol=0)
    labels = [0, 2]
    loss = np.mean([-(row[t] - math.log(sum(math.exp(v) for v in row))) for row, t in zip(expected, labels)])
    got = torch.nn.functional.cross_entropy(logits[0], torch.tensor(labels))
    assert got.item() == pytest.approx(loss, abs=1e-5)


def test_span_boundary_objective_reads_the_boundaries():
    """The SBO logits of a masked piece come from its boundaries' outputs: the MLM loss and SBO
    loss are both there, the SBO part changes with the boundaries, and without boundaries the
    model is BertForPreTraining."""
    torch.manual_seed(0)
    config = BertConfig(vocab_size=30, hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
                        max_position_embeddings=16)
    model = BertForSpanBoundaryPreTraining(config).eval()
    batch = {"input_ids": torch.randint(5, 30, (2, 10)), "token_type_ids": torch.zeros(2, 10, dtype=torch.long),
             "attention_mask": torch.ones(2, 10, dtype=torch.long),
             "masked_lm_positions": torch.tensor([[3, 4, 0], [6, 0, 0]]), "masked_lm_ids": torch.tensor([[7, 8, 0], [9, 0, 0]]),
             "masked_lm_weights": torch.tensor([[1.0, 1, 0], [1, 0, 0]]),
             "masked_lm_boundaries": torch.tensor([[[2, 5], [2, 5], [0, 0]], [[5, 7], [0, 0], [0, 0]]]),
             "next_sentence_labels": torch.zeros(2, dtype=torch.long)}
    loss, parts = pretraining_loss(model, batch, nsp=False, span_boundary=True)
    assert loss.item() == pytest.approx((parts["mlm_loss"] + parts["sbo_loss"]).item())
    plain, plain_parts = pretraining_loss(model, batch, nsp=False)
    assert plain_parts["mlm_loss"].item() == pytest.approx(parts["mlm_loss"].item(), abs=1e-6)
    moved = dict(batch, masked_lm_boundaries=torch.tensor([[[1, 6], [1, 6], [0, 0]], [[4, 8], [0, 0], [0, 0]]]))
    _, moved_parts = pretraining_loss(model, moved, nsp=False, span_boundary=True)
    assert abs(moved_parts["sbo_loss"] - parts["sbo_loss"]) > 1e-4


def test_pretrain_with_span_boundary_trains_and_exports_plain_bert(tmp_path, bert_vocab_path):
    from bertlab.interop.load import load_model
    from bertlab.pretraining.job import pretrain_job
    data, text = tmp_path / "data", tmp_path / "few.txt"
    with open(SUMMARIES, encoding="utf-8") as f:
        text.write_text("\n".join(f.read().splitlines()[:300]) + "\n", encoding="utf-8")
    assert main(["create-pretraining-data", str(text), "--vocab", bert_vocab_path, "-o", str(data), "--masking", "span",
                 "--mode", "full-sentences", "--max-seq-length", "32", "--max-predictions-per-seq", "6",
                 "--dupe-factor", "1", "--workers", "1", "--quiet"]) == 0
    config = tmp_path / "config.json"
    BertConfig(vocab_size=30522, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
               max_position_embeddings=32).to_json_file(config)
    common = dict(config=str(config), batch_size=4, max_steps=3, warmup=1, eval_every=3, save_every=3,
                  device="cpu", progress=False)
    summary = pretrain_job(str(data), str(tmp_path / "run"), span_boundary=True, eval_data=str(data),
                           eval_instances=8, **common)
    assert summary["steps"] == 3 and summary["last_train"]["sbo_loss"] > 0 and summary["held_out"]["mlm_accuracy"] >= 0
    loaded = load_model(str(tmp_path / "run" / "model"))  # strict: no SBO tensors left over
    assert type(loaded.model).__name__ == "BertForPreTraining"
    plain = tmp_path / "plain"
    assert main(["create-pretraining-data", str(text), "--vocab", bert_vocab_path, "-o", str(plain),
                 "--max-seq-length", "32", "--dupe-factor", "1", "--workers", "1", "--quiet"]) == 0
    with pytest.raises(ValueError, match="holds no span boundaries"):
        pretrain_job(str(plain), str(tmp_path / "run2"), span_boundary=True, **common)
