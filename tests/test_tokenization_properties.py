"""Property tests: any Unicode string, against google's tokenization.py and our own invariants."""

import string

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from bertlab.tokenization import BertTokenizer

# Characters that exercise every branch: ASCII, whitespace of several kinds, removed control and
# format characters, CJK ideographs (incl. a compatibility one that NFD changes), accents both
# precomposed and combining, İ (lower() gives two characters), Σ (Final_Sigma), Hangul
# (NFD splits a syllable into jamo), Greek/Arabic/Thai, punctuation outside ASCII.
TRICKY = ("aAbBeEiIlnoOsSz09 .,!?-'#[]" "\t\n\r\x0b\x0c\x1c\x85\u00a0\u2028\u3000"
          "\x00\x01\x7f\u200b\u200d\ufeff\ufffd\U000e0001" "中文字\uf900\U00020000"
          "éÉèçñüÅ\u0301\u0308\u0327\u0345" "İıΣσςΑΊΰ" "한국ㄱ" "عربى" "ไทย" "¡¿«»—…、。")
texts = st.one_of(st.text(alphabet=TRICKY, max_size=40), st.text(max_size=40))

SMALL_VOCAB = list(dict.fromkeys(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
               + list(string.ascii_lowercase + string.digits + string.punctuation)
               + ["##" + c for c in string.ascii_lowercase + string.digits]
               + ["un", "##able", "##ing", "be", "##s", "so", "##σ", "σ", "##ς", "ς", "中", "文",
                  "á", "##é", "e", "A", "Ab", "##B", "##É", "É", "ı", "i̇", "##i", "한", "##ᆫ", "ᄒ"]))


@pytest.fixture(scope="module", params=[True, False], ids=["uncased", "cased"])
def pair(request, tmp_path_factory, google_tokenization):
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    path.write_text("".join(t + "\n" for t in SMALL_VOCAB), encoding="utf-8")
    google = google_tokenization.FullTokenizer(str(path), request.param)
    google.wordpiece_tokenizer.max_input_chars_per_word = 100
    return BertTokenizer(path, request.param), google


@pytest.fixture(scope="module")
def real_pair(google_tokenization, bert_vocab_path):
    google = google_tokenization.FullTokenizer(bert_vocab_path, True)
    google.wordpiece_tokenizer.max_input_chars_per_word = 100
    return BertTokenizer(bert_vocab_path), google


fast = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@fast
@given(text=texts)
def test_same_tokens_as_google(pair, text):
    ours, google = pair
    expected = google.tokenize(text)
    assert ours.tokenize(text) == expected
    expected_ids = google.convert_tokens_to_ids(expected)
    assert ours.tokenize_ids(text) == expected_ids
    assert ours.tokenize_with_offsets(text)[0] == expected_ids
    assert ours.tokenize_ids_batch([text, text + " " + text], add_special_tokens=False) == [
        expected_ids, expected_ids + expected_ids]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=texts)
def test_same_tokens_as_google_real_vocab(real_pair, text):
    ours, google = real_pair
    assert ours.tokenize(text) == google.tokenize(text)


@fast
@given(text=texts)
def test_offsets_are_valid_and_cover_their_tokens(pair, text):
    ours, _ = pair
    ids, offsets = ours.tokenize_with_offsets(text)
    assert len(ids) == len(offsets)
    assert all(0 <= a < b <= len(text) for a, b in offsets)
    assert offsets == sorted(offsets)
    basic = ours.basic_tokenizer
    for token, (a, b) in zip(ours.convert_ids_to_tokens(ids), offsets):
        if token == "[UNK]":
            continue
        # what the span's characters become, in the same lower-cased/stripped/cleaned form;
        # casefold: Σ alone lowers to σ, inside a word it may be a final ς
        original = "".join(basic.split_words(text[a:b]))
        normalized = basic.normalize(original).casefold()
        core = token.removeprefix("##").casefold()
        assert core in normalized, (token, text[a:b])
        if len(normalized) == len(original):  # no NFD expansion (e.g. Hangul) in the span
            assert normalized == core


@fast
@given(text=texts)
def test_pieces_rebuild_the_normalized_text(pair, text):
    ours, _ = pair
    tokens = ours.tokenize(text)
    if "[UNK]" not in tokens:
        # the normalized text without whitespace: cleaned, lower-cased, accents stripped
        words = ours.basic_tokenizer.split_words(text)
        assert "".join(t.removeprefix("##") for t in tokens) == "".join(
            map(ours.basic_tokenizer.normalize, words))


@settings(max_examples=200, deadline=None)
@given(a=st.lists(st.integers(), max_size=30), b=st.lists(st.integers(), max_size=30),
       max_length=st.integers(0, 70))
def test_truncate_seq_pair_like_google(a, b, max_length):
    from bertlab.tokenization import truncate_seq_pair
    expected_a, expected_b = list(a), list(b)
    while len(expected_a) + len(expected_b) > max_length:  # run_classifier._truncate_seq_pair
        if len(expected_a) > len(expected_b):
            expected_a.pop()
        else:
            expected_b.pop()
    truncate_seq_pair(a, b, max_length)
    assert (a, b) == (expected_a, expected_b)
