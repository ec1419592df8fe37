"""google-research/bert's TensorFlow checkpoints read without TensorFlow (interop/tf_checkpoint.py,
google_bert.py, convert.py), against golden checkpoints that real TensorFlow wrote with google's own
modeling.py, run_classifier.py and optimizer (data/tf_checkpoints/make_golden.py): every tensor
equals what TensorFlow read back, and the loaded model computes what google's model computed in
TensorFlow and what HF transformers computes on the converted folder."""
import os
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from bertlab.interop import load_model, load_pretrained, resolve
from bertlab.interop.google_bert import hf_name, read_google_checkpoint
from bertlab.interop.tf_checkpoint import TFCheckpoint, crc32c
from bertlab.models import BertForPreTraining
from cli_cases import assert_error, assert_ok, run_cli, write

GOLDEN = Path(__file__).resolve().parent.parent / "data" / "tf_checkpoints"
PRETRAINED = GOLDEN / "uncased_L-2_H-16_A-4"
SHARDED = GOLDEN / "uncased_L-2_H-16_A-4_sharded"
CLASSIFIER = GOLDEN / "run_classifier_output"
CHECKPOINTS = {"pretraining": PRETRAINED / "bert_model.ckpt", "sharded": SHARDED / "bert_model.ckpt",
               "classifier": CLASSIFIER / "model.ckpt-2"}
OPTIMIZER_STATE = ("/adam_m", "/adam_v", "global_step")


def golden(name) -> dict:
    with np.load(GOLDEN / f"tensors_{name}.npz") as f:
        return {key: f[key] for key in f.files}


@pytest.fixture(scope="module")
def outputs():
    with np.load(GOLDEN / "outputs.npz") as f:
        out = {key: f[key] for key in f.files}
    for key in ("input_ids", "input_mask", "segment_ids"):
        out[key] = torch.from_numpy(out[key]).long()
    return out


def bitwise_crc32c(data: bytes) -> int:
    register = 0xFFFFFFFF
    for byte in data:
        register ^= byte
        for _ in range(8):
            register = (register >> 1) ^ (0x82F63B78 if register & 1 else 0)
    return register ^ 0xFFFFFFFF


# --- the reader ------------------------------------------------------------------------------------
def test_crc32c_is_the_castagnoli_crc():
    assert crc32c(b"123456789") == 0xE3069283  # the standard check value
    rng = np.random.default_rng(0)
    for n in (0, 1, 255, 256, 257, 3000, 70_001):  # the byte loop alone, and lanes with a tail
        data = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
        assert crc32c(data) == bitwise_crc32c(data), n


def test_crc32c_of_long_inputs_chains_its_lanes():
    """Above 4 MiB the lanes are longer; a register chained wrongly would change the result."""
    rng = np.random.default_rng(1)
    head, tail = rng.integers(0, 256, 1 << 22, dtype=np.uint8).tobytes(), b"tail bytes"
    expected = crc32c(head)  # the 4096-byte lanes of the long input must give the 256-byte lanes' result
    register = expected ^ 0xFFFFFFFF
    for byte in tail:
        register ^= byte
        for _ in range(8):
            register = (register >> 1) ^ (0x82F63B78 if register & 1 else 0)
    assert crc32c(head + tail) == register ^ 0xFFFFFFFF
    assert crc32c(head[:300_001]) == bitwise_crc32c(head[:300_001])


@pytest.mark.parametrize("which", ["pretraining", "classifier"])
def test_every_tensor_equals_what_tensorflow_read(which):
    checkpoint, expected = TFCheckpoint(CHECKPOINTS[which]), golden(which)
    assert checkpoint.names() == sorted(expected)
    for name, want in expected.items():
        got = checkpoint.tensor(name).numpy()
        assert got.dtype == want.dtype and got.shape == want.shape, name
        assert got.tobytes() == want.tobytes(), name


def test_a_checkpoint_in_two_data_shards():
    checkpoint, expected = TFCheckpoint(CHECKPOINTS["sharded"]), golden("pretraining")
    assert checkpoint.num_shards == 2
    assert {e.shard for e in checkpoint.entries.values()} == {0, 1}
    assert set(checkpoint.names()) == {n for n in expected if not n.endswith(OPTIMIZER_STATE)}
    for name in checkpoint.names():
        assert checkpoint.tensor(name).numpy().tobytes() == expected[name].tobytes(), name


def _copy(folder, tmp_path) -> Path:
    copy = tmp_path / folder.name
    shutil.copytree(folder, copy)
    return copy


