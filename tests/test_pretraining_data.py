"""bertlab create-pretraining-data: instances equal to google-research/bert's create_pretraining_data.py,
masking statistics, whole-word masking, RoBERTa packing, determinism across workers, bad input."""
import json
import os
import random
import sys
import types
from collections import Counter
from functools import partial

import numpy as np
import pytest

from bertlab.cli import main
from bertlab.pretraining.create import create_pretraining_data, load_vocab_tokenizer
from bertlab.pretraining.instances import InstanceOptions, trim_seq_pair
from bertlab.pretraining.masking import create_masked_lm_predictions, make_mask_fn, mask_fn_for
from bertlab.pretraining.shards import PretrainingData
from bertlab.tokenization import Vocab, is_chinese_char

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUMMARIES = os.path.join(REPO, "data", "python-docs", "summaries.txt")

# The notes' example: a few short documents, one sentence a line, blank lines between documents.
NOTES_TEXT = """\
The man went to the store.
He bought a gallon of milk.
Penguins are flightless birds.

Sudden rain ruined the picnic.
Everyone ran under the old oak tree.
The sandwiches were soaked.
Nobody minded much.

Unaffable wizards seldom smile.
Moonlit kayaks drift past flightless geese.
"""


@pytest.fixture(scope="module")
def google_cpd(google_tokenization):
    """google's create_pretraining_data.py itself (bert-tensorflow 1.0.4), imported with stand-ins
    for the TensorFlow names it touches (flags on a private FlagValues, so they can't clash)."""
    from absl import flags
    from conftest import _tensorflow_stub
    own = flags.FlagValues()
    defines = {n: partial(getattr(flags, n), flag_values=own)
               for n in ("DEFINE_string", "DEFINE_bool", "DEFINE_integer", "DEFINE_float")}
    with _tensorflow_stub():
        v1 = sys.modules["tensorflow.compat.v1"]
        v1.flags = types.SimpleNamespace(FLAGS=own, **defines)
        v1.logging = types.SimpleNamespace(info=lambda *a: None)
        from bert import create_pretraining_data
    own(["pytest"])
    return create_pretraining_data


def google_master_wwm_predictions(tokens, masked_lm_prob, max_predictions_per_seq, vocab_words, rng):
    """Oracle for --do-whole-word-mask: bert-tensorflow 1.0.4 predates google's do_whole_word_mask
    flag, so this is the master branch's create_masked_lm_predictions with the flag on (each "##"
    piece joins the candidate before it; a word that would overshoot is skipped), transcribed to be
    swapped into 1.0.4's module, which keeps everything else its own."""
    cand_indexes = []
    for i, token in enumerate(tokens):
        if token in ("[CLS]", "[SEP]"):
            continue
        if cand_indexes and token.startswith("##"):
            cand_indexes[-1].append(i)
        else:
            cand_indexes.append([i])
    rng.shuffle(cand_indexes)
    output_tokens = list(tokens)
    num_to_predict = min(max_predictions_per_seq, max(1, int(round(len(tokens) * masked_lm_prob))))
    masked, covered = [], set()
    for index_set in cand_indexes:
        if len(masked) >= num_to_predict:
            break
        if len(masked) + len(index_set) > num_to_predict or any(i in covered for i in index_set):
            continue
        for index in index_set:
            covered.add(index)
            if rng.random() < 0.8:
                masked_token = "[MASK]"
            elif rng.random() < 0.5:
                masked_token = tokens[index]
            else:
                masked_token = vocab_words[rng.randint(0, len(vocab_words) - 1)]
            output_tokens[index] = masked_token
            masked.append((index, tokens[index]))
    masked.sort()
    return output_tokens, [i for i, _ in masked], [label for _, label in masked]


def ours(files, vocab_path, out, workers=1, chunk_docs=100_000, seed=12345, **options):
    tokenizer = load_vocab_tokenizer(vocab_path)
    create_pretraining_data(files, str(out), tokenizer, InstanceOptions(**options), seed=seed, workers=workers,
                            chunk_docs=chunk_docs, chinese_ref=options.get("chinese_ref"))
    return PretrainingData(str(out))


def as_google(data: PretrainingData, vocab: Vocab) -> list[tuple]:
    r = data.rows(np.arange(len(data)))
    out = []
    for i in range(len(data)):
        k, m = r["lengths"][i], r["masked_lm_counts"][i]
        out.append((vocab.convert_ids_to_tokens(r["input_ids"][i, :k].tolist()), r["segment_ids"][i, :k].tolist(),
                    bool(r["next_sentence_labels"][i]), r["masked_lm_positions"][i, :m].tolist(),
                    vocab.convert_ids_to_tokens(r["masked_lm_ids"][i, :m].tolist())))
    return out


