"""Checkpoints in the HF layout, both ways, and the errors a user meets when the pieces disagree."""
import json
import os
import shutil

import pytest
import torch

from bertlab import BertConfig, BertForPreTraining, BertForSequenceClassification, BertModel, save_pretrained
from bertlab.interop import init_from_state_dict, load_pretrained, load_state_dict_strict, read_state_dict
from bertlab.interop.hf_bert import from_hf_name, to_hf_name

transformers = pytest.importorskip("transformers")
TINY = dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
            max_position_embeddings=64)


def _inputs(vocab_size=99, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, vocab_size, (3, 12), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 7:] = 0
    types = torch.zeros_like(ids)
    types[:, 6:] = 1
    return ids, types, mask


def _write_vocab(folder, n):
    with open(os.path.join(folder, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(n - 5)]) + "\n")


def test_name_table_round_trips():
    model = BertForPreTraining(BertConfig(**TINY))
    for name in model.state_dict():
        key = name[len("bert."):] if name.startswith("bert.") else name
        assert from_hf_name(to_hf_name(key)) == key
    assert to_hf_name("layers.11.attention_sublayer.norm.weight") == "encoder.layer.11.attention.output.LayerNorm.weight"


@pytest.mark.parametrize("ours_cls, hf_name", [(BertModel, "BertModel"), (BertForPreTraining, "BertForPreTraining"),
                                               (BertForSequenceClassification, "BertForSequenceClassification")])
@torch.inference_mode()
def test_save_then_hf_load_gives_identical_outputs(tmp_path, ours_cls, hf_name):
    torch.manual_seed(0)
    ours = ours_cls(BertConfig(**TINY)).eval()
    with torch.no_grad():  # non-zero biases so a dropped bias would show
        for p in ours.parameters():
            p.add_(torch.randn_like(p) * 0.01)
    save_pretrained(ours, tmp_path)
    theirs, info = getattr(transformers, hf_name).from_pretrained(tmp_path, output_loading_info=True)
    assert info["missing_keys"] == set() or not info["missing_keys"], info
    assert not info["unexpected_keys"] and not info["mismatched_keys"], info
    theirs.eval()
    ids, types, mask = _inputs()
    got = ours(ids, types, mask)
    want = theirs(input_ids=ids, token_type_ids=types, attention_mask=mask)
    if ours_cls is BertModel:
        real = mask.bool()
        assert (got.sequence_output - want.last_hidden_state)[real].abs().max() < 1e-6
        assert (got.pooled_output - want.pooler_output).abs().max() < 1e-6
    elif ours_cls is BertForPreTraining:
        assert (got[0] - want.prediction_logits)[mask.bool()].abs().max() < 1e-5
        assert (got[1] - want.seq_relationship_logits).abs().max() < 1e-6
    else:
        assert (got - want.logits).abs().max() < 1e-6


@torch.inference_mode()
def test_random_hf_bert_base_loads_with_identical_outputs(tmp_path):
    torch.manual_seed(0)
    config = transformers.BertConfig()  # BERT-base: L=12 H=768 A=12
    theirs = transformers.BertForPreTraining(config).eval()
    theirs.save_pretrained(tmp_path)
    ours = BertForPreTraining(BertConfig.from_json_file(tmp_path / "config.json"), init_weights=False)
    report = load_state_dict_strict(ours, read_state_dict(tmp_path))
    assert not report.new and not report.unused
    ours.eval()
    ids, types, mask = _inputs(config.vocab_size)
    got = ours(ids, types, mask)
    want = theirs(input_ids=ids, token_type_ids=types, attention_mask=mask)
    assert (got[0] - want.prediction_logits)[mask.bool()].abs().max() < 1e-4  # logits of size ~10
    assert (got[1] - want.seq_relationship_logits).abs().max() < 1e-5
    assert BertConfig.from_json_file(tmp_path / "config.json") == BertConfig()


