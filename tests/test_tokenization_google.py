"""google-research/bert's own tokenization_test.py, re-expressed for our API."""

import pytest

from bertlab.tokenization import (BasicTokenizer, BertTokenizer, WordpieceTokenizer,
                                  is_control, is_punctuation, is_whitespace)

TINY_VOCAB = ["[UNK]", "[CLS]", "[SEP]", "want", "##want", "##ed", "wa", "un", "runn", "##ing",
              ",", "[unused0]"]


@pytest.fixture
def tiny_tokenizer(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("".join(t + "\n" for t in TINY_VOCAB), encoding="utf-8")
    return BertTokenizer(path)


def test_full_tokenizer(tiny_tokenizer):
    tokens = tiny_tokenizer.tokenize("UNwant\u00E9d,running [unused0] [CLS] [unused55]")
    # google's default (preserve_unused_tokens=False): "[", "unused0", "]" ... are all unknown
    assert tokens == ["un", "##want", "##ed", ",", "runn", "##ing"] + ["[UNK]"] * 9
    assert tiny_tokenizer.convert_tokens_to_ids(tokens) == [7, 4, 5, 10, 8, 9] + [0] * 9
    assert tiny_tokenizer.tokenize_ids("UNwant\u00E9d,running") == [7, 4, 5, 10, 8, 9]


def test_chinese():
    assert BasicTokenizer().tokenize("ah\u535A\u63A8zz") == ["ah", "\u535A", "\u63A8", "zz"]


def test_basic_tokenizer_lower():
    tokenizer = BasicTokenizer(do_lower_case=True)
    assert tokenizer.tokenize(" \tHeLLo!how  \n Are yoU?  ") == ["hello", "!", "how", "are", "you", "?"]
    assert tokenizer.tokenize("H\u00E9llo") == ["hello"]


def test_basic_tokenizer_no_lower():
    tokenizer = BasicTokenizer(do_lower_case=False)
    assert tokenizer.tokenize(" \tHeLLo!how  \n Are yoU?  ") == ["HeLLo", "!", "how", "Are", "yoU", "?"]
    assert tokenizer.tokenize("H\u00E9llo") == ["H\u00E9llo"]


def test_wordpiece_tokenizer():
    vocab = {token: i for i, token in enumerate(TINY_VOCAB[:10])}
    tokenizer = WordpieceTokenizer(vocab)
    assert tokenizer.tokenize("") == []
    assert tokenizer.tokenize("unwanted running") == ["un", "##want", "##ed", "runn", "##ing"]
    assert tokenizer.tokenize("unwantedX running") == ["[UNK]", "runn", "##ing"]
    assert tokenizer.split_word("unwantedX") is None


def test_convert_tokens_to_ids(tiny_tokenizer):
    assert tiny_tokenizer.convert_tokens_to_ids(["un", "##want", "##ed", "runn", "##ing"]) == [7, 4, 5, 8, 9]
    assert tiny_tokenizer.convert_ids_to_tokens([7, 4, 5, 8, 9]) == ["un", "##want", "##ed", "runn", "##ing"]


def test_is_whitespace():
    for char in [" ", "\t", "\r", "\n", "\u00A0"]:
        assert is_whitespace(char)
    for char in ["A", "-"]:
        assert not is_whitespace(char)


def test_is_control():
    assert is_control("\u0005")
    for char in ["A", " ", "\t", "\r", "\U0001F4A9"]:
        assert not is_control(char)


def test_is_punctuation():
    for char in ["-", "$", "`", "."]:
        assert is_punctuation(char)
    for char in ["A", " "]:
        assert not is_punctuation(char)


def test_predicates_match_google(google_tokenization):
    """Our predicates and google's agree on every code point of the first planes."""
    for cp in list(range(0x3000)) + list(range(0xF800, 0x10000)) + [0x1F4A9, 0xE0001, 0x20000]:
        char = chr(cp)
        assert is_whitespace(char) == google_tokenization._is_whitespace(char), hex(cp)
        assert is_control(char) == google_tokenization._is_control(char), hex(cp)
        assert is_punctuation(char) == google_tokenization._is_punctuation(char), hex(cp)