def google(google_cpd, google_tokenization, files, vocab_path, seed=12345, **f):
    tokenizer = google_tokenization.FullTokenizer(vocab_file=vocab_path, do_lower_case=True)
    instances = google_cpd.create_training_instances(
        files, tokenizer, f["max_seq_length"], f["dupe_factor"], f["short_seq_prob"], f["masked_lm_prob"],
        f["max_predictions_per_seq"], random.Random(seed))
    return [(i.tokens, i.segment_ids, i.is_random_next, i.masked_lm_positions, i.masked_lm_labels)
            for i in instances]


def real_corpus(path, lines=1500, doc_every=(3, 5, 8, 13), docs=True) -> str:
    """Real text as documents: the shipped docstring summaries and (with `docs`) this machine's
    documentation, a blank line after every few lines (document lengths cycling through doc_every)."""
    from bertlab.data.local_text import doc_lines
    with open(SUMMARIES, encoding="utf-8") as f:
        text = [line.rstrip("\n") for _, line in zip(range(lines), f)] + (doc_lines(lines // 2) if docs else [])
    out, k, n = [], 0, 0
    for line in text:
        out.append(line)
        n += 1
        if n == doc_every[k % len(doc_every)]:
            out.append("")
            k, n = k + 1, 0
    path.write_text("\n".join(out) + "\n", encoding="utf-8")
    return str(path)


# -- exactness against google's create_pretraining_data.py ------------------------------------------

NOTES_FLAGS = dict(max_seq_length=15, masked_lm_prob=0.2, max_predictions_per_seq=2, dupe_factor=3,
                   short_seq_prob=0.1)


@pytest.mark.parametrize("wwm", [False, True])
def test_notes_example_equals_google(google_cpd, google_tokenization, bert_vocab_path, tmp_path, monkeypatch, wwm):
    corpus = tmp_path / "notes.txt"
    corpus.write_text(NOTES_TEXT, encoding="utf-8")
    if wwm:
        monkeypatch.setattr(google_cpd, "create_masked_lm_predictions", google_master_wwm_predictions)
    expected = google(google_cpd, google_tokenization, [str(corpus)], bert_vocab_path, **NOTES_FLAGS)
    data = ours([str(corpus)], bert_vocab_path, tmp_path / "out", do_whole_word_mask=wwm, **NOTES_FLAGS)
    got = as_google(data, Vocab.load(bert_vocab_path))
    assert got == expected
    assert len(got) > 10 and any(g[2] for g in got) and not all(g[2] for g in got)
    if wwm:  # moon ##lit, kay ##aks, flight ##less: whole words of two pieces fit 2 predictions
        assert any(t.startswith("##") for g in got for t in g[4])


@pytest.mark.parametrize("wwm", [False, True])
def test_real_text_equals_google(google_cpd, google_tokenization, bert_vocab_path, tmp_path, monkeypatch, wwm):
    corpus = real_corpus(tmp_path / "real.txt")
    flags = dict(max_seq_length=64, masked_lm_prob=0.15, max_predictions_per_seq=10, dupe_factor=2,
                 short_seq_prob=0.1)
    if wwm:
        monkeypatch.setattr(google_cpd, "create_masked_lm_predictions", google_master_wwm_predictions)
    expected = google(google_cpd, google_tokenization, [corpus], bert_vocab_path, seed=7, **flags)
    data = ours([corpus], bert_vocab_path, tmp_path / "out", seed=7, do_whole_word_mask=wwm, **flags)
    got = as_google(data, Vocab.load(bert_vocab_path))
    assert len(got) == len(expected) > 1000
    for i, (g, e) in enumerate(zip(got, expected)):
        assert g == e, f"instance {i} differs"


def test_next_sentence_labels_are_balanced(bert_vocab_path, tmp_path):
    """Half the Bs are random, and never fewer: a chunk of a single sentence (more of them under
    short_seq_prob's shorter targets) always takes a random B, so the share sits a little above
    half (0.565 here). The shipped summaries only, so the corpus is the same on every machine:
    /usr/share/doc changes as packages are installed (installing chromium moved the share past 0.54)."""
    corpus = real_corpus(tmp_path / "real.txt", lines=2800, doc_every=(40,), docs=False)
    data = ours([corpus], bert_vocab_path, tmp_path / "out", dupe_factor=3)
    labels = data.rows(np.arange(len(data)))["next_sentence_labels"]
    assert len(labels) > 2000 and 0.49 < labels.mean() < 0.6
    assert data.meta["settings"]["stats"]["random_next"] == labels.sum()


def test_line_ends_as_google_reads_them(google_cpd, google_tokenization, bert_vocab_path, tmp_path):
    """Windows line ends and a lone carriage return split lines as google's reader does."""
    corpus = tmp_path / "crlf.txt"
    corpus.write_bytes(NOTES_TEXT.replace("\n", "\r\n").replace("milk.\r\n", "milk.\r").encode())
    expected = google(google_cpd, google_tokenization, [str(corpus)], bert_vocab_path, **NOTES_FLAGS)
    got = as_google(ours([str(corpus)], bert_vocab_path, tmp_path / "out", **NOTES_FLAGS), Vocab.load(bert_vocab_path))
    assert got == expected


def test_trim_seq_pair_is_googles(google_cpd):
    for seed in range(200):
        rng = random.Random(seed)
        la, lb, limit = rng.randint(1, 40), rng.randint(1, 40), rng.randint(2, 30)
        a, b = list(range(la)), list(range(100, 100 + lb))
        google_cpd.truncate_seq_pair(a, b, limit, random.Random(seed))
        keep_a, keep_b = trim_seq_pair(la, lb, limit, random.Random(seed))
        assert (list(range(la))[keep_a], list(range(100, 100 + lb))[keep_b]) == (a, b)


# -- masking statistics ------------------------------------------------------------------------------

V, CLS, SEP, MASK, PAD = 1000, 2, 3, 4, 0


def _check_masking(rows, outputs, positions, labels, P):
    """Selected share, 80/10/10 split, never a special position, at most P predictions."""
    selected = maskable = masked = kept = 0
    for row, out, pos, lab in zip(rows, outputs, positions, labels):
        assert len(pos) <= P and list(pos) == sorted(set(pos))
        assert all(row[p] not in (CLS, SEP, PAD) for p in pos)
        assert [row[p] for p in pos] == list(lab)
        changed = [i for i in range(len(row)) if out[i] != row[i]]
        assert set(changed) <= set(pos)
        selected += len(pos)
        maskable += sum(t not in (CLS, SEP, PAD) for t in row)
        masked += sum(out[p] == MASK for p in pos)
        kept += sum(out[p] == row[p] for p in pos)
    assert abs(selected / maskable - 0.15) < 0.01
    assert abs(masked / selected - 0.8) < 0.02
    assert abs(kept / selected - 0.1) < 0.02  # (a random piece equal to the original: 1 in 1000)
    assert abs((selected - masked - kept) / selected - 0.1) < 0.02


def _random_rows(n, seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(n):
        a, b = rng.integers(10, 60, 2)
        rows.append([CLS, *rng.integers(5, V, a), SEP, *rng.integers(5, V, b), SEP])
    return rows


def test_static_masking_statistics():
    rng, rows, results = random.Random(1), _random_rows(3000), []
    for row in rows:
        results.append(create_masked_lm_predictions(row, 0.15, 20, V, rng, never_mask=frozenset((CLS, SEP)),
                                                    mask_id=MASK))
    _check_masking(rows, *zip(*results), P=20)
    capped = [create_masked_lm_predictions(row, 0.5, 7, V, rng, never_mask=frozenset((CLS, SEP)), mask_id=MASK)
              for row in rows[:200]]
    assert max(len(p) for _, p, _ in capped) == 7


@pytest.mark.parametrize("wwm", [False, True])
def test_dynamic_masking_statistics(wwm):
    vocab = Vocab(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" if i % 3 else f"##w{i}" for i in range(5, V)])
    mask_fn = make_mask_fn(vocab, 0.15, 20, do_whole_word_mask=wwm, seed=3)
    rows = _random_rows(3000, seed=2)
    width = max(map(len, rows))
    batch = np.zeros((len(rows), width), np.int64)  # padded with [PAD] = 0 beyond each length
    lengths = np.array([len(r) for r in rows])
    for i, r in enumerate(rows):
        batch[i, :len(r)] = r
    out, positions, ids, counts = mask_fn(batch, lengths)
    assert (out[:, :][np.arange(width)[None, :] >= lengths[:, None]] == PAD).all()
    pos = [positions[i, :counts[i]] for i in range(len(rows))]
    _check_masking(rows, [o[:len(r)] for o, r in zip(out, rows)], pos, [ids[i, :counts[i]] for i in range(len(rows))],
                   P=20)
    if wwm:
        for r, p in zip(rows, pos):
            _assert_whole_words(r, set(p.tolist()), lambda i, r=r: vocab.id_to_token[r[i]].startswith("##"))
    again = mask_fn(batch, lengths)[1]
    assert not np.array_equal(again, positions)  # a fresh draw every call


def _words(tokens, continues, specials=(CLS, SEP)) -> list[list[int]]:
    """Position groups: a piece and the pieces right after it that continue it (specials end a word)."""
    words = []
    for i, t in enumerate(tokens):
        if t in specials:
            continue
        if continues(i) and words and words[-1][-1] == i - 1:
            words[-1].append(i)
        else:
            words.append([i])
    return words


def _assert_whole_words(tokens, chosen: set, continues, specials=(CLS, SEP)) -> int:
    """Each word is chosen whole or not at all; returns how many words of several pieces were chosen."""
    whole = 0
    for word in _words(tokens, continues, specials):
        assert len(chosen.intersection(word)) in (0, len(word)), (word, sorted(chosen), list(tokens))
        whole += len(word) > 1 and chosen.issuperset(word)
    return whole


def _unmasked(r, i):
    """(original ids, chosen positions) of stored instance i."""
    n = int(r["masked_lm_counts"][i])
    tokens = r["input_ids"][i, :r["lengths"][i]].astype(np.int64)
    positions = r["masked_lm_positions"][i, :n]
    tokens[positions] = r["masked_lm_ids"][i, :n]
    return tokens.tolist(), set(positions.tolist())


# -- whole-word masking on written data ------------------------------------------------------------

def test_whole_word_masking_never_splits_a_word(bert_vocab_path, tmp_path):
    corpus = real_corpus(tmp_path / "real.txt", lines=600)
    data = ours([corpus], bert_vocab_path, tmp_path / "out", do_whole_word_mask=True, max_seq_length=48,
                max_predictions_per_seq=12, dupe_factor=2)
    vocab = Vocab.load(bert_vocab_path)
    specials = (vocab.token_to_id["[CLS]"], vocab.token_to_id["[SEP]"])
    r, whole = data.rows(np.arange(len(data))), 0
    for i in range(len(data)):
        tokens, chosen = _unmasked(r, i)
        whole += _assert_whole_words(tokens, chosen, lambda p: vocab.id_to_token[tokens[p]].startswith("##"), specials)
    assert whole > 100


CHINESE = ["我们在北京大学学习自然语言处理", "今天天气很好我们去公园散步", "他喜欢阅读历史书籍和科学杂志",
           "这个城市的交通非常方便", "学生们正在准备期末考试", "研究人员发现了新的方法"]


def _chinese_lines(n=120, seed=0) -> list[str]:
    rng = random.Random(seed)
    return ["，".join(rng.sample(CHINESE, 2)) + "。" for _ in range(n)]


@pytest.fixture
def chinese_vocab(tmp_path):
    """A vocab of every character of CHINESE (bert-base-uncased's lacks common ones, like 我)."""
    chars = sorted(set("".join(CHINESE) + "，。"))
    path = tmp_path / "zh-vocab.txt"
    path.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *chars]) + "\n", encoding="utf-8")
    return str(path)


def _chinese_run(tmp_path, bert_vocab_path, lines, *flags):
    """One line per document, packed whole (full-sentences): between two specials of an instance
    lies exactly one line, so its words can be looked up by its pieces."""
    text = tmp_path / "zh.txt"
    text.write_text("\n\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    assert main(["create-pretraining-data", str(text), "--vocab", bert_vocab_path, "-o", str(out),
                 "--mode", "full-sentences", "--max-seq-length", "72", "--max-predictions-per-seq", "10",
                 "--dupe-factor", "4", "--workers", "1", *flags]) == 0
    return PretrainingData(str(out)), load_vocab_tokenizer(bert_vocab_path)


