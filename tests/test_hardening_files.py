"""The one reader for files bertlab did not write (bertlab.io) and the size rule for configs: a
crafted file or flag per rule, each ending in a clear error that names the file and the problem
(never a hang, a traceback, an allocation of gigabytes or a silently wrong model)."""
import gzip
import json
import os
import shutil
import subprocess
import sys
import zipfile

import pytest
import torch

from bertlab import io as bio
from bertlab import validate
from bertlab.models.albert_config import AlbertConfig
from bertlab.models.bert_config import BertConfig
from bertlab.models.gpt_config import GPTConfig
from bertlab.models.transformer_config import TransformerConfig
from cli_cases import assert_error, assert_ok, run_cli, write

pytestmark = pytest.mark.usefixtures("one_thread")

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat"]
TINY = dict(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=64, max_position_embeddings=32)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    from bertlab import BertModel, BertTokenizer, save_pretrained
    folder = str(tmp_path_factory.mktemp("files") / "model")
    torch.manual_seed(0)
    save_pretrained(BertModel(BertConfig(**TINY)).eval(), folder, BertTokenizer({t: i for i, t in enumerate(VOCAB)}))
    return folder


def copy_with(model, tmp_path, name="copy", config=None, files=None):
    folder = str(tmp_path / name)
    shutil.copytree(model, folder)
    if config is not None:
        path = os.path.join(folder, "config.json")
        values = {**json.load(open(path)), **config}
        write(path, json.dumps(values))
    for name, content in (files or {}).items():
        path = os.path.join(folder, name)
        os.remove(path) if os.path.exists(path) else None
        content(path) if callable(content) else write(path, content)
    return folder


def embed(folder, tmp_path, *extra):
    source = write(tmp_path / "in.txt", "the cat sat on the mat\n")
    return run_cli("embed", source, "-o", tmp_path / "out.npy", "--model", folder, *extra)


# ---- regular files only ------------------------------------------------------------------------

def test_open_input_refuses_what_is_not_a_regular_file(tmp_path):
    fifo = str(tmp_path / "pipe")
    os.mkfifo(fifo)
    for path, kind in ((fifo, "named pipe"), ("/dev/zero", "device"), (str(tmp_path), "folder")):
        with pytest.raises(ValueError, match=kind):
            bio.open_input(path)
        with pytest.raises(ValueError, match=kind):
            bio.read_json(path)
    with pytest.raises(FileNotFoundError):
        bio.open_input(tmp_path / "missing")


