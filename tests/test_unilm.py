"""UniLM: the three self-attention masks, BertModel under a full mask, decoding with the shared
greedy and beam search against full recomputation, the objectives on the engine, and the bad input
of pair files."""
import pytest
import torch

from bertlab.core import causal_mask, left_to_right_mask, padding_mask, seq2seq_mask
from bertlab.inference.translate import beam_search, greedy_decode
from bertlab.models import BertConfig, BertForPreTraining
from bertlab.models.accelerate import accelerate
from bertlab.models.unilm import UniLMSeq2Seq

PAD, CLS, SEP, MASK = 0, 1, 2, 3


def tiny_config(**kw):
    return BertConfig(**{"vocab_size": 40, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
                         "intermediate_size": 64, "max_position_embeddings": 40, "hidden_dropout_prob": 0.0,
                         "attention_probs_dropout_prob": 0.0, **kw})


# ---- the three masks ---------------------------------------------------------------------------

def test_seq2seq_mask_is_bidirectional_on_the_source_and_causal_on_the_target():
    types = torch.tensor([[0, 0, 0, 1, 1, 1, 1]])  # [CLS] s [SEP] | t t t [SEP]
    m = seq2seq_mask(types)[0, 0]
    S, T = 3, 4
    assert torch.equal(m[:S, :S], torch.ones(S, S, dtype=torch.bool))      # source: bidirectional
    assert not m[:S, S:].any()                                               # source never sees the target
    assert torch.equal(m[S:, :S], torch.ones(T, S, dtype=torch.bool))      # target sees the whole source
    assert torch.equal(m[S:, S:], causal_mask(T))                            # target: causal
    expected = torch.tensor([[1, 1, 1, 0, 0, 0, 0]] * 3 + [[1, 1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 1, 0, 0],
                                                           [1, 1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1, 1]]).bool()
    assert torch.equal(m, expected)


def test_masks_hide_padding_keys_from_every_query():
    types = torch.tensor([[0, 0, 1, 1, 0], [0, 0, 0, 1, 1]])
    attn = torch.tensor([[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]])
    m = seq2seq_mask(types, attn)
    assert m.shape == (2, 1, 5, 5) and not m[0, 0, :, 4].any()
    assert torch.equal(m[1, 0], seq2seq_mask(types[1:])[0, 0])
    lr = left_to_right_mask(attn)
    assert torch.equal(lr[1, 0], causal_mask(5)) and not lr[0, 0, :, 4].any()
    assert torch.equal(lr[0, 0, :, :4], causal_mask(5)[:, :4])
    # bidirectional is the padding mask: every query sees every real key
    assert torch.equal(padding_mask(attn).expand(2, 1, 5, 5)[0, 0], attn[0].bool().expand(5, 5))


def test_a_target_free_sequence_under_seq2seq_is_bidirectional_and_all_target_is_left_to_right():
    attn = torch.ones(1, 6, dtype=torch.long)
    assert seq2seq_mask(torch.zeros(1, 6, dtype=torch.long)).all()
    assert torch.equal(seq2seq_mask(torch.ones(1, 6, dtype=torch.long)), left_to_right_mask(attn))


# ---- BertModel under a full mask ---------------------------------------------------------------

def test_bert_with_a_full_padding_mask_equals_its_padding_mask_path():
    torch.manual_seed(0)
    model = accelerate(BertForPreTraining(tiny_config())).eval()
    ids = torch.randint(4, 40, (3, 9))
    attn = torch.ones(3, 9, dtype=torch.long)
    attn[0, 6:], attn[2, 4:] = 0, 0
    full = padding_mask(attn).expand(3, 1, 9, 9)
    with torch.no_grad():
        a = model.bert(ids, None, attn).sequence_output  # the packed fast path
        b = model.bert(ids, None, full).sequence_output  # the plain path with the same mask, full
    real = attn.bool()
    torch.testing.assert_close(a[real], b[real], rtol=1e-5, atol=1e-5)


def test_masked_positions_under_a_full_mask_equal_forward():
    torch.manual_seed(1)
    model = accelerate(BertForPreTraining(tiny_config())).eval()
    ids, types = torch.randint(4, 40, (2, 8)), torch.tensor([[0] * 4 + [1] * 4, [0] * 5 + [1] * 3])
    mask = seq2seq_mask(types)
    positions = torch.tensor([[1, 5, 7], [0, 6, 7]])
    with torch.no_grad():
        everywhere = model.mlm(model.bert(ids, types, mask).sequence_output)
        at, _ = model(ids, types, mask, positions)
    torch.testing.assert_close(at, everywhere.gather(1, positions[..., None].expand(-1, -1, 40)))
    # and the mask matters: the source's outputs do not depend on the target, the target's do
    changed = ids.clone()
    changed[:, 7] = 4 + (ids[:, 7] - 3) % 36
    with torch.no_grad():
        other = model.bert(changed, types, mask).sequence_output
    torch.testing.assert_close(other[0, :4], model.bert(ids, types, mask).sequence_output[0, :4])
    assert not torch.allclose(other[0, 7], model.bert(ids, types, mask).sequence_output[0, 7])