def _check_chinese_words(data, tokenizer, continues_of_line: dict):
    vocab = tokenizer.vocab
    specials = (vocab.token_to_id["[CLS]"], vocab.token_to_id["[SEP]"])
    r, whole = data.rows(np.arange(len(data))), 0
    for i in range(len(data)):
        tokens, chosen = _unmasked(r, i)
        flags, start = [False] * len(tokens), None
        for p, t in enumerate(tokens + [specials[1]]):
            if t in specials:
                if start is not None:
                    flags[start:p] = continues_of_line[tuple(tokens[start:p])]
                start = None
            elif start is None:
                start = p
        whole += _assert_whole_words(tokens, chosen, lambda p: flags[p], specials)
    assert whole > 50


def test_chinese_whole_word_masking_from_ref_file(chinese_vocab, tmp_path):
    bert_vocab_path = chinese_vocab
    tokenizer = load_vocab_tokenizer(bert_vocab_path)
    lines, refs, continues = _chinese_lines(), [], {}
    for line in lines:  # the reference: every second CJK character continues the one before it
        ids = tokenizer.tokenize_ids(line)
        assert tokenizer.unk_token_id not in ids and len(ids) == len(line)
        positions = [p + 1 for p in range(1, len(ids), 2) if is_chinese_char(ord(line[p])) and is_chinese_char(ord(line[p - 1]))]
        refs.append(json.dumps(positions))
        continues[tuple(ids)] = [p + 1 in positions for p in range(len(ids))]
    (tmp_path / "zh.ref").write_text("\n".join(refs) + "\n", encoding="utf-8")
    data, tokenizer = _chinese_run(tmp_path, bert_vocab_path, lines, "--chinese-ref", str(tmp_path / "zh.ref"))
    assert data.meta["settings"]["do_whole_word_mask"] and data.meta["settings"]["chinese_words"] == "ref"
    _check_chinese_words(data, tokenizer, continues)


