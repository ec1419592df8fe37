"""Build a real relation-extraction set from the Debian archive index on this machine: a sentence of
package A's description that mentions another package B, labelled with the relation A's control
fields state towards B -- Depends (with Pre-Depends), Recommends, Suggests, Conflicts (with
Breaks) or none. The labels come from the archive's structure, not from us.

    python data/debian-relations/make_relations.py OUT_DIR [--max-train N] [--max-dev N] [--max-test N]

Each example is `A: <sentence>` with A marked as the first entity and the mention of B as the
second, in the TACRED layout (OUT_DIR/{train,dev,test}.json: token, subj_start, subj_end,
obj_start, obj_end, relation) that `bertlab finetune --task relation` reads, and as marked text in
OUT_DIR/{split}.tsv (columns text, relation) for benchmarks/tfidf_classify.py. A mention is a word
of the sentence (punctuation stripped) that is the name of a package in the index, except names
that are among the descriptions' most frequent words ("the", "file", "make": --common-words).

Descriptions come from apt's Translation-en lists (`apt-get update -o Acquire::Languages=en` fetches
them; the Packages lists of this image hold synopses only) and /var/lib/dpkg/status. Packages of
one source package share descriptions, so the split is by a hash of the source name; "none"
examples are thinned to at most --none-ratio times the related ones of their split (hash-ordered).
"""
import argparse
import glob
import hashlib
import json
import os
import re
import subprocess
import sys
from collections import Counter

from bertlab.data.debian_zh import description_paragraphs, stanzas
from bertlab.data.sentences import split_sentences

APT_LISTS = "/var/lib/apt/lists"
RELATIONS = (("Depends", ("Pre-Depends", "Depends")), ("Recommends", ("Recommends",)),
             ("Suggests", ("Suggests",)), ("Conflicts", ("Conflicts", "Breaks")))
STRIP = "\"'()[]{}<>,.;:!?`*"


def read_index(path) -> str:
    if path.endswith(".lz4"):  # apt's own compression; lz4cat comes with apt's dependencies
        return subprocess.run(["lz4cat", path], check=True, capture_output=True).stdout.decode("utf-8", "replace")
    with open(path, "rb") as f:
        return f.read().decode("utf-8", "replace")


def related_names(field: str) -> set[str]:
    """Package names of a relation field: 'a (>= 1) | b, c:any [amd64]' -> {a, b, c}."""
    names = set()
    for alternative in re.split(r"[,|]", field or ""):
        name = alternative.strip().split(" ")[0].split(":")[0].split("(")[0]
        if name:
            names.add(name)
    return names


def relation(fields: dict, other: str) -> str:
    for label, keys in RELATIONS:
        if any(other in related_names(fields.get(k, "")) for k in keys):
            return label
    return "none"


def read_packages(lists_dir, status_file):
    """({name: control fields}, {name: long description}) from the Packages lists, Translation-en and dpkg status."""
    packages, descriptions = {}, {}
    for path in sorted(glob.glob(os.path.join(lists_dir, "*_Packages*"))):
        for p in stanzas(read_index(path)):
            packages.setdefault(p["Package"], p)
    for path in sorted(glob.glob(os.path.join(lists_dir, "*_i18n_Translation-en*"))):
        for p in stanzas(read_index(path)):
            descriptions.setdefault(p["Package"], p.get("Description-en", ""))
    if os.path.exists(status_file):
        for p in stanzas(read_index(status_file)):
            packages.setdefault(p["Package"], p)
            if "\n" in p.get("Description", ""):
                descriptions.setdefault(p["Package"], p["Description"])
    return packages, descriptions


def examples_of(name, fields, description, names):
    """Each (sentence words, mention index, label) of one package's description."""
    _, paragraphs = description_paragraphs(description)
    seen = set()
    for paragraph in paragraphs:
        for sentence in split_sentences(paragraph):
            words = sentence.split()
            if not 4 <= len(words) <= 40:  # short enough for 128 word pieces with the markers
                continue
            for i, word in enumerate(words):
                other = word.strip(STRIP)
                if other != name and other in names and other not in seen and len(other) > 1:
                    seen.add(other)  # one example per mentioned package and description
                    yield words, i, other, relation(fields, other)


