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

from bertlab.interop.tf_checkpoint import TFCheckpoint, crc32c
from cli_cases import write

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