def test_a_config_that_is_a_named_pipe_is_refused_not_waited_on(model, tmp_path):
    """It blocked forever: the CLI runs in a child process with a deadline."""
    folder = copy_with(model, tmp_path, files={"config.json": os.mkfifo})
    source = write(tmp_path / "in.txt", "the cat\n")
    done = subprocess.run([sys.executable, "-m", "bertlab", "embed", source, "-o", str(tmp_path / "o.npy"),
                           "--model", folder], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "config.json: is a named pipe, not a regular file" in done.stderr


# ---- JSON: depth, size, non-finite numbers, types ----------------------------------------------

@pytest.mark.parametrize("text, needle", [
    ("[" * 200_000 + "]" * 200_000, "nested 200000 deep"),
    ('{"a": ' * 100 + "1" + "}" * 100, "nested 100 deep"),
    ('{"hidden_size": NaN}', "NaN is not a JSON number"),
    ('{"hidden_size": -Infinity}', "-Infinity is not a JSON number"),
    ('{"a": 1,}', "not valid JSON"),
    ('["a list"]', "expected a JSON object, found list"),
    (b'{"a": "\xff"}', "not valid UTF-8"),
])
def test_read_json_refuses(tmp_path, text, needle):
    path = tmp_path / "c.json"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(ValueError, match=needle.replace("[", r"\[")) as e:
        bio.read_json(path)
    assert str(path) in str(e.value)


def test_strings_with_brackets_do_not_count_as_depth(tmp_path):
    path = write(tmp_path / "c.json", json.dumps({"s": "[" * 1000 + '"\\"{' * 100, "t": [[1]]}))
    assert bio.json_depth(open(path).read()) == 3
    assert bio.read_json(path)["t"] == [[1]]


def test_read_json_size_cap(tmp_path):
    path = write(tmp_path / "big.json", '{"a": "' + "x" * 5000 + '"}')
    with pytest.raises(ValueError, match="more than a settings file may hold"):
        bio.read_json(path, max_bytes=1000)


@pytest.mark.parametrize("value, needle", [
    ("768", "hidden_size is a string ('768'); it must be a whole number"),
    (True, "hidden_size is true or false (True)"),
    (32.5, "hidden_size is a number (32.5); it must be a whole number"),
    ([32], "hidden_size is a list"),
    ({"h": 32}, "hidden_size is an object"),
    (None, "hidden_size is null"),
])
def test_config_fields_of_the_wrong_type_are_named(model, tmp_path, value, needle):
    with pytest.raises(ValueError, match=needle.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        BertConfig.from_dict({**TINY, "hidden_size": value})
    assert_error(embed(copy_with(model, tmp_path, config={"hidden_size": value}), tmp_path), "config.json", needle)


def test_typed_fields_accept_what_json_writes():
    """An int where a float is expected (JSON has one kind of number), None where a field may be None."""
    config = BertConfig.from_dict({**TINY, "layer_norm_eps": 1, "embedding_size": None, "unknown_key": [1, "x"]})
    assert config.layer_norm_eps == 1 and config.embedding_size is None


# ---- sizes: configs counted and refused before any allocation ----------------------------------

def _real_count(model):
    return sum(p.numel() for p in model.parameters()) + sum(b.numel() for b in model.buffers())


@pytest.mark.parametrize("overrides", [{}, {"position_embedding_type": "relative_key"},
                                       {"position_embedding_type": "nezha"},
                                       {"embedding_size": 16, "num_hidden_groups": 1, "num_hidden_layers": 4}])
def test_bert_parameter_count_is_exact(overrides):
    from bertlab.models.bert import BertForPreTraining
    config = BertConfig(**{**TINY, **overrides})
    assert config.parameter_count() == _real_count(BertForPreTraining(config))


def test_albert_gpt_and_translation_parameter_counts_are_exact():
    from bertlab.models.albert import AlbertForPreTraining
    from bertlab.models.gpt import GPT
    from bertlab.models.transformer import Seq2SeqTransformer
    albert = AlbertConfig(**{**TINY, "embedding_size": 16, "num_hidden_groups": 1, "num_hidden_layers": 3})
    assert albert.parameter_count() == _real_count(AlbertForPreTraining(albert))
    gpt = GPTConfig.preset("test", n_inner=48)
    assert gpt.parameter_count() == _real_count(GPT(gpt))
    for share, tie in ((True, True), (False, True), (False, False)):
        config = TransformerConfig(source_vocab_size=50, target_vocab_size=50, d_model=32, encoder_layers=2,
                                   decoder_layers=3, attention_heads=4, ffn_dim=48, max_position_embeddings=64,
                                   share_embeddings=share, tie_word_embeddings=tie)
        assert config.parameter_count() == _real_count(Seq2SeqTransformer(config))


@pytest.mark.parametrize("cls, base, field, value", [
    (BertConfig, TINY, "num_hidden_layers", 100_000_000),
    (BertConfig, TINY, "hidden_size", 10**8),
    (BertConfig, TINY, "intermediate_size", 10**12),
    (BertConfig, TINY, "max_position_embeddings", 10**12),
    (BertConfig, TINY, "type_vocab_size", 10**12),
    (BertConfig, TINY, "vocab_size", 10**12),
    (BertConfig, {**TINY, "position_embedding_type": "nezha"}, "max_relative_position", 10**12),
    (AlbertConfig, {**TINY, "num_hidden_groups": 1}, "embedding_size", 10**11),
    (GPTConfig, {}, "n_layer", 10**7),
    (GPTConfig, {}, "n_embd", 12 * 10**7),
    (GPTConfig, {}, "n_positions", 10**12),
    (GPTConfig, {}, "n_inner", 10**11),
    (TransformerConfig, {}, "source_vocab_size", 10**12),
    (TransformerConfig, {}, "target_vocab_size", 10**12),
    (TransformerConfig, {}, "decoder_layers", 10**8),
    (TransformerConfig, {}, "max_position_embeddings", 10**12),
])
def test_a_huge_size_is_refused_naming_its_field(cls, base, field, value):
    if cls is TransformerConfig and field == "source_vocab_size":
        base = {"target_vocab_size": 8000}
    with pytest.raises(ValueError, match=f"^{field} {value} makes a model of .* GB in float32, more than"):
        cls(**{**base, field: value})


def test_the_limit_is_the_flag_s(model, tmp_path):
    """--max-model-gb lowers (and raises) the limit; a model under it runs as before."""
    assert_ok(embed(model, tmp_path))
    line = assert_error(embed(model, tmp_path, "--max-model-gb", "0.00001", "--overwrite"), "config.json",
                        "more than 0.0 GB (--max-model-gb)")
    assert "pass --max-model-gb to allow it" in line
    validate.set_model_memory_limit(None)
    assert validate.model_memory_limit()[1] == "half this machine's memory"


def test_a_config_of_100000_layers_fails_at_once(model, tmp_path):
    """It built layer by layer toward tens of GB: now refused from the config's numbers alone. (This
    tiny model's 100,000 layers are 5 GB, under a big machine's memory, so the limit is set.)"""
    folder = copy_with(model, tmp_path, config={"num_hidden_layers": 100_000})
    for argv in (["embed", write(tmp_path / "in.txt", "the cat\n"), "-o", tmp_path / "o.npy", "--model", folder],
                 ["fill-mask", "the [MASK] sat", "--model", folder],
                 ["export", folder, "--onnx", tmp_path / "exported"]):
        assert_error(run_cli(*argv, "--max-model-gb", "1"), "num_hidden_layers 100000 makes a model of")


def test_a_misfit_checkpoint_lists_a_few_tensors_and_counts_the_rest(model, tmp_path):
    folder = copy_with(model, tmp_path, config={"num_hidden_layers": 40})
    line = assert_error(embed(folder, tmp_path), "does not fit the model", "missing tensor layers.2.", "more")
    assert len(line) < 2000, len(line)


def test_training_needs_four_times_the_weights(tmp_path):
    """The test preset's weights fit in 0.0002 GB (30,624 parameters = 122 KB); training them, with
    gradients and Adam's moments, does not: gpt-train refuses before building the model."""
    text = write(tmp_path / "corpus.txt", "the cat sat on the mat. " * 200)
    out = tmp_path / "run"
    line = assert_error(run_cli("gpt-train", text, "-o", out, "--preset", "test", "--max-steps", "2",
                                "--max-model-gb", "0.0002"), "to train (weights, gradients and Adam's two moments")
    assert "more than 0.0 GB (--max-model-gb)" in line


# ---- torch files: no inflation, no legacy format, no code -------------------------------------

def _rezip(path, compression):
    """The same archive with every record stored under `compression`: what the probe did."""
    with zipfile.ZipFile(path) as src:
        records = [(info.filename, src.read(info)) for info in src.infolist()]
    with zipfile.ZipFile(path, "w", compression=compression) as dst:
        for name, data in records:
            dst.writestr(name, data)


def test_a_compressed_torch_file_is_refused_before_inflating(tmp_path):
    path = str(tmp_path / "bomb.pt")
    torch.save({"w": torch.zeros(1_000_000)}, path)
    _rezip(path, zipfile.ZIP_DEFLATED)
    assert os.path.getsize(path) < 50_000  # 4 MB of zeros, deflated
    with pytest.raises(ValueError, match="is compressed; torch.save never compresses"):
        bio.read_torch_file(path)


def test_records_larger_than_the_file_are_refused(tmp_path):
    path = str(tmp_path / "lying.pt")
    torch.save({"w": torch.ones(1000)}, path)
    data = bytearray(open(path, "rb").read())
    # a crafted central directory: the data record's uncompressed size (offset 24 of its entry,
    # whose file name starts at offset 46) says a gigabyte
    with zipfile.ZipFile(path) as z:
        name = next(i.filename for i in z.infolist() if i.filename.endswith("data/0")).encode()
    offset = data.find(name, data.find(b"PK\x01\x02")) - 46
    assert data[offset:offset + 4] == b"PK\x01\x02"
    data[offset + 24:offset + 28] = (10**9).to_bytes(4, "little")
    open(path, "wb").write(bytes(data))
    with pytest.raises(ValueError, match="claim .* more than the file's|truncated or corrupt"):
        bio.read_torch_file(path)


def test_the_pre_zip_format_is_refused(tmp_path):
    path = str(tmp_path / "legacy.pt")
    torch.save({"w": torch.ones(3)}, path, _use_new_zipfile_serialization=False)
    with pytest.raises(ValueError, match="not the zip archive torch.save writes"):
        bio.read_torch_file(path)


def test_a_deflated_pytorch_model_bin_is_refused_by_every_loader(model, tmp_path):
    from safetensors.torch import load_file
    tensors = load_file(os.path.join(model, "model.safetensors"))

    def deflated_bin(path):
        torch.save(tensors, path)
        _rezip(path, zipfile.ZIP_DEFLATED)
    folder = str(tmp_path / "bin")
    shutil.copytree(model, folder)
    os.remove(os.path.join(folder, "model.safetensors"))
    deflated_bin(os.path.join(folder, "pytorch_model.bin"))
    assert_error(embed(folder, tmp_path), "pytorch_model.bin", "is compressed")
    plain = str(tmp_path / "plain")
    shutil.copytree(model, plain)
    os.remove(os.path.join(plain, "model.safetensors"))
    torch.save(tensors, os.path.join(plain, "pytorch_model.bin"))
    assert_ok(embed(plain, tmp_path))


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8, torch.bool])
def test_integer_weights_are_refused_by_name(model, tmp_path, dtype):
    """int64 weights were cast and every embedding became a zero row."""
    from safetensors.torch import load_file, save_file
    folder = str(tmp_path / f"int-{dtype}")
    shutil.copytree(model, folder)
    path = os.path.join(folder, "model.safetensors")
    tensors = load_file(path)
    tensors["embeddings.word_embeddings.weight"] = tensors["embeddings.word_embeddings.weight"].to(dtype)
    save_file(tensors, path)
    assert_error(embed(folder, tmp_path), "embeddings.word_embeddings.weight",
                 f"dtype {str(dtype).removeprefix('torch.')}", "must be floating point")