def split_of(source: str) -> str:
    bucket = int(hashlib.sha1(source.encode()).hexdigest(), 16) % 100
    return "test" if bucket < 10 else "dev" if bucket < 20 else "train"


def hash_order(rows, salt: str):
    """A fixed shuffle; each use takes its own salt, as the rows one cut kept all have low hashes of its salt."""
    return sorted(rows, key=lambda r: hashlib.sha1((salt + json.dumps(r, sort_keys=True)).encode()).hexdigest())


def build(out_dir, lists_dir=APT_LISTS, status_file="/var/lib/dpkg/status", none_ratio=1.0, limits=None,
          common_words=1000):
    packages, descriptions = read_packages(lists_dir, status_file)
    if not descriptions:
        sys.exit(f"no long descriptions under {lists_dir}: run apt-get update -o Acquire::Languages=en")
    # Package names that are everyday words ("the", "an", "file", "make") would fill "none" with
    # trivial cases: a name among the descriptions' most frequent words is no candidate mention,
    # whatever A's fields say of it (the filter never looks at the label).
    frequent = Counter(w for d in descriptions.values() for w in {w.strip(STRIP).lower() for w in d.split()})
    common = {w for w, _ in frequent.most_common(common_words)}
    names = set(packages) - common
    rows = {"train": [], "dev": [], "test": []}
    for name in sorted(descriptions):
        fields = packages.get(name)
        if fields is None:
            continue
        split = split_of(fields.get("Source", name).split()[0])
        for words, i, other, label in examples_of(name, fields, descriptions[name], names):
            # "A : sentence": the subject is A (token 0), the object the mention, its punctuation split off
            before, after = words[i][:words[i].index(other)], words[i][words[i].index(other) + len(other):]
            token = [name, ":", *words[:i], *filter(None, (before, other, after)), *words[i + 1:]]
            at = 2 + i + bool(before)
            rows[split].append({"id": f"{name}/{other}", "token": token, "subj_start": 0, "subj_end": 0,
                                "obj_start": at, "obj_end": at, "relation": label})
    stats = {"packages": len(packages), "descriptions": len(descriptions), "none_ratio": none_ratio,
             "common_words_excluded": sorted(common & set(packages))[:50]}
    os.makedirs(out_dir, exist_ok=True)
    for split, items in rows.items():
        related = [r for r in items if r["relation"] != "none"]
        none = hash_order([r for r in items if r["relation"] == "none"], "none")[:int(none_ratio * len(related))]
        items = hash_order(related + none, "sample")[:(limits or {}).get(split)]
        stats[split] = dict(sorted(Counter(r["relation"] for r in items).items()))
        with open(os.path.join(out_dir, f"{split}.json"), "w", encoding="utf-8") as f:
            json.dump(items, f, indent=0, ensure_ascii=False)
        with open(os.path.join(out_dir, f"{split}.tsv"), "w", encoding="utf-8") as f:
            f.write("text\trelation\n")
            f.writelines(f"{marked(r)}\t{r['relation']}\n" for r in items)
    with open(os.path.join(out_dir, "stats.json"), "w", encoding="utf-8") as f:
        json.dump(stats, f, indent=1)
    return stats


def marked(r) -> str:
    words = list(r["token"])
    words[r["obj_start"]] = f"[E2] {words[r['obj_start']]} [/E2]"
    words[r["subj_start"]] = f"[E1] {words[r['subj_start']]} [/E1]"
    return " ".join(" ".join(words).split("\t"))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir")
    parser.add_argument("--lists", default=APT_LISTS, help="apt's lists folder (Packages and Translation-en)")
    parser.add_argument("--status", default="/var/lib/dpkg/status")
    parser.add_argument("--none-ratio", type=float, default=1.0, help="'none' examples per related one, at most")
    parser.add_argument("--common-words", type=int, default=1000,
                        help="package names among this many most frequent description words are not mentions")
    for split in ("train", "dev", "test"):
        parser.add_argument(f"--max-{split}", type=int, help=f"keep this many {split} examples (hash-ordered)")
    args = parser.parse_args()
    limits = {"train": args.max_train, "dev": args.max_dev, "test": args.max_test}
    print(json.dumps(build(args.out_dir, args.lists, args.status, args.none_ratio, limits, args.common_words)))


if __name__ == "__main__":
    main()
