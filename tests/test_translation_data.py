"""The data side of translation: the gettext parallel corpus, the subword vocabulary, reading
aligned files, batching by tokens and collating."""
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from bertlab.cli import main
from bertlab.data.gettext_corpus import build_gettext_corpus, clean, plural_index, strip_access_keys
from bertlab.data.parallel import ParallelData, collate, read_parallel, token_batches
from bertlab.io import read_lines
from bertlab.tokenization.bpe import learned_model
from bertlab.tokenization.subword import SubwordTokenizer, learn_bpe, normalize, split_words

torch.set_num_threads(1)
LOCALE = Path("/usr/share/locale")
needs_de = pytest.mark.skipif(not (LOCALE / "de" / "LC_MESSAGES").is_dir(), reason="no German catalogs here")
needs_zh = pytest.mark.skipif(not (LOCALE / "zh_CN" / "LC_MESSAGES").is_dir(), reason="no Chinese catalogs here")


# ---- gettext corpus on catalogs written here ------------------------------------------------

def write_catalog(folder: Path, lang: str, domain: str, entries, plural_forms="nplurals=2; plural=(n != 1);",
                  po=False):
    import polib
    catalog = polib.POFile()
    catalog.metadata = {"Content-Type": "text/plain; charset=UTF-8", "Plural-Forms": plural_forms}
    for e in entries:
        catalog.append(polib.POEntry(**e))
    path = folder / lang / "LC_MESSAGES" / f"{domain}.{'po' if po else 'mo'}"
    path.parent.mkdir(parents=True, exist_ok=True)
    catalog.save(str(path)) if po else catalog.save_as_mofile(str(path))


def pairs_of(out: Path, split: str, lang: str) -> list[tuple[str, str]]:
    return list(zip(read_lines(out / f"{split}.en", True), read_lines(out / f"{split}.{lang}", True)))


@pytest.fixture
def locale_dir(tmp_path):
    root = tmp_path / "locale"
    write_catalog(root, "de", "gui", [
        dict(msgid="_File", msgstr="_Datei"),
        dict(msgid="&Save", msgstr="&Speichern"),
        dict(msgid="Open", msgstr="Öffnen", msgctxt="menu"),
        dict(msgid="Open", msgstr="Öffnen", msgctxt="toolbar"),  # same pair: kept once
        dict(msgid="%d file", msgid_plural="%d files", msgstr_plural={0: "%d Datei", 1: "%d Dateien"}),
        dict(msgid="%s: %s", msgstr="%s: %s"),
        dict(msgid="{0}", msgstr="{0}"),
        dict(msgid="GNOME", msgstr="GNOME"),
        dict(msgid="Line one of a\nwrapped message.\n", msgstr="Zeile eins einer\numgebrochenen Meldung.\n"),
        dict(msgid="Usage:\n  -h   help", msgstr="Aufruf:\n  -h   Hilfe"),
        dict(msgid="  Too   many\tspaces ", msgstr="Zu  viele Leerzeichen"),
    ])
    write_catalog(root, "de", "tool", [
        dict(msgid="Not translated yet", msgstr=""),
        dict(msgid="A guess", msgstr="Eine Vermutung", flags=["fuzzy"]),
        dict(msgid="Done.", msgstr="Fertig."),
        dict(msgid="%d file", msgid_plural="%d files", msgstr_plural={0: "%d Datei", 1: "%d Dateien"}),
    ], po=True)
    write_catalog(root, "zh_CN", "gui", [
        dict(msgid="_File", msgstr="文件(_F)"),
        dict(msgid="Save _As", msgstr="另存为（&A）..."),
        dict(msgid="%d connection", msgid_plural="%d connections", msgstr_plural={0: "%d个连接"}),
        dict(msgid="_open_osfhandle failed", msgstr="_open_osfhandle 失败"),
    ], plural_forms="nplurals=1; plural=0;")
    return root


