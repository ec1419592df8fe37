"""bertlab's word2vec against gensim's C implementation: same corpus, same settings, same threads;
quality on WordSim-353 (Spearman) and the Google analogy questions (accuracy), both scored by
gensim's own evaluators on the vectors each side wrote, and training words/s.

    python benchmarks/bench_word2vec.py --english-corpus DIR [--words 10000000] [--architecture skipgram]
        [--epochs 5] [--seeds 3] [--threads 1] [--out /tmp/w2v-bench]

The corpus (built once into OUT/corpus.txt): the English Wikipedia excerpt that gensim's wheel ships
for its tests (enwiki-...-shortened.bz2, 206 articles, about 0.46M words, tokenized by gensim's
wikicorpus: lowercase letters), then the sentences of `bertlab data english-corpus`'s train.txt and
heldout.txt (package descriptions, manuals, /usr/share/doc) and the long descriptions of the
installed Python distributions, lowercased and cut to runs of letters, up to --words words in all. Rounds interleave: seed 1 gensim, seed 1 bertlab, seed 2 gensim, ... so
machine load falls on both alike. Speed is training words/s: corpus words x epochs over the
training seconds alone (gensim: its train() call on the corpus file, after build_vocab; bertlab:
the engine's train_seconds, after reading the file and counting the vocabulary); each side's whole
wall time, reading included, is printed beside it. --threads is gensim's `workers` and bertlab's
`--workers` (and torch's threads). The last line holds the means, the spread (max - min) over
seeds, and the ratio bertlab / gensim of training words/s.
"""
import argparse
import bz2
import json
import os
import re
import statistics
import time


def build_corpus(english_dir, words, path):
    from gensim.corpora.wikicorpus import extract_pages, filter_wiki, tokenize
    from gensim.test.utils import datapath
    lines, n = [], 0
    wiki = datapath("enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2")
    for _, text, _ in extract_pages(bz2.open(wiki)):
        for paragraph in filter_wiki(text).split("\n"):
            tokens = tokenize(paragraph, 1, 30, True)
            if len(tokens) > 3:
                lines.append(" ".join(tokens))
                n += len(tokens)
    wiki_words = n

    def documentation():
        """english-corpus's train and held-out sentences, then the long descriptions of the Python
        distributions installed here (PyPI's package pages: prose with some markup)."""
        for name in ("train.txt", "heldout.txt"):
            with open(os.path.join(english_dir, name), encoding="utf-8") as f:
                yield from f
        from importlib.metadata import distributions
        for dist in sorted(distributions(), key=lambda d: d.metadata["Name"] or ""):
            yield from (dist.metadata.get_payload() or dist.metadata["Description"] or "").splitlines()

    for line in documentation():
        tokens = re.findall(r"[a-z]+", line.lower())
        if len(tokens) > 3:
            lines.append(" ".join(tokens))
            n += len(tokens)
        if n >= words:
            break
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return {"words": n, "wiki_words": wiki_words, "lines": len(lines)}


def scores(keyed_vectors):
    from gensim.test.utils import datapath
    pearson, spearman, oov = keyed_vectors.evaluate_word_pairs(datapath("wordsim353.tsv"))
    accuracy, sections = keyed_vectors.evaluate_word_analogies(datapath("questions-words.txt"))
    answered = sum(len(s["correct"]) + len(s["incorrect"]) for s in sections if s["section"] == "Total accuracy")
    return {"wordsim_spearman": round(float(spearman.statistic), 4), "wordsim_oov_percent": round(oov, 1),
            "analogy_accuracy": round(float(accuracy), 4), "analogy_answered": answered}


def run_gensim(corpus, a, seed):
    from gensim.models import Word2Vec
    start = time.perf_counter()
    model = Word2Vec(sg=int(a.architecture == "skipgram"), vector_size=a.dim, window=a.window,
                     min_count=a.min_count, sample=a.sample, negative=a.negative, alpha=a.lr, min_alpha=1e-4,
                     epochs=a.epochs, workers=a.threads, seed=seed)
    model.build_vocab(corpus_file=corpus)
    train_start = time.perf_counter()
    model.train(corpus_file=corpus, total_words=model.corpus_total_words, total_examples=model.corpus_count,
                epochs=a.epochs)
    end = time.perf_counter()
    return {"seconds": round(end - start, 1), "train_seconds": round(end - train_start, 1), **scores(model.wv),
            "vocabulary": len(model.wv)}


