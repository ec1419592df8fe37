"""ALBERT (Lan et al. 2019) on the shared BERT: outputs equal to HF's AlbertForPreTraining both ways
through the HF folder, the presets' parameter counts, cross-layer sharing, sentence-order data,
pretraining an ALBERT through `bertlab pretrain`, the recipes, and the errors a user meets."""
import json
import os

import numpy as np
import pytest
import torch

from bertlab.cli import main
from bertlab.interop.hf_albert import load_albert, save_albert, to_hf_name
from bertlab.interop.load import load_model
from bertlab.models import (AlbertConfig, AlbertForPreTraining, AlbertModel, BertConfig, BertModel,
                            albert_preset)
from bertlab.models.albert_config import ALBERT_PRESETS
from bertlab.pretraining.create import create_pretraining_data, load_vocab_tokenizer
from bertlab.pretraining.instances import InstanceOptions
from bertlab.pretraining.recipes import data_settings, training_settings
from bertlab.pretraining.shards import PretrainingData

transformers = pytest.importorskip("transformers")
TINY = dict(vocab_size=99, embedding_size=16, hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
            intermediate_size=37, max_position_embeddings=64)


pytestmark = pytest.mark.usefixtures("one_thread")  # conftest's: one torch thread per test


def _inputs(vocab_size=99, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, vocab_size, (3, 12), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 7:] = 0
    types = torch.zeros_like(ids)
    types[:, 6:] = 1
    return ids, types, mask


def _hf_config(config: AlbertConfig):
    d = config.to_dict(hf=True)
    return transformers.AlbertConfig(**{k: v for k, v in d.items() if k not in ("architectures", "model_type")})


def _assert_same_outputs(ours: AlbertForPreTraining, hf, worst=1e-5):
    """MLM logits at every position, SOP logits and every hidden state, at real positions."""
    ids, types, mask = _inputs()
    real = mask.bool()
    with torch.no_grad():
        mlm, sop = ours(ids, types, mask)
        hidden = ours.bert(ids, types, mask, output_hidden_states=True).hidden_states
        theirs = hf(input_ids=ids, token_type_ids=types, attention_mask=mask, output_hidden_states=True)
    assert (mlm - theirs.prediction_logits)[real].abs().max() < worst
    assert (sop - theirs.sop_logits).abs().max() < worst
    assert len(hidden) == len(theirs.hidden_states) == ours.config.num_hidden_layers + 1
    for a, b in zip(hidden, theirs.hidden_states):
        assert (a - b)[real].abs().max() < worst