def test_config_round_trips_bert_config_json_and_hf_config_json(tmp_path):
    config = BertConfig.large(vocab_size=21128)
    assert (config.hidden_size, config.num_hidden_layers, config.num_attention_heads, config.intermediate_size) == \
        (1024, 24, 16, 4096)
    config.to_json_file(tmp_path / "bert_config.json", hf=False)
    google = json.loads((tmp_path / "bert_config.json").read_text())
    assert "layer_norm_eps" not in google and google["vocab_size"] == 21128
    assert BertConfig.from_json_file(tmp_path / "bert_config.json") == config
    config.to_json_file(tmp_path / "config.json")
    assert BertConfig.from_dict(transformers.BertConfig.from_pretrained(tmp_path).to_dict()) == config


def test_partial_initialisation_reports_initialised_new_and_unused(minilm_dir):
    config = BertConfig.from_json_file(os.path.join(minilm_dir, "config.json"))
    smaller = BertForSequenceClassification(BertConfig(**{**config.__dict__, "num_hidden_layers": 2}), num_labels=3)
    report = init_from_state_dict(smaller, read_state_dict(minilm_dir))
    assert "bert.layers.1.attention.query.weight" in report.initialized
    assert set(report.new) == {"classifier.weight", "classifier.bias"}
    assert any(name.startswith("encoder.layer.5.") for name in report.unused)
    assert not any(name.startswith("encoder.layer.1.") for name in report.unused)
    reference = read_state_dict(minilm_dir)["encoder.layer.1.output.dense.weight"]
    torch.testing.assert_close(smaller.bert.layers[1].feed_forward.output.weight, reference)
    assert "new (randomly initialised): 2" in str(report)


def test_load_errors_name_the_problem(tmp_path, minilm_dir):
    model = BertModel(BertConfig(**TINY))
    save_pretrained(model, tmp_path)
    _write_vocab(tmp_path, 99)
    load_pretrained(tmp_path)  # the folder as written loads

    state = read_state_dict(tmp_path)
    del state["encoder.layer.1.intermediate.dense.weight"]
    with pytest.raises(ValueError, match=r"missing tensor layers\.1\.feed_forward\.intermediate\.weight"):
        load_state_dict_strict(BertModel(BertConfig(**TINY)), state, "ckpt")
    state = read_state_dict(tmp_path)
    state["pooler.dense.weight"] = torch.zeros(32, 31)
    with pytest.raises(ValueError, match=r"pooler\.dense\.weight has shape \(32, 31\)"):
        load_state_dict_strict(BertModel(BertConfig(**TINY)), state, "ckpt")

    _write_vocab(tmp_path, 98)
    with pytest.raises(ValueError, match="vocab.txt has 98 tokens but the config says vocab_size=99"):
        load_pretrained(tmp_path)

    with pytest.raises(ValueError, match="trained uncased"):
        load_pretrained(minilm_dir, do_lower_case=False)
    # without tokenizer_config.json, an all-lower-case vocabulary gives the casing away
    copy = tmp_path / "minilm"
    shutil.copytree(minilm_dir, copy, ignore=shutil.ignore_patterns("tokenizer*", "*.safetensors"))
    os.symlink(os.path.join(minilm_dir, "model.safetensors"), copy / "model.safetensors")
    with pytest.raises(ValueError, match="has no upper-case tokens"):
        load_pretrained(copy, do_lower_case=False)
    with pytest.raises(FileNotFoundError, match="no model.safetensors or pytorch_model.bin"):
        read_state_dict(tmp_path / "nowhere")


def test_pytorch_model_bin_and_tf_style_layer_norm_names(tmp_path):
    torch.manual_seed(0)
    model = BertModel(BertConfig(**TINY)).eval()
    save_pretrained(model, tmp_path)
    state = read_state_dict(tmp_path)
    old = {k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta"): v
           for k, v in state.items()}
    os.remove(tmp_path / "model.safetensors")
    torch.save(old, tmp_path / "pytorch_model.bin")
    _write_vocab(tmp_path, 99)
    loaded = load_pretrained(tmp_path)
    loaded, report = loaded.model, loaded.extra["report"]
    assert not report.new
    ids, types, mask = _inputs()
    torch.testing.assert_close(loaded(ids, types, mask).pooled_output, model(ids, types, mask).pooled_output)
