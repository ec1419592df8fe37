"""Byte-level BPE: token-identical to HF's GPT-2 tokenizer and to the `tokenizers` library built
from the same vocab.json/merges.txt, on real text found on this machine."""
import pytest

from bertlab.data.local_text import doc_lines, local_lines
from bertlab.tokenization.bpe import EOT, ByteLevelBPETokenizer, bytes_to_unicode, read_merges
from bertlab.tokenization.char_level import CharTokenizer, load_gpt_tokenizer


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bpe")
    tok = ByteLevelBPETokenizer.train(doc_lines(6000), vocab_size=2000)
    tok.save(folder)
    return folder, ByteLevelBPETokenizer.from_folder(folder)


@pytest.fixture(scope="module")
def real_lines():
    return local_lines(4000)  # documentation and ~190 languages of gettext strings


def test_bytes_to_unicode_is_a_printable_bijection():
    table = bytes_to_unicode()
    assert len(set(table.values())) == 256
    assert table[ord("A")] == "A" and table[ord(" ")] == "Ġ" and table[ord("\n")] == "Ċ"


def test_identical_to_hf_gpt2_tokenizer(trained, real_lines):
    transformers = pytest.importorskip("transformers")
    folder, ours = trained
    import json
    vocab = json.loads((folder / "vocab.json").read_text(encoding="utf-8"))
    merges = read_merges(folder / "merges.txt")
    hf = transformers.GPT2Tokenizer(vocab=vocab, merges=merges)
    for line in real_lines + ["  two  spaces\tand tab\n", "don't I'll we've", "x" + EOT + "y", "1234 5.6"]:
        assert ours.encode(line) == hf.encode(line), line


def test_identical_to_tokenizers_library_and_round_trips(trained, real_lines):
    tokenizers = pytest.importorskip("tokenizers")
    folder, ours = trained
    rust = tokenizers.ByteLevelBPETokenizer(str(folder / "vocab.json"), str(folder / "merges.txt"))
    batch = rust.encode_batch(real_lines)
    for line, enc in zip(real_lines, batch):
        ids = ours.encode(line)
        assert ids == enc.ids, line
        assert ours.decode(ids) == line


def test_save_load_and_special_token(trained, tmp_path):
    folder, ours = trained
    assert ours.vocab_size == 2000 and ours.eos_token_id == ours.vocab[EOT]
    ids = ours.encode("end" + EOT + "start")
    assert ours.eos_token_id in ids and ours.decode(ids) == "end" + EOT + "start"
    assert isinstance(load_gpt_tokenizer(folder), ByteLevelBPETokenizer)
    assert ours.decode(ours.encode("é")[:1]) in ("é", "\ufffd")


def test_bad_files_name_file_and_line(tmp_path, trained):
    folder, _ = trained
    bad = tmp_path / "merges.txt"
    bad.write_text("#version: 0.2\na b\nthree parts here\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"merges.txt:3: expected two symbols"):
        read_merges(bad)
    (tmp_path / "vocab.json").write_text('{"a": 0}', encoding="utf-8")
    bad.write_text("", encoding="utf-8")
    with pytest.raises(ValueError, match="byte symbols"):
        ByteLevelBPETokenizer.from_folder(tmp_path)
    with pytest.raises(FileNotFoundError, match="no tokenizer"):
        load_gpt_tokenizer(tmp_path / "x")


def test_char_tokenizer(tmp_path):
    tok = CharTokenizer.train(["hello", "world"])
    assert tok.decode(tok.encode("hello world")) == "hello\ufffdworld"  # space never seen
    tok.save(tmp_path)
    again = load_gpt_tokenizer(tmp_path)
    assert again.chars == tok.chars and again.encode("low") == tok.encode("low")