def test_chinese_whole_word_masking_with_jieba(chinese_vocab, tmp_path):
    bert_vocab_path = chinese_vocab
    import jieba  # a required dependency: the test must run everywhere
    tokenizer = load_vocab_tokenizer(bert_vocab_path)
    lines, continues = _chinese_lines(), {}
    for line in lines:
        flags = []
        for word in jieba.lcut(line):
            chinese = len(word) > 1 and all(is_chinese_char(ord(c)) for c in word)
            flags += [chinese and k > 0 for k in range(len(word))]
        continues[tuple(tokenizer.tokenize_ids(line))] = flags
    data, tokenizer = _chinese_run(tmp_path, bert_vocab_path, lines, "--jieba")
    assert data.meta["settings"]["chinese_words"] == "jieba"
    _check_chinese_words(data, tokenizer, continues)


def test_jieba_masks_whole_words_of_a_sentence(tmp_path):
    """我爱中国，我们在北京大学学习自然语言处理。: jieba's words (中国, 北京大学, 自然语言, ...) are masked
    whole or not at all, over many draws, and every word of several characters is masked whole
    at least once."""
    from bertlab.pretraining.masking import jieba_continues
    line = "我爱中国，我们在北京大学学习自然语言处理。"
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *sorted(set(line))]) + "\n", encoding="utf-8")
    tokenizer = load_vocab_tokenizer(str(path))
    words = ["我", "爱", "中国", "，", "我们", "在", "北京大学", "学习", "自然语言", "处理", "。"]
    flags = jieba_continues(line, tokenizer)
    assert flags == [k > 0 for word in words for k in range(len(word))]  # jieba's default dictionary
    spans, start = [], 1  # piece positions of each word in [CLS] line [SEP]
    for word in words:
        spans.append(set(range(start, start + len(word))))
        start += len(word)
    ids = [tokenizer.cls_token_id, *tokenizer.tokenize_ids(line), tokenizer.sep_token_id]
    specials = frozenset(ids[i] for i in (0, -1))
    masked_whole = Counter()
    for seed in range(300):
        _, masked, labels = create_masked_lm_predictions(
            ids, 0.3, 8, len(tokenizer.vocab), random.Random(seed), never_mask=specials,
            mask_id=tokenizer.vocab.token_to_id["[MASK]"], continues=[False, *flags, False])
        assert labels == [ids[p] for p in masked]
        for word, span in zip(words, spans):
            assert span <= set(masked) or not span & set(masked), (word, masked)
            masked_whole[word] += span <= set(masked)
    assert all(masked_whole[w] > 0 for w in words if len(w) > 1), masked_whole


