"""ModernBERT's tokenizer.json read by our own byte-level BPE (tokenization/tokenizer_json.py)
against the `tokenizers` package, token for token: real text from /usr/share/doc, control
characters, CJK, emoji, runs of spaces and the special tokens."""
import pytest

from bertlab.tokenization.tokenizer_json import TokenizerJson
from modernbert_fixtures import local_text, train_tokenizer_json

tokenizers = pytest.importorskip("tokenizers")

HARD = ["naïve café\tdéjà vu\x00\x07\x1b[0m", "汉字和日本語のテキスト、한국어", "emoji 👩‍👩‍👧 🎉🇩🇪 done",
        "  two  spaces   three    four     five", "[CLS] a [MASK] b [SEP]", "x [MASK][MASK] y", "e\u0301 NFC",
        "it's we've I'm they'll", "", " ", "\n\n\r\n", "1234567 3.14159 0xFF"]


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    path = tmp_path_factory.mktemp("tok") / "tokenizer.json"
    train_tokenizer_json(path, local_text(60_000))
    return TokenizerJson.from_file(path), tokenizers.Tokenizer.from_file(str(path))


def test_real_text_token_for_token(pair):
    ours, theirs = pair
    lines = [line for line in local_text(400_000).splitlines()[-3000:] if line.strip()]
    differ = [line for line in lines if ours.encode(line) != theirs.encode(line, add_special_tokens=False).ids]
    assert len(lines) > 1000 and not differ[:3]


@pytest.mark.parametrize("text", HARD)
def test_hard_text(pair, text):
    ours, theirs = pair
    assert ours.encode(text) == theirs.encode(text, add_special_tokens=False).ids
    assert ours.tokenize_ids_batch([text])[0] == theirs.encode(text).ids
    assert ours.decode(ours.encode(text)) == theirs.decode(theirs.encode(text, add_special_tokens=False).ids,
                                                           skip_special_tokens=False)


def test_roles_and_round_trip(pair, tmp_path):
    ours, theirs = pair
    assert ours.mask_token_id == theirs.token_to_id("[MASK]") and ours.pad_token_id == theirs.token_to_id("[PAD]")
    ours.save(tmp_path)
    again = TokenizerJson.from_file(tmp_path / "tokenizer.json")
    assert again.encode(HARD[0]) == ours.encode(HARD[0])


def _trimmed(text, offsets):
    """tokenizers' offsets without the whitespace at a token's sides (ours leave it out, as
    RoBERTa's trim_offsets does), unless the token is whitespace alone."""
    out = []
    for s, e in offsets:
        piece = text[s:e]
        out.append((s, e) if not piece.strip() else
                   (s + len(piece) - len(piece.lstrip()), e - len(piece) + len(piece.rstrip())))
    return out


@pytest.mark.parametrize("text", [t for t in HARD if t != "e\u0301 NFC"]
                         + ["the copyright holder's name (c) 2024", "Ünïcödé\u0301 ok"])
def test_offsets_are_tokenizers_offsets(pair, text):
    """What fine-tuning (squad's answer spans) and extract-features --words read: the same ids as
    encode, and each token's characters in the text as `tokenizers` finds them."""
    ours, theirs = pair
    ids, offsets = ours.tokenize_with_offsets(text)
    encoding = theirs.encode(text, add_special_tokens=False)
    assert ids == ours.encode(text) == encoding.ids
    assert offsets == _trimmed(text, encoding.offsets)


def test_offsets_on_real_text(pair):
    ours, theirs = pair
    lines = [line for line in local_text(400_000).splitlines()[-1000:] if line.strip()]
    differ = [line for line in lines
              if ours.tokenize_with_offsets(line)[1] != _trimmed(line, theirs.encode(line, add_special_tokens=False).offsets)]
    assert not differ[:3]


def test_a_composed_character_spans_the_characters_it_came_from(pair):
    """NFC makes "e" + U+0301 one "é": our offsets give it both characters, so text cut by them keeps
    the accent; `tokenizers` gives it the "e" alone, (0, 1)."""
    ours, theirs = pair
    ids, offsets = ours.tokenize_with_offsets("e\u0301 NFC")
    assert ids == theirs.encode("e\u0301 NFC", add_special_tokens=False).ids
    assert offsets[0] == (0, 2) and theirs.encode("e\u0301 NFC", add_special_tokens=False).offsets[0] == (0, 1)
