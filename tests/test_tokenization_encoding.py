"""Offsets, the [CLS] A [SEP] B [SEP] layout, truncation, padding, vocab files and errors."""

import json
import os

import pytest

from bertlab.tokenization import BertTokenizer, Vocab, truncate_seq_pair

SMALL_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", "!", ",", "bye",
               "he", "##llo", "i", "##stanbul", "中", "文", "ab", "cd", "σ", "##ι", "##ς",
               "cafe", "é", "##é"]
PAD, UNK, CLS, SEP = 0, 1, 2, 3


def write_vocab(folder, tokens, name="vocab.txt"):
    path = folder / name
    path.write_text("".join(t + "\n" for t in tokens), encoding="utf-8")
    return path


@pytest.fixture
def small(tmp_path):
    return BertTokenizer(write_vocab(tmp_path, SMALL_VOCAB))


@pytest.fixture(scope="module")
def real(bert_vocab_path):
    return BertTokenizer(bert_vocab_path)


def spans(tokenizer, text):
    ids, offsets = tokenizer.tokenize_with_offsets(text)
    return [(token, text[a:b]) for token, (a, b) in
            zip(tokenizer.convert_ids_to_tokens(ids), offsets)]


# -- offsets ----------------------------------------------------------------------------------

def test_offsets_ascii(small):
    assert small.tokenize_with_offsets("  Hello, world!") == (
        [5, 8, 6, 7], [(2, 7), (7, 8), (9, 14), (14, 15)])


def test_offsets_accents_cover_the_original_characters(small):
    text = "Café he\u0301llo"  # precomposed é, then e + COMBINING ACUTE ACCENT
    assert small.tokenize_with_offsets(text) == ([21, 5], [(0, 4), (5, 11)])
    split = BertTokenizer({"[UNK]": 0, "he": 1, "##llo": 2})
    assert split.tokenize_with_offsets("he\u0301llo") == ([1, 2], [(0, 3), (3, 6)])
    # the mark belongs to the "e" before it
    assert split.tokenize_with_offsets("\u0301hello") == ([1, 2], [(1, 3), (3, 6)])


def test_offsets_dotted_capital_i_lowers_to_two_characters(small, real):
    # "İ".lower() is "i" + U+0307 (two characters); stripping the mark gives "i"
    assert spans(small, "İstanbul hello") == [("i", "İ"), ("##stanbul", "stanbul"), ("hello", "hello")]
    assert spans(real, "İİstanbul") == [("ii", "İİ"), ("##stan", "stan"), ("##bu", "bu"), ("##l", "l")]


def test_offsets_cased_keeps_accents(tmp_path):
    tokenizer = BertTokenizer(write_vocab(tmp_path, SMALL_VOCAB + ["Caf"]), do_lower_case=False)
    assert spans(tokenizer, "Café é") == [("Caf", "Caf"), ("##é", "é"), ("é", "é")]


def test_offsets_cjk(small):
    assert spans(small, "ab中文cd") == [("ab", "ab"), ("中", "中"), ("文", "文"), ("cd", "cd")]
    assert small.tokenize_with_offsets("ab中文cd")[1] == [(0, 2), (2, 3), (3, 4), (4, 6)]


def test_offsets_skip_deleted_control_characters(small):
    text = "\x00hel\x01lo\u200b \ufffdworld\x1c!"
    ids, offsets = small.tokenize_with_offsets(text)
    assert small.convert_ids_to_tokens(ids) == ["hello", "world", "!"]
    # a deleted character inside a word is covered, one at its edge is not
    assert offsets == [(1, 7), (10, 15), (16, 17)]


def test_offsets_final_sigma(small):
    assert spans(small, "ΣΊΣ") == [("σ", "Σ"), ("##ι", "Ί"), ("##ς", "Σ")]


def test_offsets_unknown_word_spans_the_word(small):
    assert spans(small, "hello xyz!") == [("hello", "hello"), ("[UNK]", "xyz"), ("!", "!")]


def test_offsets_real_text(real):
    text = "Der Überträger l'été — 東京タワー ΑΘΗΝΑ résumé\tİzmir"
    for token, original in spans(real, text):
        core = token.removeprefix("##")
        assert token == "[UNK]" or core in real.basic_tokenizer.normalize(original).casefold(), (token, original)