# -- RoBERTa's full sentences, dynamic masking ----------------------------------------------------

def _numbered_corpus(path, documents=30, seed=0) -> list[list[str]]:
    """Documents of 2-9 sentences, each unique ("doc 7 part 3 ...") and 3-12 real words long."""
    rng = random.Random(seed)
    with open(SUMMARIES, encoding="utf-8") as f:
        words = f.read(20000).split()
    docs = [[f"doc {d} part {j} " + " ".join(rng.sample(words, rng.randint(3, 12)))
             for j in range(rng.randint(2, 9))] for d in range(documents)]
    path.write_text("\n\n".join("\n".join(d) for d in docs) + "\n", encoding="utf-8")
    return docs


def test_full_sentences_packing_layout(bert_vocab_path, tmp_path):
    docs = _numbered_corpus(tmp_path / "docs.txt")
    tokenizer = load_vocab_tokenizer(bert_vocab_path)
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    where = {tuple(tokenizer.tokenize_ids(s)): (d, j) for d, doc in enumerate(docs) for j, s in enumerate(doc)}
    lengths = sorted({len(k) for k in where}, reverse=True)
    assert max(lengths) <= 62  # no sentence needs cutting
    data = ours([str(tmp_path / "docs.txt")], bert_vocab_path, tmp_path / "out", mode="full-sentences",
                max_seq_length=64, max_predictions_per_seq=8, dupe_factor=2)
    assert data.meta["nsp"] is False and data.meta["settings"]["mode"] == "full-sentences"
    r, used = data.rows(np.arange(len(data))), Counter()
    assert not r["next_sentence_labels"].any() and not r["segment_ids"].any()
    for i in range(len(data)):
        tokens, _ = _unmasked(r, i)
        assert tokens[0] == cls and tokens[-1] == sep and len(tokens) <= 64
        runs = [[]]
        p = 1
        while p < len(tokens) - 1:  # parse: whole sentences, or a [SEP] between documents
            if tokens[p] == sep:
                runs.append([])
                p += 1
                continue
            found = next(where[k] for n in lengths if (k := tuple(tokens[p:p + n])) in where)
            runs[-1].append(found)
            p += len(tokenizer.tokenize_ids(docs[found[0]][found[1]]))
        for k, run in enumerate(runs):
            assert run and all(d == run[0][0] for d, _ in run)  # a run is one document, in order
            assert [j for _, j in run] == list(range(run[0][1], run[0][1] + len(run)))
            if k > 0:
                assert run[0][1] == 0  # after a [SEP], a document starts
            if k < len(runs) - 1:
                assert run[-1][1] == len(docs[run[-1][0]]) - 1  # before a [SEP], it has ended
        used.update(s for run in runs for s in run)
    assert used == Counter({s: 2 for s in where.values()})  # every sentence, once per dupe
    assert len(data) < sum(map(len, docs))  # packed: several sentences per instance
    stats = data.meta["settings"]["stats"]
    assert stats["instances"] == len(data) and stats["tokens"] == r["lengths"].sum()


