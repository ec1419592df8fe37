"""Build a long-text labelled set from the manual pages installed on this machine: the text of each
page's DESCRIPTION section (often several hundred word pieces, longer than a 128-token input)
labelled with the manual section the page lives in (1 user commands, 2 system calls, 3 library
functions, 5 file formats, 7 overviews, 8 administration). docs/guide/finetune.md uses it to compare
truncating long inputs with reading them in sliding windows.

    python data/manpages/make_descriptions.py OUT_DIR [--train 50 --dev 20 --test 50 --max-words 400]

Each section contributes the same number of pages to each split (a fixed sample, ordered by a hash
of the page name, so the splits are disjoint and the same on every run). A description is kept once
(aliases share one), cut to its first --max-words words. Writes OUT_DIR/{train,dev,test}.tsv
(columns: name, section, description) and stats.json. Nothing is shipped: the pages come under many
licences, so the script rebuilds the set from whatever pages the machine has.
"""
import argparse
import hashlib
import json
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_manpages import SECTIONS, TROFF_ESCAPES, page_text  # noqa: E402

FONT_MACROS = re.compile(r"^\.(B|I|BR|RB|BI|IB|IR|RI|SM|SB)\s+(.*)$")  # man(7): text in a font
MDOC_TEXT = re.compile(r"^\.(Nm|Ar|Fl|Xr|Va|Fn|Fa|Dv|Er|Ev|Pa|Cm|Sy|Em|Li|Dq|Sq|Ql|Pq)\s+(.*)$")  # mdoc(7)


def description_text(source: str) -> str | None:
    """The DESCRIPTION section as plain text: font macros keep their words, other requests go."""
    m = re.search(r'^\.S[Hh]\s+"?DESCRIPTION"?\s*$(.*?)(?=^\.S[Hh]\s|\Z)', source, re.M | re.S)
    if not m:
        return None
    lines = []
    for line in m.group(1).splitlines():
        macro = FONT_MACROS.match(line) or MDOC_TEXT.match(line)
        if macro:
            line = " ".join(word.strip('"') for word in re.findall(r'"[^"]*"|\S+', macro.group(2)))
        elif line.startswith((".", "'")):
            continue
        lines.append(line)
    text = " ".join(lines)
    for pattern, repl in [*TROFF_ESCAPES, (r"\\m\[[^\]]*\]", "")]:  # \m[blue]: a colour
        text = re.sub(pattern, repl, text)
    return " ".join(text.split()) or None


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out")
    parser.add_argument("--man-dir", default="/usr/share/man")
    parser.add_argument("--train", type=int, default=50, help="pages per section in train.tsv (50)")
    parser.add_argument("--dev", type=int, default=20, help="pages per section in dev.tsv (20)")
    parser.add_argument("--test", type=int, default=50, help="pages per section in test.tsv (50)")
    parser.add_argument("--max-words", type=int, default=400, help="keep a description's first N words (400)")
    args = parser.parse_args()
    rows, seen = {"train": [], "dev": [], "test": []}, set()
    for section in SECTIONS:
        folder = os.path.join(args.man_dir, f"man{section}")
        pages = []
        for file in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
            path = os.path.join(folder, file)
            if file.startswith("gcloud") or os.path.islink(path):  # gcloud's 16k generated pages
                continue
            text = description_text(page_text(path))
            if not text or len(text.split()) < 8 or text.lower() in seen:
                continue
            seen.add(text.lower())
            name = re.sub(r"\.\w+(\.gz)?$", "", file)
            pages.append((name, section, " ".join(text.split()[:args.max_words])))
        pages.sort(key=lambda p: hashlib.sha1(p[0].encode()).hexdigest())
        bounds = {"test": (0, args.test), "dev": (args.test, args.test + args.dev),
                  "train": (args.test + args.dev, args.test + args.dev + args.train)}
        for split, (start, stop) in bounds.items():
            rows[split] += pages[start:stop]
    os.makedirs(args.out, exist_ok=True)
    stats = {}
    for split, items in rows.items():
        with open(os.path.join(args.out, f"{split}.tsv"), "w", encoding="utf-8") as f:
            f.write("name\tsection\tdescription\n")
            f.writelines(f"{n}\t{s}\t{t}\n" for n, s, t in items)
        stats[split] = {"rows": len(items), "per_section": {s: sum(r[1] == s for r in items) for s in SECTIONS},
                        "median_words": statistics.median(len(r[2].split()) for r in items) if items else 0}
    with open(os.path.join(args.out, "stats.json"), "w") as f:
        json.dump(stats, f, indent=1)
    print(json.dumps(stats), file=sys.stderr)


if __name__ == "__main__":
    main()