# ---- compressed text: streamed with a cap ------------------------------------------------------

def test_a_gzip_bomb_is_stopped_at_the_cap(tmp_path):
    path = tmp_path / "Translation-en.gz"
    with gzip.open(path, "wb") as f:
        for _ in range(64):
            f.write(b"\0" * (1 << 20))
    assert os.path.getsize(path) < 200_000
    with pytest.raises(ValueError, match="decompresses to more than 1,048,576 bytes"):
        bio.read_compressed(path, max_bytes=1 << 20)
    assert len(bio.read_compressed(path, max_bytes=64 << 20)) == 64 << 20


def test_a_corrupt_gzip_is_a_clear_error(tmp_path):
    path = tmp_path / "bad.gz"
    path.write_bytes(gzip.compress(b"hello world\n" * 1000)[:-40])
    with pytest.raises(ValueError, match="not a readable compressed file, truncated or corrupt"):
        bio.read_compressed(path)


@pytest.mark.skipif(shutil.which("lz4") is None, reason="Debian's lz4 program is not installed")
def test_an_lz4_bomb_is_stopped_at_the_cap(tmp_path):
    raw = tmp_path / "zeros"
    raw.write_bytes(b"\0" * (8 << 20))
    subprocess.run(["lz4", "-q", str(raw), str(tmp_path / "zeros.lz4")], check=True)
    with pytest.raises(ValueError, match="decompresses to more than"):
        bio.read_compressed(tmp_path / "zeros.lz4", max_bytes=1 << 20)
    assert bio.read_compressed(tmp_path / "zeros.lz4") == raw.read_bytes()