def test_dynamic_masking_stores_unmasked_instances(bert_vocab_path, tmp_path):
    corpus = real_corpus(tmp_path / "real.txt", lines=300)
    out = tmp_path / "out"
    assert main(["create-pretraining-data", corpus, "--vocab", bert_vocab_path, "-o", str(out), "--dynamic-masking",
                 "--do-whole-word-mask", "--max-seq-length", "64", "--workers", "1"]) == 0
    data = PretrainingData(str(out))
    assert data.dynamic and data.meta["settings"]["dupe_factor"] == 1
    mask_id = Vocab.load(bert_vocab_path).token_to_id["[MASK]"]
    assert not (data.rows(np.arange(len(data)))["input_ids"] == mask_id).any()
    with pytest.raises(ValueError, match="pass mask_fn"):
        data.batch([0, 1])
    mask_fn = mask_fn_for(data, seed=0)
    first, second = data.batch(np.arange(32), mask_fn), data.batch(np.arange(32), mask_fn)
    assert (first["input_ids"] == mask_id).any()
    assert not np.array_equal(first["masked_lm_positions"], second["masked_lm_positions"])
    weights = first["masked_lm_weights"].sum(1)
    assert (weights >= 1).all() and (weights <= 20).all()


# -- scale: chunks and workers ------------------------------------------------------------------------

def test_same_output_for_any_number_of_workers(bert_vocab_path, tmp_path):
    corpus = real_corpus(tmp_path / "real.txt", lines=500)
    runs = [ours([corpus], bert_vocab_path, tmp_path / f"out{w}", workers=w, chunk_docs=15, max_seq_length=48,
                 dupe_factor=2, do_whole_word_mask=True) for w in (1, 2)]
    one, two = (d.rows(np.arange(len(d))) for d in runs)
    assert len(runs[0]) == len(runs[1]) > 500
    for field in one:
        np.testing.assert_array_equal(one[field], two[field], err_msg=field)
    assert runs[0].meta["settings"]["stats"] == runs[1].meta["settings"]["stats"]
    # one chunk of the same documents draws differently (and equals google: see above)
    whole = ours([corpus], bert_vocab_path, tmp_path / "whole", chunk_docs=10_000, max_seq_length=48, dupe_factor=2,
                 do_whole_word_mask=True)
    assert not np.array_equal(whole.rows([0])["input_ids"], one["input_ids"][:1])


def test_an_interrupted_run_resumes_without_making_its_finished_shards_again(bert_vocab_path, tmp_path,
                                                                            monkeypatch):
    """Stopped after its sixth shard (any stop: the progress record is written atomically once a
    shard is), a run resumed with resume=True keeps those shards, does not tokenize the chunks they
    hold again, and ends with the rows and counts of a run never stopped."""
    from bertlab.pretraining import create, shards
    corpus = real_corpus(tmp_path / "real.txt", lines=500)
    settings = dict(chunk_docs=3, shard_size=40, seed=7)
    options = InstanceOptions(max_seq_length=48, dupe_factor=2)
    tokenizer = load_vocab_tokenizer(bert_vocab_path)
    create_pretraining_data([corpus], str(tmp_path / "whole"), tokenizer, options, **settings)
    whole = PretrainingData(str(tmp_path / "whole"))

    flush = shards.ShardWriter.flush
    def flush_then_stop(self):
        flush(self)
        if len(self.shards) == 6:
            raise KeyboardInterrupt
    monkeypatch.setattr(shards.ShardWriter, "flush", flush_then_stop)
    with pytest.raises(KeyboardInterrupt):
        create_pretraining_data([corpus], str(tmp_path / "cut"), tokenizer, options, **settings)
    monkeypatch.setattr(shards.ShardWriter, "flush", flush)
    assert not (tmp_path / "cut" / "meta.json").exists() and (tmp_path / "cut" / "progress.json").exists()
    record = json.loads((tmp_path / "cut" / "progress.json").read_text())
    processed = []
    process = create._process
    monkeypatch.setattr(create, "_process", lambda task: processed.append(task[0]) or process(task))
    with pytest.raises(ValueError, match="was started with other seed"):
        create_pretraining_data([corpus], str(tmp_path / "cut"), tokenizer, options, resume=True,
                                **{**settings, "seed": 8})
    create_pretraining_data([corpus], str(tmp_path / "cut"), tokenizer, options, resume=True, **settings)
    assert processed[0] == record["next_chunk"] > 0  # the finished shards' chunks were read past
    resumed = PretrainingData(str(tmp_path / "cut"))
    assert len(resumed) == len(whole) > 120
    one, two = (d.rows(np.arange(len(d))) for d in (whole, resumed))
    for field in one:
        np.testing.assert_array_equal(one[field], two[field], err_msg=field)
    assert resumed.meta["settings"]["stats"] == whole.meta["settings"]["stats"]
    assert not (tmp_path / "cut" / "progress.json").exists()
    with pytest.raises(ValueError, match="already complete"):
        create_pretraining_data([corpus], str(tmp_path / "cut"), tokenizer, options, resume=True, **settings)