def test_gettext_rules(locale_dir, tmp_path):
    out = tmp_path / "de"
    stats = build_gettext_corpus("de", out, locale_dir, heldout_share=0)
    pairs = pairs_of(out, "train", "de")
    assert sorted(pairs) == sorted([
        ("File", "Datei"), ("Save", "Speichern"), ("Open", "Öffnen"),
        ("%d file", "%d Datei"), ("%d files", "%d Dateien"),
        ("Line one of a wrapped message.", "Zeile eins einer umgebrochenen Meldung."),
        ("Too many spaces", "Zu viele Leerzeichen"),
        ("Done.", "Fertig."),
    ])
    assert stats["drops"] == {"duplicate": 3, "fuzzy_or_obsolete": 1, "identical": 1, "multiline_layout": 1,
                              "no_letters": 2, "untranslated": 1}
    assert stats["candidate_pairs"] == len(pairs) + sum(stats["drops"].values())
    assert stats["joined_lines"] == 1 and stats["plural_pairs"] == 2 and stats["access_key_pairs"] == 2
    assert json.loads((out / "stats.json").read_text())["pairs"] == {"train": 8, "valid": 0, "test": 0}


def test_gettext_chinese_plurals_and_access_keys(locale_dir, tmp_path):
    build_gettext_corpus("zh_CN", tmp_path / "zh", locale_dir, heldout_share=0)
    assert sorted(pairs_of(tmp_path / "zh", "train", "zh_CN")) == sorted([
        ("File", "文件"), ("Save As", "另存为..."), ("%d connection", "%d个连接"), ("%d connections", "%d个连接"),
        ("_open_osfhandle failed", "_open_osfhandle 失败")])


@pytest.mark.parametrize("header, index", [
    ("nplurals=2; plural=(n != 1);", 1), ("nplurals=1; plural=0;", 0), (None, 1),
    ("nplurals=3; plural=(n%10==1 && n%100!=11 ? 0 : n%10>=2 && n%10<=4 && (n%100<10 || n%100>=20) ? 1 : 2);", 2),
    ("nplurals=2; plural=(n > 1);", 1), ("nplurals=2; plural=n ==== 1;", 1),
])
def test_plural_index(header, index):
    assert plural_index(header) == index


@pytest.mark.parametrize("text, expected", [
    ("_File", "File"), ("&Save", "Save"), ("文件(_F)", "文件"), ("下(_B)：", "下："), ("Save _As", "Save As"),
    ("AT&T and &amp; and a & b", "AT&T and &amp; and a & b"), ("NOTES_MERGE_PARTIAL", "NOTES_MERGE_PARTIAL"),
    ("FATAL: `_POSIX2_LOCALEDEF'", "FATAL: `_POSIX2_LOCALEDEF'"), ("*_tz()", "*_tz()"),
])
def test_access_keys(text, expected):
    assert strip_access_keys(text) == expected


@pytest.mark.parametrize("text, reason", [
    ("%s: %s", "no_letters"), ("%1$s (%2$d%%)", "no_letters"), ("{0}: {name!r}", "no_letters"),
    ("%(count)d", "no_letters"), ("   ", "empty"), ("a\n\nb", "multiline_layout"), ("Usage:\n  -h", "multiline_layout"),
])
def test_clean_drops(text, reason):
    assert clean(text) == (None, reason)


def test_split_by_catalog(tmp_path):
    root = tmp_path / "locale"
    for d in range(40):
        write_catalog(root, "de", f"domain{d}", [dict(msgid=f"Message {k} of domain {d}", msgstr=f"Meldung {k} von {d}")
                                                 for k in range(5 + d % 7)])
    stats = build_gettext_corpus("de", tmp_path / "a", root, heldout_share=0.1)
    domain_split = {}
    for split in ("train", "valid", "test"):
        for source, _ in pairs_of(tmp_path / "a", split, "de"):
            domain = source.split()[-1]
            assert domain_split.setdefault(domain, split) == split, f"domain{domain} straddles splits"
    total = sum(stats["pairs"].values())
    assert all(0.05 < stats["pairs"][s] / total < 0.15 for s in ("valid", "test"))
    again = build_gettext_corpus("de", tmp_path / "b", root, heldout_share=0.1)
    assert again["catalogs"] == stats["catalogs"]
    assert (tmp_path / "a" / "test.de").read_bytes() == (tmp_path / "b" / "test.de").read_bytes()