# ---- decoding with the shared greedy and beam search -------------------------------------------

class FullRecomputation(UniLMSeq2Seq):
    """The slow reference: every step runs BertModel over [CLS] source [SEP] target [MASK] under
    seq2seq_mask, from the token ids (no keys or values kept from anything)."""

    def encode(self, src):
        return src, (src != PAD).long()

    def decode(self, tokens, memory, src_mask, cache=None, last_only=True):
        assert cache is None
        rows = [memory[r][src_mask[r].bool()].tolist() + tokens[r, 1:].tolist() + [MASK] for r in range(len(tokens))]
        n = max(map(len, rows))
        ids = torch.tensor([r + [PAD] * (n - len(r)) for r in rows])
        attn = (torch.arange(n)[None] < torch.tensor([len(r) for r in rows])[:, None]).long()
        types = (torch.arange(n)[None] >= src_mask.sum(1, keepdim=True)).long() * attn
        out = self.model.bert(ids, types, seq2seq_mask(types, attn)).sequence_output
        last = out[torch.arange(len(rows)), attn.sum(1) - 1]
        return self.model.mlm(last[:, None])


def sources():
    g = torch.Generator().manual_seed(3)
    lengths = [5, 3, 7, 4]
    src = torch.full((4, 9), PAD)
    for r, n in enumerate(lengths):
        src[r, :n + 2] = torch.tensor([CLS, *torch.randint(4, 40, (n,), generator=g).tolist(), SEP])
    return src


def decoders(seed=0, sep_bias=0.0):
    """sep_bias: raise [SEP]'s score so that some sentences end early and leave the batch (0.08
    with seed 1: greedy lengths 0, 2, 9 and 1)."""
    torch.manual_seed(seed)
    model = BertForPreTraining(tiny_config()).double().eval()
    with torch.no_grad():
        model.mlm.bias[SEP] += sep_bias
    return (UniLMSeq2Seq(model, CLS, SEP, MASK, max_source_tokens=12),
            FullRecomputation(model, CLS, SEP, MASK, max_source_tokens=12))


def test_the_accelerated_model_decodes_as_the_plain_one():
    unilm, _ = decoders(seed=1, sep_bias=0.08)
    src = sources()
    plain_greedy = greedy_decode(unilm, src, max_len_a=0, max_len_b=9)
    tokens = lambda out: [[h.tokens for h in hyps] for hyps in out]  # noqa: E731
    plain_beam = beam_search(unilm, src, beam_size=3, nbest=3, max_len_a=0, max_len_b=6)
    accelerate(unilm.model)
    assert greedy_decode(unilm, src, max_len_a=0, max_len_b=9) == plain_greedy
    fast_beam = beam_search(unilm, src, beam_size=3, nbest=3, max_len_a=0, max_len_b=6)
    assert tokens(fast_beam) == tokens(plain_beam)
    for hyps, ref in zip(fast_beam, plain_beam):
        assert [h.score for h in hyps] == pytest.approx([h.score for h in ref], abs=1e-9)


def test_greedy_decoding_with_the_cache_equals_full_recomputation():
    fast, slow = decoders(seed=1, sep_bias=0.08)
    src = sources()
    cached = greedy_decode(fast, src, max_len_a=0, max_len_b=9)
    assert cached == greedy_decode(fast, src, max_len_a=0, max_len_b=9, use_cache=False)
    assert cached == greedy_decode(slow, src, max_len_a=0, max_len_b=9, use_cache=False)
    assert sorted(map(len, cached)) == [0, 1, 2, 9]  # ended early, and at the limit


def test_beam_search_with_the_cache_equals_full_recomputation():
    fast, slow = decoders(seed=1, sep_bias=0.08)
    src = sources()
    kw = dict(beam_size=3, nbest=3, max_len_a=0, max_len_b=8)
    cached = beam_search(fast, src, **kw)
    assert {len(h.tokens) for hyps in cached for h in hyps} >= {0, 1, 2, 8}
    for reference in (beam_search(fast, src, **kw, use_cache=False), beam_search(slow, src, **kw, use_cache=False)):
        assert [[h.tokens for h in hyps] for hyps in cached] == [[h.tokens for h in hyps] for hyps in reference]
        for hyps, ref in zip(cached, reference):
            assert [h.score for h in hyps] == pytest.approx([h.score for h in ref], abs=1e-9)