# -- layout, truncation, padding ----------------------------------------------------------------

def test_single_and_pair_layout(small):
    single = small.encode("hello world")
    assert single.input_ids == [CLS, 5, 6, SEP]
    assert single.token_type_ids == [0, 0, 0, 0]
    assert single.attention_mask == [1, 1, 1, 1]
    assert single.offsets is None and single.sequence_ids is None
    pair = small.encode("Hello world", "bye!", return_offsets=True)
    assert pair.input_ids == [CLS, 5, 6, SEP, 9, 7, SEP]
    assert pair.token_type_ids == [0, 0, 0, 0, 1, 1, 1]
    assert pair.offsets == [None, (0, 5), (6, 11), None, (0, 3), (3, 4), None]
    assert pair.sequence_ids == [None, 0, 0, None, 1, 1, None]


def reference_truncation(a, b, max_length):
    """google run_classifier's _truncate_seq_pair, spelled out."""
    a, b = list(a), list(b)
    while len(a) + len(b) > max_length:
        (a if len(a) > len(b) else b).pop()
    return a, b


@pytest.mark.parametrize("len_a,len_b,max_length", [
    (5, 2, 5), (3, 3, 4), (2, 5, 5), (4, 4, 8), (0, 6, 3), (7, 1, 0), (3, 9, 10)])
def test_truncate_seq_pair_longest_first(len_a, len_b, max_length):
    a, b = list(range(len_a)), list(range(100, 100 + len_b))
    expected = reference_truncation(a, b, max_length)
    truncate_seq_pair(a, b, max_length)
    assert (a, b) == expected
    assert len(a) + len(b) == min(len_a + len_b, max_length)


def test_truncate_seq_pair_ties_cut_b_first():
    a, b = [1, 2, 3], [4, 5, 6]
    truncate_seq_pair(a, b, 5)
    assert (a, b) == ([1, 2, 3], [4, 5])


def test_truncation_in_encoding(small):
    enc = small.encode("hello world hello world", max_length=4, return_offsets=True)
    assert enc.input_ids == [CLS, 5, 6, SEP]
    assert enc.offsets == [None, (0, 5), (6, 11), None]
    enc = small.encode("hello world hello", "bye bye", max_length=7, return_offsets=True)
    assert enc.input_ids == [CLS, 5, 6, SEP, 9, 9, SEP]  # 3 + 2 > 4: A loses one
    assert enc.offsets == [None, (0, 5), (6, 11), None, (0, 3), (4, 7), None]
    assert enc.sequence_ids == [None, 0, 0, None, 1, 1, None]
    assert len(small.encode("hello " * 50, max_length=16)) == 16


def test_padding(small):
    texts = ["hello", "hello world !"]
    assert small(texts).input_ids == [[CLS, 5, SEP], [CLS, 5, 6, 7, SEP]]
    longest = small(texts, padding="longest", return_offsets=True)
    assert longest.input_ids == [[CLS, 5, SEP, PAD, PAD], [CLS, 5, 6, 7, SEP]]
    assert longest.attention_mask == [[1, 1, 1, 0, 0], [1] * 5]
    assert longest.token_type_ids == [[0] * 5, [0] * 5]
    assert longest.offsets[0] == [None, (0, 5), None, None, None]
    assert longest.sequence_ids[0] == [None, 0, None, None, None]
    assert small(texts, padding=True).input_ids == longest.input_ids
    fixed = small(texts, ["bye", "bye"], padding="max_length", max_length=8)
    assert fixed.input_ids == [[CLS, 5, SEP, 9, SEP, PAD, PAD, PAD], [CLS, 5, 6, 7, SEP, 9, SEP, PAD]]
    assert fixed.token_type_ids[0] == [0, 0, 0, 1, 1, 0, 0, 0]
    arrays = fixed.to_tensors()
    assert arrays["input_ids"].shape == (2, 8) and str(arrays["input_ids"].dtype) == "torch.int64"
    assert fixed.to_numpy()["attention_mask"].sum() == 5 + 7
    with pytest.raises(ValueError, match="padding"):
        small(texts).to_numpy()
    assert small([], padding="longest").input_ids == []


def test_empty_and_blank_texts(small):
    assert small.tokenize("") == [] and small.tokenize(" \t\n\x00") == []
    assert small.encode("", return_offsets=True).offsets == [None, None]
    assert small.tokenize_ids_batch(["", " "]) == [[CLS, SEP], [CLS, SEP]]