def test_gettext_errors(locale_dir, tmp_path):
    with pytest.raises(ValueError, match=r"no language 'xx'.*de, zh_CN"):
        build_gettext_corpus("xx", tmp_path / "o", locale_dir)
    (locale_dir / "fr" / "LC_MESSAGES").mkdir(parents=True)
    with pytest.raises(ValueError, match="no .mo or .po catalogs"):
        build_gettext_corpus("fr", tmp_path / "o", locale_dir)
    write_catalog(locale_dir, "it", "x", [dict(msgid="%s", msgstr="%s"), dict(msgid="Name", msgstr="Name")])
    with pytest.raises(ValueError, match="no usable pairs.*identical"):
        build_gettext_corpus("it", tmp_path / "o", locale_dir)


def test_gettext_cli(locale_dir, tmp_path, capsys):
    assert main(["data", "gettext", "--lang", "de", "-o", str(tmp_path / "c"), "--locale-dir", str(locale_dir)]) == 0
    assert "train 8 pairs" in capsys.readouterr().err
    assert len(read_lines(tmp_path / "c" / "train.en")) == 8


@needs_de
def test_real_german_catalogs(tmp_path):
    """A few real catalogs (GTK's menus for access keys, PAM's plurals-free messages, make, sed)."""
    root = tmp_path / "locale" / "de" / "LC_MESSAGES"
    root.mkdir(parents=True)
    for domain in ("gtk20", "Linux-PAM", "make", "sed", "grep", "xz"):
        if (LOCALE / "de" / "LC_MESSAGES" / f"{domain}.mo").exists():
            shutil.copy(LOCALE / "de" / "LC_MESSAGES" / f"{domain}.mo", root)
    stats = build_gettext_corpus("de", tmp_path / "out", tmp_path / "locale", heldout_share=0.1)
    assert stats["candidate_pairs"] == sum(stats["pairs"].values()) + sum(stats["drops"].values())
    pairs = [p for s in ("train", "valid", "test") for p in pairs_of(tmp_path / "out", s, "de")]
    assert len(pairs) > 500 and len(set(pairs)) == len(pairs)
    for source, target in pairs:
        assert source and target and source != target and "\n" not in source + target
        assert normalize(source) == source and normalize(target) == target
    sources = {s for s, _ in pairs}
    assert "Open" in sources or "Save" in sources  # gtk20's "_Open"/"_Save" with the key stripped
    assert not any(s.startswith("_") and s[1:2].isupper() and " " not in s for s in sources)


def test_shipped_gnu_corpus_is_aligned_clean_and_split_by_catalog():
    """data/gettext-gnu-de (the main job's corpus): what stats.json says, aligned, normalised."""
    folder = Path(__file__).resolve().parents[1] / "data" / "gettext-gnu-de"
    stats = json.loads((folder / "stats.json").read_text())
    catalogs = [c for split in ("train", "valid", "test") for c in stats["catalogs"][split]]
    assert len(catalogs) == len(set(catalogs)) == 9  # no catalog in two splits
    for split in ("train", "valid", "test"):
        text = read_parallel(folder / f"{split}.de", folder / f"{split}.en")
        assert len(text.sources) == stats["pairs"][split] and text.skipped_empty == 0
        for source, target in zip(text.sources, text.targets):
            assert normalize(source) == source and normalize(target) == target and source != target


# ---- subword vocabulary -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def real_pairs():
    """Real English/German and English/Chinese messages from a few catalogs of this machine."""
    import polib
    texts = {}
    for lang in ("de", "zh_CN"):
        lines = []
        for domain in ("gtk20", "coreutils", "grep", "sed", "tar", "libc"):
            path = LOCALE / lang / "LC_MESSAGES" / f"{domain}.mo"
            if path.exists():
                lines += [t for e in polib.mofile(str(path)) for t in (e.msgid, e.msgstr) if t.strip()]
        texts[lang] = lines
    if not all(texts.values()):
        pytest.skip("no German or Chinese catalogs here")
    return texts


