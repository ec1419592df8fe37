"""BertTokenizer against google-research/bert's tokenization.py on real multilingual text."""

import pytest

from bertlab.tokenization import BertTokenizer


@pytest.mark.parametrize("do_lower_case", [True, False])
def test_smoke_matches_google(google_tokenization, bert_vocab_path, do_lower_case):
    google = google_tokenization.FullTokenizer(bert_vocab_path, do_lower_case)
    google.wordpiece_tokenizer.max_input_chars_per_word = 100
    ours = BertTokenizer(bert_vocab_path, do_lower_case)
    text = "Hello, World! naïve café İstanbul ΣΊΣΥΦΟΣ 中文字 \x01ab\x00c"
    assert ours.tokenize(text) == google.tokenize(text)
    assert ours.tokenize_ids(text) == google.convert_tokens_to_ids(google.tokenize(text))