def test_our_folder_loads_in_hf_with_no_missing_keys_and_equal_outputs(tmp_path):
    torch.manual_seed(0)
    ours = AlbertForPreTraining(AlbertConfig(**TINY)).eval()
    save_albert(ours, tmp_path / "ours")
    hf, info = transformers.AlbertForPreTraining.from_pretrained(tmp_path / "ours", output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"], info
    _assert_same_outputs(ours, hf.eval())
    encoder, info = transformers.AlbertModel.from_pretrained(tmp_path / "ours", output_loading_info=True)
    assert not info["missing_keys"] and not info["mismatched_keys"], info  # heads unused, encoder whole
    save_albert(ours.bert, tmp_path / "bare")
    _, info = transformers.AlbertModel.from_pretrained(tmp_path / "bare", output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"], info


def test_hf_folder_loads_in_ours_with_equal_outputs(tmp_path):
    torch.manual_seed(1)
    hf = transformers.AlbertForPreTraining(_hf_config(AlbertConfig(**TINY))).eval()
    hf.save_pretrained(tmp_path / "hf")
    loaded = load_model(tmp_path / "hf")
    assert loaded.kind == "albert" and type(loaded.model) is AlbertForPreTraining
    assert loaded.tokenizer is None  # HF's ALBERT folders hold a SentencePiece model, not vocab.txt
    assert not loaded.extra["report"].new and not loaded.extra["report"].unused
    _assert_same_outputs(loaded.model, hf)
    loaded = load_albert(tmp_path / "hf", AlbertModel)  # the encoder of a heads checkpoint
    encoder, report = loaded.model, loaded.extra["report"]
    assert "predictions.bias" in report.unused and not report.new
    with torch.no_grad():
        ids, types, mask = _inputs()
        torch.testing.assert_close(encoder(ids, types, mask).pooled_output,
                                   hf.albert(input_ids=ids, token_type_ids=types, attention_mask=mask).pooler_output,
                                   atol=1e-5, rtol=0)


def test_several_groups_of_shared_layers_match_hf(tmp_path):
    """num_hidden_groups 2 over 5 layers: layer i runs group i * 2 // 5, as HF's int(i / (5 / 2))."""
    config = AlbertConfig(**{**TINY, "num_hidden_layers": 5, "num_hidden_groups": 2})
    torch.manual_seed(2)
    hf = transformers.AlbertForPreTraining(_hf_config(config)).eval()
    hf.save_pretrained(tmp_path / "hf")
    loaded = load_albert(tmp_path / "hf")
    model = loaded.model
    assert len(model.bert.layers) == 2
    _assert_same_outputs(model, hf)


def test_name_table_names_every_hf_tensor():
    ours = AlbertForPreTraining(AlbertConfig(**TINY))
    hf = transformers.AlbertForPreTraining(_hf_config(AlbertConfig(**TINY)))
    names = {to_hf_name(k) for k in ours.state_dict() if k != "mlm.embedding_table"}
    tied = {"predictions.decoder.weight", "predictions.decoder.bias"}
    assert names == set(hf.state_dict()) - tied
    assert to_hf_name("bert.layers.0.feed_forward_sublayer.norm.weight") == \
        "albert.encoder.albert_layer_groups.0.albert_layers.0.full_layer_layer_norm.weight"


def test_presets_have_the_papers_parameter_counts(capsys):
    """Table 1 of the paper: base 12M, large 18M, xlarge 60M (vocabulary 30000, E = 128), counted as
    HF counts AlbertModel (embeddings, projection, one shared layer, pooler)."""
    paper = {"albert-base": 12e6, "albert-large": 18e6, "albert-xlarge": 60e6}
    for name, expected in paper.items():
        config = albert_preset(name)
        assert config.vocab_size == 30000 and config.embedding_size == 128
        with torch.device("meta"):
            count = sum(p.numel() for p in AlbertModel(config, init_weights=False).parameters())
            hf_count = sum(p.numel() for p in transformers.AlbertModel(_hf_config(config)).parameters())
        print(f"{name}: {count / 1e6:.2f}M parameters (paper {expected / 1e6:.0f}M)")
        assert count == hf_count
        assert abs(count - expected) / expected < 0.05, (name, count)
    assert set(paper) < set(ALBERT_PRESETS)
    print(capsys.readouterr().out)


def test_one_set_of_layer_weights_shared_by_every_layer():
    small = AlbertModel(AlbertConfig(**{**TINY, "num_hidden_layers": 2}))
    deep = AlbertModel(AlbertConfig(**{**TINY, "num_hidden_layers": 12}))
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert count(small) == count(deep)
    stack = deep.layer_stack()
    assert len(stack) == 12 and all(layer is stack[0] for layer in stack)
    assert all(layer.attention.query.weight is deep.layers[0].attention.query.weight for layer in stack)
    # without sharing (BERT, the same sizes) parameters grow with depth
    bert = {k: v for k, v in TINY.items() if k != "embedding_size"}
    assert count(BertModel(BertConfig(**{**bert, "num_hidden_layers": 12}))) > \
        count(BertModel(BertConfig(**{**bert, "num_hidden_layers": 2})))
    # and a gradient step moves the one set of weights by the sum over the layers that ran it
    ids, types, mask = _inputs()
    deep(ids, types, mask).sequence_output.sum().backward()
    assert deep.layers[0].feed_forward.output.weight.grad.abs().sum() > 0


def test_factorised_embedding_is_e_wide_and_projected():
    model = AlbertForPreTraining(AlbertConfig(**TINY))
    assert model.bert.embeddings.word_embeddings.weight.shape == (99, 16)
    assert model.bert.embedding_projection.weight.shape == (32, 16)
    assert model.mlm.dense.weight.shape == (16, 32) and model.mlm.norm.weight.shape == (16,)
    assert model.mlm.embedding_table is model.bert.embeddings.word_embeddings.weight  # tied, E wide


def test_embedding_larger_than_hidden_is_a_clear_error():
    with pytest.raises(ValueError, match="embedding_size 64 is larger than hidden_size 32"):
        AlbertConfig(**{**TINY, "embedding_size": 64})
    # a plain BertConfig may project a larger E down: ELECTRA's small generators (H 64, E 128) do
    assert BertConfig(hidden_size=32, num_attention_heads=4, embedding_size=64).embedding_size == 64
    with pytest.raises(ValueError, match="inner_group_num 2"):
        AlbertConfig(**{**TINY, "inner_group_num": 2})
    with pytest.raises(ValueError, match="num_hidden_groups 4"):
        AlbertConfig(**{**TINY, "num_hidden_groups": 4})
    assert "embedding_size" not in BertConfig().to_dict() and "num_hidden_groups" not in BertConfig().to_dict()


def test_albert_folder_given_to_bert_only_commands_is_a_clear_error(tmp_path, capsys):
    model = AlbertForPreTraining(AlbertConfig(**TINY))
    save_albert(model, tmp_path / "albert")
    with open(tmp_path / "albert" / "vocab.txt", "w", encoding="utf-8") as f:
        f.write("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(94)]) + "\n")
    train = tmp_path / "train.tsv"
    train.write_text("sentence\tlabel\na b\tx\nc d\ty\n", encoding="utf-8")
    code = main(["finetune", "--task", "classify", "--model", str(tmp_path / "albert"), "--train", str(train),
                 "-o", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 2 and "ALBERT model" in err and "config.json" in err and "Traceback" not in err
    # the folder itself, with its vocab.txt, loads whole through the one entry point
    loaded = load_model(tmp_path / "albert")
    assert loaded.kind == "albert" and len(loaded.tokenizer.vocab) == 99


def test_a_folder_whose_weights_do_not_fit_names_the_tensor(tmp_path):
    model = AlbertForPreTraining(AlbertConfig(**TINY))
    save_albert(model, tmp_path / "m")
    config = json.loads((tmp_path / "m" / "config.json").read_text())
    config["embedding_size"] = 8
    (tmp_path / "m" / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="embeddings.word_embeddings.weight has shape"):
        load_albert(tmp_path / "m")


# -- sentence-order prediction data -----------------------------------------------------------------

def _documents(path, lines=900, per_document=(2, 3, 5, 8)):
    """Real text (the shipped docstring summaries) as documents of a few lines each."""
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(repo, "data", "python-docs", "summaries.txt"), encoding="utf-8") as f:
        text = [line.split(": ", 1)[-1].strip() for _, line in zip(range(lines), f)]
    out, k, n = [], 0, 0
    for line in text:
        out.append(line)
        n += 1
        if n == per_document[k % len(per_document)]:
            out.append("")
            k, n = k + 1, 0
    path.write_text("\n".join(out) + "\n", encoding="utf-8")
    return str(path)


def _find(haystack: list, needle: list) -> list[int]:
    n = len(needle)
    return [i for i in range(len(haystack) - n + 1) if haystack[i:i + n] == needle]


def test_sentence_order_pairs_are_consecutive_text_swapped_half_the_time(bert_vocab_path, tmp_path):
    """Every SOP instance is [CLS] A [SEP] B [SEP] of one document's consecutive text, B before A
    exactly when the label is 1, and the labels are balanced. Unmasked (dynamic masking) instances
    so the pieces can be found in the documents; google's chunking and trimming otherwise."""
    corpus = _documents(tmp_path / "docs.txt")
    tokenizer = load_vocab_tokenizer(bert_vocab_path)
    options = InstanceOptions(max_seq_length=48, dupe_factor=3, mode="sop", dynamic_masking=True)
    counts = create_pretraining_data([corpus], str(tmp_path / "sop"), tokenizer, options, progress_bar=False)
    data = PretrainingData(str(tmp_path / "sop"))
    assert data.meta["nsp"] and data.meta["settings"]["mode"] == "sop"
    documents = []
    for block in open(corpus, encoding="utf-8").read().split("\n\n"):
        pieces = tokenizer.tokenize_ids_batch([s for s in block.split("\n") if s], add_special_tokens=False)
        documents.append([t for s in pieces for t in s])
    r = data.rows(np.arange(len(data)))
    labels = r["next_sentence_labels"]
    assert len(labels) > 500 and abs(labels.mean() - 0.5) < 0.04 and counts["random_next"] == labels.sum()
    exact = 0
    for i in range(len(data)):
        k = int(r["lengths"][i])
        a_len = int((r["segment_ids"][i, :k] == 0).sum())  # [CLS] A [SEP]
        ids = r["input_ids"][i, :k].tolist()
        a, b = ids[1:a_len - 1], ids[a_len:k - 1]
        first, second = (b, a) if labels[i] else (a, b)
        # some document holds `first` and then `second` after it (trimming may drop pieces between)
        found = [(d, p, q) for d, doc in enumerate(documents) for p in _find(doc, first) for q in _find(doc, second)
                 if p + len(first) <= q]
        assert found, f"instance {i}: its segments are not consecutive text of one document"
        if len(ids) < options.max_seq_length - 1:  # not trimmed: B starts right where A ends
            assert any(q == p + len(first) for _, p, q in found), f"instance {i}"
            exact += 1
    assert exact > 100


def test_sop_and_recipes_on_the_command_line(bert_vocab_path, tmp_path, capsys):
    corpus = _documents(tmp_path / "docs.txt", lines=200)
    base = ["create-pretraining-data", corpus, "--vocab", bert_vocab_path, "--workers", "1", "--quiet",
            "--dupe-factor", "1"]
    assert main([*base, "-o", str(tmp_path / "a"), "--sop"]) == 0
    assert "swapped pairs (sentence order)" in capsys.readouterr().out
    assert main([*base, "-o", str(tmp_path / "b"), "--recipe", "albert"]) == 0
    assert PretrainingData(str(tmp_path / "b")).meta["settings"]["mode"] == "sop"
    assert main([*base, "-o", str(tmp_path / "c"), "--recipe", "roberta"]) == 0
    meta = PretrainingData(str(tmp_path / "c")).meta
    assert meta["settings"]["mode"] == "full-sentences" and meta["dynamic_masking"] and not meta["nsp"]
    capsys.readouterr()
    assert main([*base, "-o", str(tmp_path / "d"), "--recipe", "roberta", "--mode", "nsp"]) == 2
    assert "--recipe roberta makes --mode full-sentences data, not --mode nsp" in capsys.readouterr().err
    assert data_settings(None, None, False) == {"mode": "nsp", "dynamic_masking": False, "masked_lm_prob": 0.15,
                                                "max_predictions_per_seq": 20}
    with pytest.raises(ValueError, match="was made with --mode sop"):
        training_settings("roberta", meta={"nsp": True, "settings": {"mode": "sop"}}, data="x")
    assert training_settings("albert", {"settings": {"mode": "sop"}}, "x") == \
        {"preset": "albert-base", "optimizer": "lamb", "phase2_rope_theta": None}
    assert training_settings("albert", {"settings": {"mode": "sop"}}, "x", model_given=True)["preset"] is None


# -- pretraining an ALBERT through `bertlab pretrain` -------------------------------------------------

def test_pretrain_an_albert_on_sop_data_and_hf_loads_the_export(bert_vocab_path, tmp_path, capsys):
    corpus = _documents(tmp_path / "docs.txt", lines=300)
    shards = tmp_path / "sop"
    assert main(["create-pretraining-data", corpus, "--vocab", bert_vocab_path, "-o", str(shards), "--quiet",
                 "--recipe", "albert", "--max-seq-length", "32", "--max-predictions-per-seq", "5",
                 "--dupe-factor", "1", "--workers", "1"]) == 0
    config = AlbertConfig(**{**TINY, "vocab_size": 30522, "embedding_size": 8})
    (tmp_path / "albert.json").write_text(json.dumps(config.to_dict()))
    out = tmp_path / "run"
    assert main(["pretrain", "--data", str(shards), "--config", str(tmp_path / "albert.json"), "--recipe", "albert",
                 "-o", str(out), "--max-steps", "3", "--batch-size", "4", "--quiet"]) == 0
    capsys.readouterr()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["steps"] == 3 and summary["pair_task"] == "sop"
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert all("nsp_loss" in r for r in records if r["kind"] == "train")  # the SOP head's loss
    hf, info = transformers.AlbertForPreTraining.from_pretrained(out / "model", output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    loaded = load_model(out / "model")
    assert type(loaded.model) is AlbertForPreTraining and len(loaded.model.bert.layers) == 1
    _assert_same_outputs(loaded.model, hf.eval())
    # and it continues from its own folder
    assert main(["pretrain", "--data", str(shards), "--init-from", str(out / "model"), "-o", str(tmp_path / "more"),
                 "--max-steps", "1", "--batch-size", "4", "--quiet"]) == 0


def test_recipe_refuses_data_made_for_another(bert_vocab_path, tmp_path, capsys):
    corpus = _documents(tmp_path / "docs.txt", lines=120)
    shards = tmp_path / "nsp"
    assert main(["create-pretraining-data", corpus, "--vocab", bert_vocab_path, "-o", str(shards), "--quiet",
                 "--dupe-factor", "1", "--workers", "1", "--max-seq-length", "32"]) == 0
    capsys.readouterr()
    assert main(["pretrain", "--data", str(shards), "--recipe", "albert", "-o", str(tmp_path / "run"),
                 "--max-steps", "1"]) == 2
    err = capsys.readouterr().err
    assert "--recipe albert" in err and "--mode nsp" in err and "create-pretraining-data --recipe albert" in err