def test_tensors_match_lists(real, real_lines):
    batch = real(real_lines[:64], max_length=32, padding="max_length")
    tensors = batch.to_tensors()
    assert tensors["input_ids"].tolist() == batch.input_ids
    assert tensors["attention_mask"].sum().item() == sum(map(sum, batch.attention_mask))


# -- vocab files, from_pretrained, errors --------------------------------------------------------

def test_vocab_round_trip_is_atomic(tmp_path, bert_vocab_path):
    vocab = Vocab.load(bert_vocab_path)
    assert len(vocab) == 30522 and vocab.token_to_id["[CLS]"] == 101
    vocab.save(tmp_path / "vocab.txt")
    assert (tmp_path / "vocab.txt").read_bytes() == open(bert_vocab_path, "rb").read()
    assert os.listdir(tmp_path) == ["vocab.txt"]  # no temporary file left behind


def test_from_pretrained_reads_casing(tmp_path, small):
    small.save_pretrained(tmp_path / "saved")
    assert json.loads((tmp_path / "saved" / "tokenizer_config.json").read_text()) == {"do_lower_case": True}
    assert BertTokenizer.from_pretrained(tmp_path / "saved").tokenize("Hello") == ["hello"]
    (tmp_path / "saved" / "tokenizer_config.json").write_text('{"do_lower_case": false}')
    cased = BertTokenizer.from_pretrained(tmp_path / "saved")
    assert not cased.do_lower_case and cased.tokenize("Hello") == ["[UNK]"]
    assert BertTokenizer.from_pretrained(tmp_path / "saved", do_lower_case=True).do_lower_case


def test_vocab_from_dict(small):
    tokenizer = BertTokenizer({t: i for i, t in enumerate(SMALL_VOCAB)})
    assert tokenizer.tokenize_ids_batch(["hello world"]) == small.tokenize_ids_batch(["hello world"])
    with pytest.raises(ValueError, match="ids must be exactly"):
        BertTokenizer({"a": 0, "b": 2})


def test_empty_vocab_file(tmp_path):
    path = write_vocab(tmp_path, [])
    with pytest.raises(ValueError, match=f"{path}.*empty"):
        BertTokenizer(path)


def test_duplicate_tokens_name_their_lines(tmp_path):
    path = write_vocab(tmp_path, ["[UNK]", "a", "b", "a", "c", "b", "a"])
    with pytest.raises(ValueError, match=f"{path}: duplicate tokens: 'a' on lines 2, 4, 7; 'b' on lines 3, 6"):
        BertTokenizer(path)


def test_non_utf8_vocab_names_the_line(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_bytes(b"[UNK]\nhello\nw\xf6rld\n")
    with pytest.raises(ValueError, match=f"{path}: line 3 is not valid UTF-8"):
        BertTokenizer(path)


@pytest.mark.parametrize("missing,call", [
    ("[UNK]", lambda t: t.tokenize_ids("hello zzz")),
    ("[CLS]", lambda t: t.encode("hello")),
    ("[SEP]", lambda t: t.tokenize_ids_batch(["hello"])),
    ("[PAD]", lambda t: t(["hello", "hello hello"], padding="longest")),
])
def test_missing_special_tokens(tmp_path, missing, call):
    path = write_vocab(tmp_path, [t for t in SMALL_VOCAB if t != missing])
    tokenizer = BertTokenizer(path)
    assert tokenizer.tokenize_ids("hello") == [SMALL_VOCAB.index("hello") - 1]  # still fine
    with pytest.raises(ValueError, match=rf"{path}: the vocabulary has no \{missing[:-1]}\] token"):
        call(tokenizer)


def test_bad_arguments(small):
    with pytest.raises(TypeError, match="encode()"):
        small("hello")
    with pytest.raises(ValueError, match="needs max_length"):
        small(["hello"], padding="max_length")
    with pytest.raises(ValueError, match="padding must be"):
        small(["hello"], padding="left")
    with pytest.raises(ValueError, match="no room"):
        small(["hello"], ["bye"], max_length=2)
    with pytest.raises(ValueError, match="1 texts but 2 pairs"):
        small(["hello"], ["a", "b"])