# -- bad input ------------------------------------------------------------------------------------------

def run_cli(capsys, *args):
    code = main(["create-pretraining-data", *map(str, args), "--workers", "1"])
    out, err = capsys.readouterr()
    return code, out, err


def test_empty_documents_are_skipped_and_counted(bert_vocab_path, tmp_path, capsys):
    text = tmp_path / "t.txt"
    text.write_text("One sentence here.\nAnother one.\n\n\n\nA second document.\nIt goes on.\n\n"
                    "\x00\x01\n\x02\n\nThe third document.\nWith two lines.\n", encoding="utf-8")
    code, out, _ = run_cli(capsys, text, "--vocab", bert_vocab_path, "-o", tmp_path / "out", "--max-seq-length", "16")
    assert code == 0 and "empty, skipped: 3" in out  # two between three blank lines, one of control characters
    stats = PretrainingData(str(tmp_path / "out")).meta["settings"]["stats"]
    assert stats["empty_documents"] == 3 and stats["documents"] == 3 and stats["sentences"] == 6


def test_a_file_without_blank_lines_is_one_document_with_a_warning(bert_vocab_path, tmp_path, capsys):
    text = tmp_path / "flat.txt"
    text.write_text("".join(f"Line number {i} of a file without documents.\n" for i in range(20)), encoding="utf-8")
    code, _, err = run_cli(capsys, text, "--vocab", bert_vocab_path, "-o", tmp_path / "out")
    assert code == 0 and f"warning: {text} has no blank line, so its 20 lines are one document" in err


@pytest.mark.parametrize("mode", ["nsp", "full-sentences"])
def test_sentences_longer_than_an_instance_are_cut_and_counted(bert_vocab_path, tmp_path, capsys, mode):
    text = tmp_path / "long.txt"
    text.write_text("A short one.\n" + "word " * 300 + "\nAnother short one.\n\nSecond document.\nShort.\n",
                    encoding="utf-8")
    code, out, _ = run_cli(capsys, text, "--vocab", bert_vocab_path, "-o", tmp_path / "out", "--mode", mode,
                           "--max-seq-length", "32")
    data = PretrainingData(str(tmp_path / "out"))
    assert code == 0 and "sentences longer than an instance 1" in out
    assert data.meta["settings"]["stats"]["long_sentences"] == 1
    assert data.rows(np.arange(len(data)))["lengths"].max() == 32


def test_bytes_that_are_not_utf8(bert_vocab_path, tmp_path, capsys):
    text = tmp_path / "latin1.txt"
    text.write_bytes("A good line.\n\nCaf".encode() + b"\xe9 au lait \xff.\nMore text.\n")
    code, _, err = run_cli(capsys, text, "--vocab", bert_vocab_path, "-o", tmp_path / "out")
    assert code == 2 and f"{text}:3: not valid UTF-8 (byte 0xe9 at offset 17)" in err
    code, out, _ = run_cli(capsys, text, "--vocab", bert_vocab_path, "-o", tmp_path / "out", "--encoding-errors", "replace")
    assert code == 0 and "replaced by U+FFFD: 2" in out
    assert PretrainingData(str(tmp_path / "out")).meta["settings"]["stats"]["encoding_replacements"] == 2


@pytest.mark.parametrize("missing", ["[MASK]", "[CLS]", "[SEP]"])
def test_a_vocab_without_a_special_token(bert_vocab_path, tmp_path, capsys, missing):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("".join(t + "\n" for t in Vocab.load(bert_vocab_path).id_to_token if t != missing), encoding="utf-8")
    text = tmp_path / "t.txt"
    text.write_text("Some text.\nMore text.\n", encoding="utf-8")
    code, _, err = run_cli(capsys, text, "--vocab", vocab, "-o", tmp_path / "out")
    assert code == 2 and f"{vocab}: the vocabulary has no {missing} token" in err


