"""TF-IDF + logistic regression on a train/dev/test .tsv split: the baseline a fine-tuned BERT is
read against (bench_finetune.py's approach: sublinear tf, C picked on dev from 1-1000, scored on test).

    python benchmarks/tfidf_classify.py --data DIR [--features char|jieba|words] [--text description --label section]

--features char: character 1-3-grams, the usual baseline for Chinese, which has no spaces between
words; jieba: jieba's words and word bigrams; words: whitespace words and bigrams (scikit-learn's
default tokenizer, bench_finetune.py's baseline for English). Prints one JSON line: the C chosen,
dev accuracy, test accuracy and macro-F1 (bertlab.finetune.metrics, as finetune reports them).
"""
import argparse
import csv
import json
import os

from bertlab.finetune import metrics


def read(path, text, label):
    with open(path, encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    return [r[text] for r in rows], [r[label] for r in rows]


def vectorizer(features):
    from sklearn.feature_extraction.text import TfidfVectorizer
    if features == "char":
        return TfidfVectorizer(analyzer="char", ngram_range=(1, 3), sublinear_tf=True)
    if features == "jieba":
        import jieba
        return TfidfVectorizer(tokenizer=lambda s: [w for w in jieba.lcut(s) if w.strip()], token_pattern=None,
                               lowercase=True, ngram_range=(1, 2), sublinear_tf=True)
    return TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True)


def tfidf_baseline(train, dev, test, features="char", cs=(1, 3, 10, 30, 100, 300, 1000)) -> dict:
    from sklearn.linear_model import LogisticRegression
    best = None
    for c in cs:  # C chosen on dev, as the fine-tuned models' best epoch is
        vec = vectorizer(features)
        clf = LogisticRegression(C=c, max_iter=5000).fit(vec.fit_transform(train[0]), train[1])
        dev_accuracy = metrics.accuracy(dev[1], clf.predict(vec.transform(dev[0])))
        if best is None or dev_accuracy > best["dev_accuracy"]:
            predicted = clf.predict(vec.transform(test[0]))
            best = {"features": features, "C": c, "dev_accuracy": dev_accuracy,
                    "test_accuracy": metrics.accuracy(test[1], predicted), "test_macro_f1": metrics.f1(test[1], predicted)}
    return best


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True, help="folder with train.tsv, dev.tsv, test.tsv")
    p.add_argument("--features", choices=("char", "jieba", "words"), default="char")
    p.add_argument("--text", default="description")
    p.add_argument("--label", default="section")
    args = p.parse_args()
    splits = [read(os.path.join(args.data, f"{s}.tsv"), args.text, args.label) for s in ("train", "dev", "test")]
    print(json.dumps(tfidf_baseline(*splits, features=args.features)))


if __name__ == "__main__":
    main()