@pytest.mark.parametrize("text, words", [
    ("Hello world", ["▁Hello", "▁world"]),
    ("  File:\t%s  ", ["▁File", ":", "▁%", "s"]),
    ("文件名 abc", ["▁文", "件", "名", "▁abc"]),
    ("a ▁b", ["▁a", "▁b"]),
])
def test_split_words(text, words):
    assert split_words(text) == words


@needs_de
@needs_zh
@pytest.mark.parametrize("lang", ["de", "zh_CN"])
def test_subword_round_trip_and_golden(real_pairs, lang):
    lines = real_pairs[lang]
    train, held = lines[: len(lines) * 4 // 5], lines[len(lines) * 4 // 5:][:400]
    library = learn_bpe(train, vocab_size=800, min_frequency=2)
    ours = SubwordTokenizer(*learned_model(library))
    # every character of the training text is kept, so Chinese's alphabet alone can pass vocab_size
    assert len(ours) == len(library.get_vocab()) >= 800 and (ours.pad_id, ours.unk_id, ours.bos_id, ours.eos_id) == (0, 1, 2, 3)
    for line in train[:400]:  # every character seen: exactly reversible
        assert ours.decode(ours.encode(line)) == normalize(line)
    for line in held + train[:200]:  # ours vs the library's own encoding of the same words
        assert ours.encode(line) == library.encode(" ".join(split_words(line))).ids, line
    if lang == "zh_CN":
        chinese = next(t for t in train if "文件" in t)
        assert ours.decode(ours.encode(chinese)) == normalize(chinese)  # no spaces between characters


def test_subword_unknown_save_load(tmp_path):
    tokenizer = SubwordTokenizer.train(["the cat sat on the mat", "the dog sat"] * 5, vocab_size=60)
    ids = tokenizer.encode("the cat ate")
    assert tokenizer.unk_id not in ids and tokenizer.decode(ids) == "the cat ate"
    assert tokenizer.encode("the ♥") [-1] == tokenizer.unk_id
    assert tokenizer.decode(tokenizer.encode("the ♥")) == "the ⁇"
    assert tokenizer.decode([tokenizer.bos_id, *ids, tokenizer.eos_id, tokenizer.pad_id]) == "the cat ate"
    tokenizer.save(tmp_path / "vocab")
    loaded = SubwordTokenizer.load(tmp_path / "vocab")
    assert loaded.encode("the mat sat") == tokenizer.encode("the mat sat") and len(loaded) == len(tokenizer)
    with pytest.raises(ValueError, match="no vocab.json"):
        SubwordTokenizer.load(tmp_path)
    with pytest.raises(ValueError, match="not in the vocabulary"):
        tokenizer.decode([len(tokenizer)])


# ---- reading, batching, collating --------------------------------------------------------------

@pytest.fixture(scope="module")
def toy_tokenizer():
    return SubwordTokenizer.train(["one two three four five six seven", "eins zwei drei vier fünf sechs"] * 3,
                                  vocab_size=80)


def write(path: Path, data) -> Path:
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    return path


def test_read_parallel(tmp_path):
    src = write(tmp_path / "a.en", "one\n\ntwo\nthree\n")
    tgt = write(tmp_path / "a.de", "eins\nzwei\n \ndrei\n")
    text = read_parallel(src, tgt)
    assert (text.sources, text.targets, text.skipped_empty) == (["one", "three"], ["eins", "drei"], 2)
    tsv = write(tmp_path / "a.tsv", "one\teins\r\ntwo\tzwei\n")
    assert read_parallel(tsv).targets == ["eins", "zwei"]


@pytest.mark.parametrize("files, message", [
    (("one\ntwo\n", "eins\n"), r"misaligned parallel files: .*a\.en has 2 lines, .*b\.de has 1"),
    (("one\teins\ntwo\n",), r"a\.en:2: expected 2 tab-separated columns .* found 1"),
    (("one\teins\tx\n",), r"a\.en:1: expected 2 .* found 3"),
    (("one\n".encode() + b"tw\xffo\n", "eins\nzwei\n"), r"a\.en:2: not valid UTF-8"),
])
def test_read_parallel_errors(tmp_path, files, message):
    paths = [write(tmp_path / name, data) for name, data in zip(("a.en", "b.de"), files)]
    with pytest.raises(ValueError, match=message):
        read_parallel(*paths)


def test_parallel_data_skips_too_long(tmp_path, toy_tokenizer):
    src = write(tmp_path / "a.en", "one two\none two three four five six seven one two three\n\nthree\n")
    tgt = write(tmp_path / "a.de", "eins zwei\neins\nzwei\ndrei\n")
    data = ParallelData.from_files(src, tgt, toy_tokenizer, toy_tokenizer, max_tokens_per_sentence=6)
    assert data.sources == ["one two", "three"] and len(data) == 2
    assert data.report["skipped_too_long"] == 1 and data.report["skipped_empty"] == 1
    assert "1 over 6 tokens" in data.summary()
    assert data.pair(0) == (toy_tokenizer.encode("one two"), toy_tokenizer.encode("eins zwei"))


def test_token_batches_bound_and_determinism():
    lengths = np.random.default_rng(1).integers(1, 40, size=1000)
    batches = token_batches(lengths, max_tokens=200, seed=3, epoch=2, bucket_size=256)
    assert sorted(i for b in batches for i in b) == list(range(1000))
    assert all(len(b) * lengths[b].max() <= 200 for b in batches)
    assert batches == token_batches(lengths, max_tokens=200, seed=3, epoch=2, bucket_size=256)
    assert batches != token_batches(lengths, max_tokens=200, seed=3, epoch=3, bucket_size=256)
    padded = sum(len(b) * lengths[b].max() for b in batches)
    assert padded < 1.15 * lengths.sum()  # similar lengths together: little padding
    ordered = token_batches(lengths, max_tokens=200, shuffle=False)
    assert [lengths[b].max() for b in ordered] == sorted(lengths[b].max() for b in ordered)
    with pytest.raises(ValueError, match="example 1 is 50 tokens long, more than max_tokens=40"):
        token_batches([3, 50, 2], max_tokens=40)


def test_collate_layout():
    batch = collate([([5, 6, 7], [8]), ([9], [10, 11, 12])], pad_id=0, bos_id=2, eos_id=3)
    assert batch.src.tolist() == [[5, 6, 7, 3], [9, 3, 0, 0]]
    assert batch.tgt_in.tolist() == [[2, 8, 0, 0], [2, 10, 11, 12]]
    assert batch.tgt_out.tolist() == [[8, 3, 0, 0], [10, 11, 12, 3]]
    assert batch.num_tokens == 6 and batch.src.dtype == torch.long
    assert batch.num_tokens == int((batch.tgt_out != 0).sum())


def test_parallel_data_resume(tmp_path, toy_tokenizer):
    words = "one two three four five six seven".split()
    rng = np.random.default_rng(0)
    lines = [" ".join(rng.choice(words, size=rng.integers(1, 8))) for _ in range(60)]
    src = write(tmp_path / "a.en", "\n".join(lines) + "\n")
    data = ParallelData.from_files(src, src, toy_tokenizer, toy_tokenizer)
    full = list(data.iterate(epoch=1, max_tokens=48, seed=5))
    resumed = list(data.iterate(epoch=1, max_tokens=48, seed=5, start=3))
    assert [i for i, _ in resumed] == list(range(3, len(full)))
    for (_, a), (_, b) in zip(full[3:], resumed):
        assert torch.equal(a.src, b.src) and torch.equal(a.tgt_out, b.tgt_out)
    assert all(b.src.numel() <= 48 and b.tgt_in.numel() <= 48 for _, b in full)
    assert sum(b.src.shape[0] for _, b in full) == len(data)
