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