def _truncate(path, keep):
    with open(path, "r+b") as f:
        f.truncate(keep)


@pytest.mark.parametrize("cut", [10, 2000, -1])
def test_a_truncated_index_is_an_error_naming_it(tmp_path, cut):
    index = _copy(PRETRAINED, tmp_path) / "bert_model.ckpt.index"
    _truncate(index, cut if cut > 0 else os.path.getsize(index) - 1)
    with pytest.raises(ValueError, match=f"{index}: not a TensorFlow checkpoint index.*truncated"):
        TFCheckpoint(index.with_suffix(""))


def test_a_truncated_data_file_is_an_error_naming_it(tmp_path):
    data = _copy(PRETRAINED, tmp_path) / "bert_model.ckpt.data-00000-of-00001"
    _truncate(data, os.path.getsize(data) - 100)
    with pytest.raises(ValueError, match=f"{data}: .* bytes, but tensor .* the file is truncated"):
        TFCheckpoint(data.parent / "bert_model.ckpt")


def test_a_missing_shard_is_an_error_naming_it(tmp_path):
    data = _copy(SHARDED, tmp_path) / "bert_model.ckpt.data-00001-of-00002"
    data.unlink()
    with pytest.raises(FileNotFoundError, match=f"{data}: no such file"):
        TFCheckpoint(data.parent / "bert_model.ckpt")


def test_corrupt_bytes_fail_their_checksum(tmp_path):
    folder = _copy(PRETRAINED, tmp_path)
    checkpoint = TFCheckpoint(folder / "bert_model.ckpt")
    entry = checkpoint.entries["bert/pooler/dense/kernel"]
    data = folder / "bert_model.ckpt.data-00000-of-00001"
    with open(data, "r+b") as f:
        f.seek(entry.offset + 5)
        byte = f.read(1)
        f.seek(entry.offset + 5)
        f.write(bytes([byte[0] ^ 0x40]))
    with pytest.raises(ValueError, match=f"{data}: the bytes of tensor bert/pooler/dense/kernel do not match"):
        checkpoint.tensor("bert/pooler/dense/kernel")
    index = folder / "bert_model.ckpt.index"
    raw = bytearray(index.read_bytes())
    raw[20] ^= 0x01  # inside the first data block of the table
    index.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match=f"{index}: .*(checksum|corrupt)"):
        TFCheckpoint(folder / "bert_model.ckpt")


def test_not_a_checkpoint_and_unknown_dtypes_are_named(tmp_path):
    fake = write(tmp_path / "x.index", b"not a table" * 10)
    with pytest.raises(ValueError, match="x.index: not a TensorFlow checkpoint index"):
        TFCheckpoint(tmp_path / "x")
    with pytest.raises(FileNotFoundError, match="nowhere.index: no such file"):
        TFCheckpoint(tmp_path / "nowhere")
    checkpoint = TFCheckpoint(CHECKPOINTS["pretraining"])
    name = "bert/pooler/dense/bias"
    checkpoint.entries[name] = replace(checkpoint.entries[name], dtype=7)
    with pytest.raises(ValueError, match=f"tensor {name} has TensorFlow dtype string"):
        checkpoint.tensor(name)
    assert os.path.exists(fake)


# --- google's names ----------------------------------------------------------------------------------
def test_google_names_map_to_hf_names():
    assert hf_name("bert/encoder/layer_1/attention/self/query/kernel") == (
        "bert.encoder.layer.1.attention.self.query.weight", True)
    assert hf_name("bert/encoder/layer_11/output/LayerNorm/gamma") == ("bert.encoder.layer.11.output.LayerNorm.weight",
                                                                      False)
    assert hf_name("bert/embeddings/LayerNorm/beta") == ("bert.embeddings.LayerNorm.bias", False)
    assert hf_name("cls/predictions/output_bias") == ("cls.predictions.bias", False)
    assert hf_name("cls/seq_relationship/output_weights") == ("cls.seq_relationship.weight", False)
    assert hf_name("output_weights") == ("classifier.weight", False)
    assert hf_name("bert/encoder/layer_0/output/LayerNorm/kernel") is None
    assert hf_name("bert/encoder/layer_0/output/dense/gamma") is None


