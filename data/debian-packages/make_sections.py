"""Build a real labelled data set from the Debian package index on this machine: each package's
one-line synopsis ("Description:" first line, e.g. "multiplayer tank battle game") labelled with the
archive section its maintainers filed it under (games, sound, graphics, science, ...). The labels
come from the data's own structure, not from us.

    python data/debian-packages/make_sections.py OUT_DIR [--packages FILE]

FILE defaults to apt's index of the main archive (/var/lib/apt/lists/*_Packages[.lz4|.gz|.xz]).
Only the application sections are kept -- the ones a synopsis has to be *understood* to place;
language and library sections (python, perl, libs, libdevel, ...) are left out because the package
name or a single keyword gives them away. Split packages of one source (foo, foo-gtk) share
synopses, so the split is by a hash of the source package name: a source never straddles two
splits. Debug, documentation, development and data/common companion packages are left out, and a
synopsis is kept only once.

`--max-train N` / `--max-dev N` keep a fixed sample (ordered by a hash of the package name) for
runs that must fit a CPU budget; the test split is always whole.

Writes OUT_DIR/{train,dev,test}.tsv (columns: package, section, description) and stats.json.
"""
import argparse
import glob
import gzip
import hashlib
import json
import lzma
import os
import subprocess
import sys
from collections import Counter

from bertlab.data.debian_zh import stanzas  # deb822 fields, one parser for both Debian sets

SECTIONS = ["admin", "database", "editors", "electronics", "games", "graphics", "hamradio", "mail", "math",
            "net", "science", "sound", "text", "video", "web"]
COMPANIONS = ("-dbg", "-dbgsym", "-doc", "-dev", "-data", "-common")
APT_LISTS = "/var/lib/apt/lists"


def read_index(path) -> str:
    if path.endswith(".lz4"):  # apt's own compression; the lz4 tool comes with apt's dependencies
        return subprocess.run(["lz4cat", path], check=True, capture_output=True).stdout.decode("utf-8", "replace")
    opener = gzip.open if path.endswith(".gz") else lzma.open if path.endswith(".xz") else open
    with opener(path, "rb") as f:
        return f.read().decode("utf-8", "replace")


def split_of(source: str) -> str:
    bucket = int(hashlib.sha1(source.encode()).hexdigest(), 16) % 100
    return "test" if bucket < 10 else "dev" if bucket < 20 else "train"


def build(packages_file, out_dir, max_train=None, max_dev=None):
    rows, seen, skipped = {"train": [], "dev": [], "test": []}, set(), Counter()
    for p in stanzas(read_index(packages_file)):
        section = p.get("Section", "").split("/")[-1]
        if section not in SECTIONS:
            continue
        name = p["Package"]
        synopsis = " ".join(p.get("Description", "").split("\n")[0].split())
        if name.endswith(COMPANIONS):
            skipped["companion package"] += 1
            continue
        if len(synopsis) < 8 or "\t" in synopsis:
            skipped["no usable synopsis"] += 1
            continue
        if synopsis.lower() in seen:
            skipped["duplicate synopsis"] += 1
            continue
        seen.add(synopsis.lower())
        source = p.get("Source", name).split()[0]
        rows[split_of(source)].append((name, section, synopsis))
    for split, limit in (("train", max_train), ("dev", max_dev)):
        if limit:  # a hash-ordered sample: deterministic, and the same rows whatever the limit's neighbours
            rows[split] = sorted(rows[split], key=lambda r: hashlib.sha1(r[0].encode()).hexdigest())[:limit]
    os.makedirs(out_dir, exist_ok=True)
    stats = {"packages_file": packages_file, "sections": SECTIONS, "skipped": dict(skipped),
             "max_train": max_train, "max_dev": max_dev}
    for split, items in rows.items():
        items.sort()
        with open(os.path.join(out_dir, f"{split}.tsv"), "w", encoding="utf-8") as f:
            f.write("package\tsection\tdescription\n")
            f.writelines(f"{n}\t{s}\t{d}\n" for n, s, d in items)
        stats[split] = dict(sorted(Counter(s for _, s, _ in items).items()))
        stats[f"{split}_rows"] = len(items)
    with open(os.path.join(out_dir, "stats.json"), "w", encoding="utf-8") as f:
        json.dump(stats, f, indent=1)
    return stats


def default_index() -> str:
    found = sorted(glob.glob(os.path.join(APT_LISTS, "*_main_binary-*_Packages*")))
    if not found:
        sys.exit(f"no Packages index under {APT_LISTS}; pass --packages FILE")
    return found[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir")
    parser.add_argument("--packages", help="a Debian Packages index (plain, .gz, .xz or .lz4)")
    parser.add_argument("--max-train", type=int, help="keep this many training rows (a fixed hash-ordered sample)")
    parser.add_argument("--max-dev", type=int, help="keep this many dev rows")
    args = parser.parse_args()
    stats = build(args.packages or default_index(), args.out_dir, args.max_train, args.max_dev)
    print(json.dumps({k: v for k, v in stats.items() if k.endswith("_rows") or k == "skipped"}))


if __name__ == "__main__":
    main()