def test_a_source_decodes_the_same_alone_and_in_a_batch():
    fast, _ = decoders(seed=2)
    src = sources()
    batch = greedy_decode(fast, src, max_len_a=0, max_len_b=6)
    alone = [greedy_decode(fast, src[r:r + 1, :int((src[r] != PAD).sum())], max_len_a=0, max_len_b=6)[0]
             for r in range(len(src))]
    assert batch == alone


def test_the_target_gets_the_positions_the_source_leaves():
    model = BertForPreTraining(tiny_config())
    assert UniLMSeq2Seq(model, CLS, SEP, MASK, 30).config.max_position_embeddings == 10
    with pytest.raises(ValueError, match="max_source_tokens 39"):
        UniLMSeq2Seq(model, CLS, SEP, MASK, 39)


# ---- fine-tuning on the engine -----------------------------------------------------------------

WORDS = [f"w{i}" for i in range(20)]


def vocab_folder(folder):
    """A BERT tokenizer folder of 25 tokens (config.json sized to it) for from-scratch runs."""
    folder.mkdir()
    (folder / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]) + "\n")
    tiny_config(vocab_size=25).to_json_file(folder / "config.json")
    return str(folder)


def pair_files(folder, n, seed):
    """A toy synopsis task: the target is the source's first two words."""
    g = torch.Generator().manual_seed(seed)
    sources = [" ".join(WORDS[i] for i in torch.randint(0, 20, (int(torch.randint(3, 8, (1,), generator=g)),),
                                                        generator=g).tolist()) for _ in range(n)]
    (folder / "src.txt").write_text("".join(s + "\n" for s in sources))
    (folder / "tgt.txt").write_text("".join(" ".join(s.split()[:2]) + "\n" for s in sources))
    return str(folder / "src.txt"), str(folder / "tgt.txt")


def train(tmp_path, out, **kw):
    from bertlab.unilm.job import unilm_train_job
    data = tmp_path / "data"
    if not data.exists():
        data.mkdir()
        (data / "valid").mkdir()
        vocab_folder(data / "vocab")
    train_files, valid_files = pair_files(data, 64, 0), pair_files(data / "valid", 8, 1)
    sizes = {k: v for k, v in tiny_config().to_dict(hf=False).items() if k != "vocab_size"}
    return unilm_train_job(*train_files, *valid_files, str(tmp_path / out), vocab=str(data / "vocab"), model=sizes,
                           **{"batch_size": 8, "lr": 5e-3, "warmup": 0, "max_steps": 30, "eval_every": 30,
                              "max_source_tokens": 10, "max_target_tokens": 4, "rouge_sentences": 8,
                              "progress": False, "device": "cpu", **kw})


def test_fine_tuning_trains_through_fit_and_resumes_exactly(tmp_path, one_thread):
    import json
    whole = train(tmp_path, "whole")
    losses = [r["loss"] for r in map(json.loads, open(tmp_path / "whole" / "metrics.jsonl"))
              if r["kind"] == "train"]
    assert len(losses) == 30 and sum(losses[-5:]) / 5 < 0.85 * sum(losses[:5]) / 5
    assert set(whole["held_out"]) == {"rouge1", "rouge2", "rougeL"}
    part = train(tmp_path, "part", max_minutes=0)
    assert part["stopped_by_time"] and part["steps"] == 1
    resumed = train(tmp_path, "part", resume=True)
    assert resumed["resumed_from_step"] == 1 and resumed["held_out"] == whole["held_out"]
    for p, q in zip(whole["model"].parameters(), resumed["model"].parameters()):
        assert torch.equal(p, q)
    # the delivered folder loads through the one entry point and decodes
    from bertlab.interop.load import load_model
    loaded = load_model(tmp_path / "whole" / "model")
    assert loaded.kind == "unilm" and loaded.model.max_source_tokens == 10
    from bertlab.inference.unilm import generate_texts
    texts, cut = generate_texts(loaded.model, loaded.tokenizer, ["w1 w2 w3", "w4 " * 20])
    assert len(texts) == 2 and cut == [1]


# ---- pretraining under the three masks ---------------------------------------------------------