def test_optimizer_state_is_skipped_and_kernels_transposed():
    expected = golden("pretraining")
    state = read_google_checkpoint(CHECKPOINTS["pretraining"])
    weights = [n for n in expected if not n.endswith(OPTIMIZER_STATE)]
    assert len(weights) < len(expected) and len(state) == len(weights) == 46
    assert not [n for n in state if "adam" in n or "step" in n]
    assert np.array_equal(state["bert.pooler.dense.weight"].numpy(), expected["bert/pooler/dense/kernel"].T)
    assert np.array_equal(state["cls.seq_relationship.weight"].numpy(), expected["cls/seq_relationship/output_weights"])
    assert state["bert.encoder.layer.1.intermediate.dense.weight"].shape == (37, 16)


def test_an_unknown_variable_is_an_error_naming_it(monkeypatch):
    names = TFCheckpoint.names
    monkeypatch.setattr(TFCheckpoint, "names", lambda self: names(self) + ["cls/squad/output_weights"])
    with pytest.raises(ValueError, match="neither BERT weights nor optimizer state: cls/squad/output_weights"):
        read_google_checkpoint(CHECKPOINTS["pretraining"])


# --- the models -------------------------------------------------------------------------------------
@torch.inference_mode()
def test_the_pretraining_model_computes_what_google_computed_in_tensorflow(outputs):
    loaded = load_model(PRETRAINED)
    assert loaded.kind == "bert" and isinstance(loaded.model, BertForPreTraining)
    assert not loaded.extra["report"].unused
    ids, types, mask = outputs["input_ids"], outputs["segment_ids"], outputs["input_mask"]
    mlm, nsp = loaded.model(ids, types, mask)[:2]
    real = mask.bool()
    torch.testing.assert_close(torch.log_softmax(mlm, -1)[real], torch.from_numpy(outputs["mlm_log_probs"])[real],
                               atol=1e-5, rtol=0)
    torch.testing.assert_close(torch.log_softmax(nsp, -1), torch.from_numpy(outputs["nsp_log_probs"]), atol=1e-5, rtol=0)
    encoder = loaded.model.bert(ids, types, mask)
    torch.testing.assert_close(encoder.sequence_output[real], torch.from_numpy(outputs["sequence_output"])[real],
                               atol=1e-5, rtol=0)
    torch.testing.assert_close(encoder.pooled_output, torch.from_numpy(outputs["pooled_output"]), atol=1e-5, rtol=0)


def test_uncased_by_google_naming_and_tokens_as_google_tokenized(outputs):
    loaded = load_pretrained(PRETRAINED)
    tokenizer = loaded.tokenizer
    assert tokenizer.do_lower_case
    for row, pair in enumerate(outputs["sentences"]):
        ids = tokenizer.encode(*str(pair).split(" ||| ")).input_ids
        assert ids == outputs["input_ids"][row][:len(ids)].tolist()
        assert outputs["input_mask"][row].sum() == len(ids)


def test_a_cased_name_is_cased_and_the_vocab_contradiction_noted(tmp_path, capsys):
    cased = tmp_path / "cased_L-2_H-16_A-4"
    shutil.copytree(PRETRAINED, cased)
    loaded = load_pretrained(cased)
    tokenizer = loaded.tokenizer
    assert not tokenizer.do_lower_case
    assert "google's naming" in capsys.readouterr().err  # its vocab has no upper-case tokens
    loaded = load_pretrained(cased, do_lower_case=True)  # google folders record no casing: the caller's word
    tokenizer = loaded.tokenizer
    assert tokenizer.do_lower_case


@torch.inference_mode()
def test_the_sharded_checkpoint_loads_the_same_model():
    loaded = load_pretrained(PRETRAINED, BertForPreTraining)
    one = loaded.model
    loaded = load_pretrained(SHARDED, BertForPreTraining)
    two = loaded.model
    for (name, a), b in zip(one.state_dict().items(), two.state_dict().values()):
        assert torch.equal(a, b), name


@torch.inference_mode()
def test_the_run_classifier_checkpoint_computes_what_tensorflow_computed(outputs):
    loaded = load_model(CLASSIFIER)  # its `checkpoint` file names model.ckpt-2 by an absolute path from elsewhere
    assert type(loaded.model).__name__ == "BertForSequenceClassification" and loaded.model.num_labels == 3
    logits = loaded.model(outputs["input_ids"], outputs["segment_ids"], outputs["input_mask"])
    torch.testing.assert_close(logits, torch.from_numpy(outputs["classifier_logits"]), atol=1e-5, rtol=0)