def run_bertlab(corpus, a, seed, out):
    import torch
    from gensim.models import KeyedVectors

    from bertlab.word2vec.job import Word2VecSettings, train_word2vec
    torch.set_num_threads(a.threads)
    s = Word2VecSettings(out=out, architecture=a.architecture, dim=a.dim, window=a.window, min_count=a.min_count,
                         sample=a.sample, negative=a.negative, lr=a.lr, epochs=a.epochs, batch_size=a.batch_size,
                         workers=a.threads, seed=seed, device="cpu", progress=False)
    start = time.perf_counter()
    summary = train_word2vec(corpus, s, overwrite=True)
    seconds = time.perf_counter() - start
    vectors = KeyedVectors.load_word2vec_format(os.path.join(out, "vectors.txt"))  # gensim reads our file
    return {"seconds": round(seconds, 1), "train_seconds": summary["train_seconds"], **scores(vectors),
            "vocabulary": len(vectors)}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--english-corpus", required=True, help="a `bertlab data english-corpus` folder")
    p.add_argument("--words", type=int, default=10_000_000)
    p.add_argument("--architecture", choices=["skipgram", "cbow"], default="skipgram")
    p.add_argument("--dim", type=int, default=100)
    p.add_argument("--window", type=int, default=5)
    p.add_argument("--min-count", type=int, default=5)
    p.add_argument("--sample", type=float, default=1e-3)
    p.add_argument("--negative", type=int, default=5)
    p.add_argument("--lr", type=float, default=0.025)
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=10_000, help="bertlab: corpus words per step")
    p.add_argument("--sides", default="gensim,bertlab", help="which to train (a rerun of one side)")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", default="/tmp/w2v-bench")
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    corpus = os.path.join(a.out, "corpus.txt")
    info = build_corpus(a.english_corpus, a.words, corpus)
    print(json.dumps({"corpus": corpus, **info}), flush=True)
    sides = a.sides.split(",")
    rounds = {side: [] for side in sides}
    for seed in range(1, a.seeds + 1):
        if "gensim" in sides:
            rounds["gensim"].append(run_gensim(corpus, a, seed))
            print(json.dumps({"seed": seed, "gensim": rounds["gensim"][-1]}), flush=True)
        if "bertlab" in sides:
            rounds["bertlab"].append(run_bertlab(corpus, a, seed, os.path.join(a.out, f"bertlab-{seed}")))
            print(json.dumps({"seed": seed, "bertlab": rounds["bertlab"][-1]}), flush=True)
    if len(sides) < 2:
        return
    keys = ("seconds", "train_seconds", "wordsim_spearman", "analogy_accuracy")
    mean = {side: {k: round(statistics.mean(r[k] for r in runs), 4) for k in keys} for side, runs in rounds.items()}
    spread = {side: {k: round(max(r[k] for r in runs) - min(r[k] for r in runs), 4)
                     for k in ("wordsim_spearman", "analogy_accuracy")} for side, runs in rounds.items()}
    total = info["words"] * a.epochs
    for side in mean:
        mean[side]["words_per_s"] = round(total / mean[side]["train_seconds"])
    print(json.dumps({"architecture": a.architecture, "threads": a.threads, "epochs": a.epochs, "mean": mean,
                      "spread": spread,
                      "speed_ratio_bertlab_over_gensim": round(mean["bertlab"]["words_per_s"] / mean["gensim"]["words_per_s"], 3),
                      "wordsim_points_behind": round(100 * (mean["gensim"]["wordsim_spearman"] - mean["bertlab"]["wordsim_spearman"]), 2),
                      "analogy_points_behind": round(100 * (mean["gensim"]["analogy_accuracy"] - mean["bertlab"]["analogy_accuracy"]), 2)}))


if __name__ == "__main__":
    main()