def test_the_english_corpus_counts_a_bomb_as_unreadable(tmp_path, monkeypatch):
    """`data english-corpus --root` reads whatever the machine holds: a bomb is one unreadable file,
    never gigabytes in memory."""
    from bertlab.data import english_corpus
    monkeypatch.setattr(english_corpus, "CORPUS_FILE_MAX_BYTES", 1 << 20)
    path = tmp_path / "debian_Translation-en.gz"
    with gzip.open(path, "wb") as f:
        f.write(b"\0" * (4 << 20))
    with pytest.raises(ValueError, match="decompresses to more than"):
        english_corpus._read_text(path)


# ---- names from files stay inside their folder -------------------------------------------------

@pytest.mark.parametrize("name", ["../secret", "a/../../secret", "/etc/passwd", "", "a\0b", "..", 3])
def test_inside_refuses_names_that_leave(tmp_path, name):
    with pytest.raises(ValueError, match="must be a relative path inside the folder"):
        bio.inside(tmp_path, name, "shard")


def test_inside_follows_links_and_refuses_one_that_leaves(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "outside").mkdir()
    os.symlink(tmp_path / "outside", tmp_path / "data" / "link")
    with pytest.raises(ValueError, match="leads outside"):
        bio.inside(tmp_path / "data", "link/x.npy", "shard")
    assert bio.inside(tmp_path / "data", "sub/x.npy") == os.path.join(str(tmp_path / "data"), "sub/x.npy")
