"""bertlab word2vec: train static word vectors (skip-gram or CBOW with negative sampling), query them
(neighbours, analogies), and set them beside BERT's contextual vectors (contrast)."""
import argparse
import json
import sys

from .args import add_run_arguments, flags_for, nonnegative_float, positive_int, word2vec_window

EXAMPLE = """examples:
  bertlab data english-corpus -o corpus --min-mb 0
  bertlab word2vec train corpus/train.txt -o runs/w2v --lowercase --epochs 5
  bertlab word2vec train corpus/train.txt -o runs/cbow --architecture cbow --dim 200 --window 8
  bertlab word2vec neighbours runs/w2v kernel
  bertlab word2vec analogy runs/w2v man king woman     # man : king :: woman : ?
  bertlab word2vec contrast runs/w2v --model minilm    # the notes' "it" and "bank" examples
  bertlab word2vec contrast runs/w2v --word bank --sentence "the bank of the river" --sentence "a bank loan"

train writes OUT/vectors.txt in the word2vec text format (gensim's KeyedVectors.load_word2vec_format
reads it), with metrics.jsonl, curves.png and summary.json; VECTORS is that file or its folder."""


def add_parser(subparsers):
    p = subparsers.add_parser("word2vec", help="train and query word2vec vectors; contrast them with BERT's",
                              description=__doc__, epilog=EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)

    t = sub.add_parser("train", help="skip-gram or CBOW with negative sampling on a text file",
                       description="Train word vectors: one sentence per line, words split on whitespace. "
                                   "gensim's defaults.", epilog=EXAMPLE,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    t.add_argument("corpus", help="text file, one sentence (or paragraph) per line")
    add_run_arguments(t.add_argument_group("run"), defaults=dict(
        batch_size=10_000, lr=0.025, max_steps=None, max_minutes=None, save_every=None, seed=0, device="cpu",
        resume=False), help={"batch_size": "corpus words per step (before subsampling); the rate is set once a step",
                             "lr": "starting learning rate (word2vec's alpha), decayed linearly to --min-alpha"})
    g = t.add_argument_group("word2vec")
    g.add_argument("--architecture", choices=["skipgram", "cbow"], default="skipgram",
                   help="skipgram: each context word predicts the word; cbow: the window's mean predicts it")
    g.add_argument("--dim", type=positive_int, default=100, help="vector size (default 100)")
    g.add_argument("--window", type=word2vec_window, default=5, help="largest window half-width, 1 to 1000 (default 5)")
    g.add_argument("--min-count", type=positive_int, default=5, help="drop words seen fewer times (default 5)")
    g.add_argument("--sample", type=nonnegative_float, default=1e-3, help="subsampling threshold, 0 for none (default 1e-3)")
    g.add_argument("--negative", type=positive_int, default=5, help="noise words per example (default 5)")
    g.add_argument("--epochs", type=positive_int, default=5, help="passes over the corpus (default 5)")
    g.add_argument("--min-alpha", type=nonnegative_float, default=1e-4, help="learning rate at the end (default 1e-4)")
    g.add_argument("--workers", type=positive_int, default=1,
                   help="CPU threads sharing the tables without locks, as gensim's workers (default 1: a run "
                        "repeats bit for bit; more are faster and not repeatable)")
    g.add_argument("--lowercase", action="store_true", help="lowercase the corpus first")
    g.add_argument("--overwrite", action="store_true", help="replace an earlier run in OUT")
    g.add_argument("--quiet", action="store_true", help="no progress bar")
    t.set_defaults(run=run_train)

    n = sub.add_parser("neighbours", aliases=["neighbors"], help="the nearest words by cosine similarity")
    n.add_argument("vectors", help="a word2vec text file, or a run folder holding vectors.txt")
    n.add_argument("words", nargs="+", metavar="WORD")
    n.add_argument("-k", type=positive_int, default=10, help="how many (default 10)")
    n.set_defaults(run=run_neighbours)

    a = sub.add_parser("analogy", help="a : b :: c : ? (the words nearest b - a + c)")
    a.add_argument("vectors", help="a word2vec text file, or a run folder holding vectors.txt")
    a.add_argument("a")
    a.add_argument("b")
    a.add_argument("c")
    a.add_argument("-k", type=positive_int, default=5, help="how many answers (default 5)")
    a.set_defaults(run=run_analogy)

    c = sub.add_parser("contrast", help="word2vec's one vector per word beside BERT's vector per occurrence",
                       description="For a word in several sentences: word2vec's similarity between its "
                                   "occurrences (always 1: one vector) beside a BERT model's (its last layer). "
                                   "Without --word: the notes' 'it' -> animal / street pair and 'bank' in "
                                   "two senses.")
    c.add_argument("vectors", help="a word2vec text file, or a run folder holding vectors.txt")
    c.add_argument("--model", default="minilm", help="a BERT folder or 'minilm' (default)")
    c.add_argument("--word", help="the word to follow (with --sentence, two or more)")
    c.add_argument("--sentence", action="append", default=[], help="a sentence holding the word (repeat)")
    c.add_argument("--partner", action="append", default=[],
                   help="another word of every sentence to measure the word against (repeat)")
    c.set_defaults(run=run_contrast)
    p.set_defaults(run=lambda args: p.print_help())


def run_train(args):
    from ..word2vec.job import Word2VecSettings, train_word2vec
    summary = train_word2vec(**flags_for(train_word2vec, args, s=Word2VecSettings(**flags_for(Word2VecSettings, args))))
    keys = ("vectors", "vocabulary", "corpus_words", "steps", "train_seconds", "words_per_s", "stopped_by_time")
    print(json.dumps({k: summary[k] for k in keys}), file=sys.stderr)


def run_neighbours(args):
    from ..inference.word_vectors import load_word2vec
    vectors = load_word2vec(args.vectors)
    for word in args.words:
        print(f"{word}: " + ", ".join(f"{w} {s:.3f}" for w, s in vectors.neighbours(word, args.k)))


def run_analogy(args):
    from ..inference.word_vectors import load_word2vec
    vectors = load_word2vec(args.vectors)
    answers = vectors.analogy(args.a, args.b, args.c, args.k)
    print(f"{args.a} : {args.b} :: {args.c} : " + ", ".join(f"{w} {s:.3f}" for w, s in answers))


def run_contrast(args):
    from ..inference.static_vs_contextual import contrast_vectors, report
    given = dict(model_dir=args.model, sentences=args.sentence, partners=args.partner)
    for c in contrast_vectors(**flags_for(contrast_vectors, args, **given)):
        print(report(c, args.model))