def test_a_checkpoint_prefix_means_its_folder(tmp_path):
    assert resolve(PRETRAINED / "bert_model.ckpt") == str(PRETRAINED)
    assert resolve(str(CLASSIFIER / "model.ckpt-2.index")) == str(CLASSIFIER)
    folder = _copy(CLASSIFIER, tmp_path)
    for suffix in (".index", ".data-00000-of-00001"):
        shutil.copy(folder / f"model.ckpt-2{suffix}", folder / f"model.ckpt-1{suffix}")
    with pytest.raises(ValueError, match="model.ckpt-1: its folder is read by its checkpoint model.ckpt-2"):
        resolve(folder / "model.ckpt-1")
    (folder / "checkpoint").unlink()
    with pytest.raises(ValueError, match="holds 2 TensorFlow checkpoints"):
        load_pretrained(folder)


# --- bertlab convert and HF transformers ----------------------------------------------------------------
@torch.inference_mode()
def test_convert_gives_a_folder_hf_loads_with_identical_outputs(tmp_path, outputs):
    transformers = pytest.importorskip("transformers")
    out = tmp_path / "hf"
    assert_ok(run_cli("convert", PRETRAINED, "-o", out))
    # .bertlab: the marker of a folder bertlab made (convert --overwrite replaces only in such a folder)
    assert sorted(os.listdir(out)) == [".bertlab", "config.json", "model.safetensors", "tokenizer_config.json",
                                       "vocab.txt"]
    theirs, info = transformers.BertForPreTraining.from_pretrained(out, output_loading_info=True)
    assert not any(info.values()), info
    _, info = transformers.BertModel.from_pretrained(out, output_loading_info=True)
    assert not info["missing_keys"] and not info["mismatched_keys"], info
    assert all(k.startswith("cls.") for k in info["unexpected_keys"])  # the heads, as with HF's own checkpoints
    ours = load_model(PRETRAINED).model
    ids, types, mask = outputs["input_ids"], outputs["segment_ids"], outputs["input_mask"]
    want = theirs.eval()(input_ids=ids, token_type_ids=types, attention_mask=mask)
    got = ours(ids, types, mask)
    real = mask.bool()
    torch.testing.assert_close(got[0][real], want.prediction_logits[real], atol=1e-5, rtol=0)
    torch.testing.assert_close(got[1], want.seq_relationship_logits, atol=1e-5, rtol=0)


@torch.inference_mode()
def test_convert_a_run_classifier_checkpoint_for_predict(tmp_path, outputs):
    transformers = pytest.importorskip("transformers")
    out = tmp_path / "mnli"
    assert_ok(run_cli("convert", CLASSIFIER, "-o", out, "--task", "mnli"))
    theirs, info = transformers.BertForSequenceClassification.from_pretrained(out, output_loading_info=True)
    assert not any(info.values()), info
    assert theirs.config.id2label == {0: "contradiction", 1: "entailment", 2: "neutral"}
    want = theirs.eval()(input_ids=outputs["input_ids"], token_type_ids=outputs["segment_ids"],
                         attention_mask=outputs["input_mask"]).logits
    torch.testing.assert_close(want, torch.from_numpy(outputs["classifier_logits"]), atol=1e-5, rtol=0)
    pairs = [str(p).split(" ||| ") for p in outputs["sentences"]]
    dev = write(tmp_path / "dev.tsv", "sentence1\tsentence2\tgold_label\n" + "".join(
        f"{a}\t{b}\t{label}\n" for (a, b), label in zip(pairs, ["neutral", "entailment", "contradiction"])))
    result = assert_ok(run_cli("predict", "--model", out, dev, "--quiet"))
    assert len(result.out.splitlines()) == 3 and '"accuracy"' in result.err
    assert_error(run_cli("convert", CLASSIFIER, "-o", out, "--task", "mnli"), "already holds a model", "--overwrite")
    assert_error(run_cli("convert", CLASSIFIER, "-o", out, "--task", "mrpc", "--overwrite"), "3 outputs",
                 "mrpc has 2 labels")
    assert_error(run_cli("convert", PRETRAINED, "-o", tmp_path / "x", "--labels", "a,b"), "not a fine-tuned classifier")


def test_convert_one_checkpoint_of_a_folder_with_named_labels_and_casing(tmp_path):
    out = tmp_path / "named"
    assert_ok(run_cli("convert", CLASSIFIER / "model.ckpt-2", "-o", out, "--labels", "no,maybe,yes", "--cased"))
    loaded = load_model(out)
    assert loaded.model.num_labels == 3 and not loaded.tokenizer.do_lower_case
    assert_error(run_cli("convert", tmp_path / "no-such-checkpoint", "-o", tmp_path / "y"), "no-such-checkpoint")
