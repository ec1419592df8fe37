"""bertlab vocab: a WordPiece vocabulary learned from our BasicTokenizer's words loads in our
BertTokenizer and round-trips the text it was learned from."""
import json
import os

import pytest

from bertlab.cli import main
from bertlab.interop.pretrained import checkpoint_casing
from bertlab.tokenization.bert_tokenizer import tokenizer_config
from bertlab.pretraining.vocab import SPECIAL_TOKENS, alphabet_size, count_words, learn_vocab
from bertlab.tokenization import BasicTokenizer, BertTokenizer, Vocab, is_chinese_char

EXTRA = ["Café crème brûlée, naïve façade: Ærøskøbing!", "我们在北京大学学习自然语言处理。",
         "ΣΟΦΙΑ and Straße", "A word of 120 letters: " + "x" * 120]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """3,000 real lines of this machine (gettext strings in ~190 languages and English docs) plus
    accents, CJK and one over-long word."""
    from bertlab.data.local_text import local_lines
    path = tmp_path_factory.mktemp("vocab") / "corpus.txt"
    path.write_text("\n".join(local_lines(3000) + EXTRA) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def learned(corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("vocab") / "uncased"
    assert main(["vocab", str(corpus), "-o", str(out), "--vocab-size", "8000"]) == 0
    return out


def _rejoin(pieces):
    words = []
    for p in pieces:
        if p.startswith("##") and words:
            words[-1] += p[2:]
        else:
            words.append(p)
    return words


def test_learned_vocab_loads_and_round_trips(corpus, learned):
    vocab = Vocab.load(learned / "vocab.txt")
    assert tuple(vocab.id_to_token[:5]) == SPECIAL_TOKENS
    assert 3000 < len(vocab) <= 8000
    assert tokenizer_config(learned)["do_lower_case"] is True
    assert checkpoint_casing(str(learned), vocab)[0] is True
    tokenizer = BertTokenizer.from_pretrained(learned)
    basic = BasicTokenizer(do_lower_case=True)
    lines = corpus.read_text(encoding="utf-8").split("\n")
    for line in lines:
        pieces = tokenizer.tokenize(line)
        ids = tokenizer.convert_tokens_to_ids(pieces)
        assert tokenizer.tokenize_ids(line) == ids
        expected = basic.tokenize(line)
        if "x" * 120 in line:  # google's WordPiece: a word over 100 characters is [UNK]
            expected = ["[UNK]" if len(w) > 100 else w for w in expected]
        assert _rejoin(tokenizer.convert_ids_to_tokens(ids)) == expected, line
    assert tokenizer.tokenize_ids("\n".join(lines)).count(tokenizer.unk_token_id) == 1  # the 120 x's


def test_uncased_vocab_fits_the_exact_tokenizer(learned):
    tokens = set(Vocab.load(learned / "vocab.txt").id_to_token)
    assert not any(t != t.lower() for t in tokens if t not in SPECIAL_TOKENS)  # lower-cased
    assert not {"é", "##é", "ç", "##ç"} & tokens  # accents stripped
    tokenizer = BertTokenizer.from_pretrained(learned)
    assert tokenizer.tokenize("Café FAÇADE") == tokenizer.tokenize("cafe facade")
    cjk = [t.removeprefix("##") for t in tokens if any(is_chinese_char(ord(c)) for c in t)]
    assert "我" in tokens and all(len(t) == 1 for t in cjk)  # CJK characters stay single tokens
    assert "##我" not in tokens  # ... never continuations: BasicTokenizer isolates each one
    assert "," in tokens and not any(len(t) > 1 and t.strip(",.!:") == "" for t in tokens)  # punctuation split


def test_cased_vocab(corpus, tmp_path, capsys):
    out = tmp_path / "cased"
    assert main(["vocab", str(corpus), "-o", str(out), "--vocab-size", "8000", "--cased"]) == 0
    printed = capsys.readouterr().out
    assert "cased" in printed and "split into several pieces" in printed
    vocab = Vocab.load(out / "vocab.txt")
    assert any(t != t.lower() for t in vocab.id_to_token[5:]) and "é" in vocab.token_to_id
    assert json.loads((out / "tokenizer_config.json").read_text())["do_lower_case"] is False
    tokenizer = BertTokenizer.from_pretrained(out)
    assert not tokenizer.do_lower_case
    assert _rejoin(tokenizer.tokenize(EXTRA[0])) == BasicTokenizer(do_lower_case=False).tokenize(EXTRA[0])


def test_report_and_alphabet(corpus):
    vocab, report = learn_vocab([str(corpus)], vocab_size=6000, min_frequency=2, progress=False)
    words = count_words([str(corpus)], progress=False)
    assert report["vocab_size"] == len(vocab) <= 6000 and report["distinct_words"] == len(words)
    assert 0.05 < report["split_fraction"] < 0.5 and report["unknown_words"] == 1
    needed = len(SPECIAL_TOKENS) + alphabet_size(words)
    letters = {t.removeprefix("##") for t in vocab.id_to_token[5:] if len(t.removeprefix("##")) == 1}
    assert letters == {c for w in words for c in w} and needed <= len(vocab)
    with pytest.raises(ValueError, match=f"vocab size {needed - 1} is smaller than the alphabet.* make {needed}; ask for at least that"):
        learn_vocab([str(corpus)], vocab_size=needed - 1, progress=False)


def test_bad_input(tmp_path, capsys):
    def run(*args):
        code = main(["vocab", *map(str, args)])
        return code, capsys.readouterr().err

    good = tmp_path / "good.txt"
    good.write_text("some text\nmore words\n", encoding="utf-8")
    code, err = run(tmp_path / "missing.txt", "-o", tmp_path / "v")
    assert code == 2 and f"{tmp_path / 'missing.txt'}: no such file" in err
    (tmp_path / "empty.txt").write_bytes(b"")
    code, err = run(good, tmp_path / "empty.txt", "-o", tmp_path / "v")
    assert code == 2 and "empty.txt: has no text (the file is empty)" in err
    (tmp_path / "blank.txt").write_text("\n \n\t\n", encoding="utf-8")
    code, err = run(tmp_path / "blank.txt", "-o", tmp_path / "v")
    assert code == 2 and "blank.txt: has no text" in err
    (tmp_path / "latin1.txt").write_bytes(b"fine\ncaf\xe9\n")
    code, err = run(tmp_path / "latin1.txt", "-o", tmp_path / "v")
    assert code == 2 and "latin1.txt:2: not valid UTF-8 (byte 0xe9 at offset 8)" in err
    code, err = run(good, "-o", tmp_path / "v", "--vocab-size", "10")
    assert code == 2 and "vocab size 10 is smaller than the alphabet" in err
    assert not os.path.exists(tmp_path / "v" / "vocab.txt")
    assert run(good, "-o", tmp_path / "v", "--vocab-size", "100")[0] == 0
    code, err = run(good, "-o", tmp_path / "v")
    assert code == 2 and "already holds vocab.txt" in err and "pass --overwrite" in err
    assert run(good, "-o", tmp_path / "v", "--overwrite")[0] == 0


def test_vocab_feeds_create_pretraining_data(learned, corpus, tmp_path):
    """The folder bertlab vocab writes is what create-pretraining-data takes as --vocab."""
    from bertlab.pretraining.shards import PretrainingData
    text = tmp_path / "docs.txt"
    lines = corpus.read_text(encoding="utf-8").split("\n")[:400]
    text.write_text("\n".join(line if i % 6 else "" for i, line in enumerate(lines)) + "\n", encoding="utf-8")
    assert main(["create-pretraining-data", str(text), "--vocab", str(learned), "-o", str(tmp_path / "out"),
                 "--max-seq-length", "64", "--dupe-factor", "1", "--workers", "1"]) == 0
    data = PretrainingData(str(tmp_path / "out"))
    assert data.meta["vocab_size"] == len(Vocab.load(learned / "vocab.txt")) and len(data) > 50
    assert (tmp_path / "out" / "vocab.txt").read_text() == (learned / "vocab.txt").read_text()
    assert json.loads((tmp_path / "out" / "tokenizer_config.json").read_text())["do_lower_case"] is True


def test_chinese_text_gives_google_chinese_vocab_layout(tmp_path):
    """On Chinese text (real Debian zh_CN descriptions, tests/fixtures/debian-zh) every CJK
    character is a token of its own and never a ## continuation, as in google's Chinese vocab:
    BasicTokenizer puts spaces around each CJK character before WordPiece sees the text. Latin words
    in the text still get word pieces."""
    from bertlab.data.debian_zh import build_debian_zh
    fixture = os.path.join(os.path.dirname(__file__), "fixtures", "debian-zh")
    build_debian_zh(tmp_path / "zh", fixture, min_per_section=1)
    text = tmp_path / "zh.txt"
    text.write_text((tmp_path / "zh" / "train.txt").read_text(encoding="utf-8") + "\n我爱中国。\n", encoding="utf-8")
    assert main(["vocab", str(text), "-o", str(tmp_path / "vocab"), "--vocab-size", "2000", "--min-frequency", "1"]) == 0
    tokens = Vocab.load(tmp_path / "vocab" / "vocab.txt").id_to_token
    cjk = [t for t in tokens if any(is_chinese_char(ord(c)) for c in t)]
    assert len(cjk) > 200 and all(len(t) == 1 for t in cjk)  # no "##中", no "中国"
    assert set("古代战争实时策略游戏我爱中国") <= set(cjk)
    assert any(t.startswith("##") for t in tokens)  # Latin words (e.g. "adduser") are still pieces
    tokenizer = BertTokenizer.from_pretrained(tmp_path / "vocab")
    assert tokenizer.tokenize("我爱中国，adduser") == ["我", "爱", "中", "国", "，"] + tokenizer.tokenize("adduser")


def _tokenizers_trainer(words, vocab_size, min_frequency=2):
    """The `tokenizers` library's WordPieceTrainer on the same word counts: the reference."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, min_frequency=min_frequency, show_progress=False,
                                        special_tokens=list(SPECIAL_TOKENS), continuing_subword_prefix="##")
    tokenizer.train_from_iterator(((word + " ") * n for word, n in words.items()), trainer)
    return set(tokenizer.get_vocab())


def test_merges_follow_the_counts_and_then_the_ids_as_the_tokenizers_trainer():
    """Each step merges the most frequent adjacent pair; a tie (pug and hugs, 5 each) goes to the
    pair of lower ids, p (a character) before hug (a merge)."""
    from collections import Counter
    from bertlab.pretraining.vocab import train_wordpiece
    words = Counter({"hug": 10, "pug": 5, "pun": 12, "bun": 4, "hugs": 5})
    tokens = train_wordpiece(words, 100, min_frequency=2, progress=False).id_to_token
    assert tokens[:5] == list(SPECIAL_TOKENS)
    assert tokens[5:12] == ["b", "g", "h", "n", "p", "s", "u"]  # the characters, by code point
    assert sorted(tokens[12:16]) == ["##g", "##n", "##s", "##u"]
    assert tokens[16:] == ["##ug", "##un", "hug", "pun", "pug", "hugs", "bun"]
    assert set(tokens) == _tokenizers_trainer(words, 100)
    assert train_wordpiece(words, 100, min_frequency=5, progress=False).id_to_token[16:] == \
        ["##ug", "##un", "hug", "pun", "pug", "hugs"]  # bun's 4 is under min_frequency


def test_learned_pieces_agree_with_the_tokenizers_trainer(corpus):
    """On 3,000 real lines in ~190 languages the learned set matches the trainer's as closely as two
    runs of the trainer match each other (measured: 98.1% against 98.2%; their ties differ)."""
    from bertlab.pretraining.vocab import train_wordpiece
    words = count_words([str(corpus)], progress=False)
    ours = set(train_wordpiece(words, 8000, progress=False).id_to_token)
    reference = _tokenizers_trainer(words, 8000)
    assert abs(len(ours) - len(reference)) <= 0.01 * len(reference)
    assert len(ours & reference) >= 0.96 * len(reference)


def test_the_same_text_gives_the_same_vocab_in_every_process(corpus, tmp_path):
    """Two processes with different string hashing write the same vocab.txt, byte for byte. The
    `tokenizers` trainer, which bertlab used before, broke ties by hash-map order: two of its runs on
    this corpus differed in about 140 of 7,400 pieces."""
    import subprocess
    import sys
    written = []
    for seed in ("1", "2"):
        out = tmp_path / f"v{seed}"
        env = {**os.environ, "PYTHONHASHSEED": seed}
        subprocess.run([sys.executable, "-m", "bertlab", "vocab", str(corpus), "-o", str(out), "--vocab-size", "8000"],
                       check=True, env=env, capture_output=True)
        written.append((out / "vocab.txt").read_bytes())
    assert written[0] == written[1]