def test_unilm_pretraining_trains_under_the_three_masks_and_resumes(tmp_path, one_thread):
    import json

    from bertlab.pretraining.job import pretrain_job
    from pretraining_data import TINY, make_folders
    train_dir, _, tokenizer = make_folders(tmp_path / "shards", max_seq_length=32, masked=4)
    config = tmp_path / "tiny.json"
    BertConfig(**{**TINY, "vocab_size": len(tokenizer.vocab), "hidden_dropout_prob": 0.0,
                  "attention_probs_dropout_prob": 0.0}).to_json_file(config)
    kw = dict(config=str(config), batch_size=16, lr=2e-3, warmup=2, max_steps=24, eval_every=100, save_every=100,
              seed=1, progress=False, device="cpu", objective="unilm")
    whole = pretrain_job(train_dir, str(tmp_path / "whole"), **kw)
    losses = [r["mlm_loss"] for r in map(json.loads, open(tmp_path / "whole" / "metrics.jsonl")) if r["kind"] == "train"]
    assert sum(losses[-4:]) / 4 < sum(losses[:4]) / 4 - 0.4  # down from ln(vocab) = 7.37
    assert all(n >= 3 for n in whole["micro_batches_per_mask"].values())
    assert sum(whole["micro_batches_per_mask"].values()) == 24
    part = pretrain_job(train_dir, str(tmp_path / "part"), **{**kw, "max_minutes": 0})
    assert part["steps"] == 1
    resumed = pretrain_job(train_dir, str(tmp_path / "part"), **{**kw, "resume": True})
    assert resumed["micro_batches_per_mask"] == whole["micro_batches_per_mask"]
    for p, q in zip(whole["model"].parameters(), resumed["model"].parameters()):
        assert torch.equal(p, q)


# ---- bad input and the data set ----------------------------------------------------------------

def test_bad_pair_files_are_errors_naming_the_file_and_line(tmp_path, capsys):
    from bertlab.cli import main
    (tmp_path / "a.src").write_text("one two\n\nfive six\n")
    (tmp_path / "a.tgt").write_text("one\nthree\nfive\n")
    (tmp_path / "b.src").write_text("one two\nthree four\n")
    (tmp_path / "b.tgt").write_text("one\n")
    (tmp_path / "c.tgt").write_text("one\n  \n")
    cases = [("a.src", "a.tgt", f"{tmp_path / 'a.src'}:2: blank source"),
             ("b.src", "b.tgt", f"{tmp_path / 'b.tgt'}:2: missing"),
             ("b.src", "c.tgt", f"{tmp_path / 'c.tgt'}:2: blank target")]
    for src, tgt, message in cases:
        code = main(["unilm-train", "--train-src", str(tmp_path / src), "--train-tgt", str(tmp_path / tgt),
                     "-o", str(tmp_path / "run"), "--overwrite", "--device", "cpu", "--quiet"])
        err = capsys.readouterr().err
        assert code == 2 and "bertlab unilm-train: error: " + message in err, err


LISTS = {"x_main_i18n_Translation-en": """Package: alpha
Description-md5: 1
Description-en: fast frobnicator for widgets
 Alpha frobnicates widgets quickly. It supports many widget kinds
 and runs anywhere.
 .
 This is the second paragraph.

Package: alpha-data
Description-md5: 2
Description-en: fast frobnicator for widgets (data)
 Alpha frobnicates widgets quickly. It supports many widget kinds
 and runs anywhere.

Package: beta
Description-md5: 3
Description-en: x
 Beta is a tool with a one-word synopsis, which is dropped for it.
""", "x_main_binary-amd64_Packages": """Package: alpha
Description-md5: 1
Section: utils

Package: alpha-data
Source: alpha
Description-md5: 2
Section: utils
"""}


def test_debian_synopses_pairs_each_long_description_with_its_synopsis(tmp_path):
    from bertlab.data.debian_synopses import build_debian_synopses, lead_sentence
    lists = tmp_path / "lists"
    lists.mkdir()
    for name, text in LISTS.items():
        (lists / name).write_text(text)
    stats = build_debian_synopses(tmp_path / "out", str(lists), heldout_share=0.0, max_words=13)
    assert stats["rows"] == {"train": 1, "valid": 0, "test": 0}
    assert stats["dropped"] == {"repeated description or synopsis": 1, "description or synopsis too short": 1}
    assert (tmp_path / "out" / "train.desc").read_text() == \
        "Alpha frobnicates widgets quickly. It supports many widget kinds and runs anywhere. This\n"
    assert (tmp_path / "out" / "train.syn").read_text() == "fast frobnicator for widgets\n"
    assert lead_sentence("Alpha frobnicates widgets quickly. It supports many.", 3) == "Alpha frobnicates widgets"
    with pytest.raises(ValueError, match="no Translation-en list"):
        build_debian_synopses(tmp_path / "x", str(tmp_path))