def test_missing_files_and_refusals(bert_vocab_path, tmp_path, capsys):
    text = tmp_path / "t.txt"
    text.write_text("Some text.\nMore text.\n\nA second document.\nIts end.\n", encoding="utf-8")
    code, _, err = run_cli(capsys, tmp_path / "nope.txt", "--vocab", bert_vocab_path, "-o", tmp_path / "out")
    assert code == 2 and f"{tmp_path / 'nope.txt'}: no such file" in err
    code, _, err = run_cli(capsys, text, "--vocab", tmp_path / "no-vocab.txt", "-o", tmp_path / "out")
    assert code == 2 and "no-vocab.txt: no such vocabulary file" in err
    assert run_cli(capsys, text, "--vocab", bert_vocab_path, "-o", tmp_path / "out")[0] == 0
    code, _, err = run_cli(capsys, text, "--vocab", bert_vocab_path, "-o", tmp_path / "out")
    assert code == 2 and "already holds pretraining data; pass --overwrite" in err
    assert run_cli(capsys, text, "--vocab", bert_vocab_path, "-o", tmp_path / "out", "--overwrite")[0] == 0
    code, _, err = run_cli(capsys, text, "--vocab", bert_vocab_path, "-o", tmp_path / "o2", "--max-predictions-per-seq", "300")
    assert code == 2 and "max_predictions_per_seq 300: must be between 1 and 255" in err


def test_chinese_reference_errors(chinese_vocab, tmp_path, capsys):
    text = tmp_path / "zh.txt"
    text.write_text("我们在北京大学学习\n\n今天天气很好\n", encoding="utf-8")
    ref = tmp_path / "zh.ref"
    ref.write_text("[2, 5]\n", encoding="utf-8")
    code, _, err = run_cli(capsys, text, "--vocab", chinese_vocab, "-o", tmp_path / "a", "--chinese-ref", ref)
    assert code == 2 and f"{ref}: ends before {text}:3" in err
    ref.write_text("[2, 5]\n[2, 7]\n", encoding="utf-8")
    code, _, err = run_cli(capsys, text, "--vocab", chinese_vocab, "-o", tmp_path / "b", "--chinese-ref", ref)
    assert code == 2 and f"{ref}:2: position 7 is not one of the line's 6 pieces" in err
    ref.write_text("[2, 5]\n[2]\n[3]\n", encoding="utf-8")
    code, _, err = run_cli(capsys, text, "--vocab", chinese_vocab, "-o", tmp_path / "c", "--chinese-ref", ref)
    assert code == 2 and f"{ref}: has more lines than {text} has non-blank lines (2)" in err
    ref.write_text("[2, 5]\nnot json\n", encoding="utf-8")
    code, _, err = run_cli(capsys, text, "--vocab", chinese_vocab, "-o", tmp_path / "d", "--chinese-ref", ref)
    assert code == 2 and f"{ref}:2: not a JSON list" in err
    code, _, err = run_cli(capsys, text, "--vocab", chinese_vocab, "-o", tmp_path / "e", "--chinese-ref", ref,
                           "--dynamic-masking")
    assert code == 2 and "Chinese whole-word masking needs static masking" in err


def test_jieba_missing_is_a_clear_error(chinese_vocab, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "jieba", None)  # import jieba now raises ImportError
    text = tmp_path / "zh.txt"
    text.write_text("我们在北京大学学习\n", encoding="utf-8")
    code, _, err = run_cli(capsys, text, "--vocab", chinese_vocab, "-o", tmp_path / "out", "--jieba")
    assert code == 2 and "needs the jieba package" in err and "pip install 'jieba>=0.42'" in err


def test_rows_in_any_order_across_shards(tmp_path):
    """Training reads shuffled batches: each row read from its own shard, in the order asked (and
    repeats allowed), whatever shard boundaries the indices cross."""
    from pretraining_data import make_folders
    train, _, _ = make_folders(tmp_path, limit=600)
    data = PretrainingData(train)
    assert len(data.meta["shards"]) > 1
    order = np.concatenate([np.random.default_rng(0).permutation(len(data))[:150], [0, len(data) - 1, 0]])
    got = data.rows(order)
    sizes = [s["instances"] for s in data.meta["shards"]]
    where = [(s, i - sum(sizes[:s])) for i in order for s in [int(np.searchsorted(np.cumsum(sizes), i, "right"))]]
    for field, array in got.items():
        expected = np.stack([np.asarray(data.shards[s][field][j]) for s, j in where])
        np.testing.assert_array_equal(array, expected, err_msg=field)
