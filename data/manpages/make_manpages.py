"""Build a real labelled data set from the manual pages installed on this machine: each page's
one-line NAME description ("ls - list directory contents") labelled with the manual section the page
lives in (1 user commands, 2 system calls, 3 library functions, 5 file formats,
7 overviews, 8 administration). The labels come from the data's own structure, not from us.

    python data/manpages/make_manpages.py OUT_DIR                 # every English page (gcloud's 16k
                                                                 # generated pages are left out)
    python data/manpages/make_manpages.py data/manpages --licensed-only --sections 237
        # what the repo ships: sections 2, 3 and 7 of pages under the Linux man-pages copyleft licence

Writes OUT_DIR/{train,dev,test}.tsv (columns: name, section, description) and stats.json. The split
is by a hash of the page name, so a page's aliases never straddle two splits and the split does not
depend on which other pages are installed.
"""
import argparse
import gzip
import hashlib
import json
import os
import re
import sys

SECTIONS = "123578"  # section 4 (devices) has too few pages here to learn from
TROFF_ESCAPES = [(r"\\f[BIRP]|\\f\(..|\\f\[[^\]]*\]", ""), (r"\\\(em|\\\(en", "-"), (r"\\-", "-"), (r"\\\(aq", "'"),
                 (r"\\\(lq|\\\(rq|\\\(dq", '"'), (r"\\&|\\:|\\/|\\,|\\%|\\c", ""), (r"\\ ", " "), (r"\\e", "\\\\"),
                 (r"\\\*\(lq|\\\*\(rq", '"'), (r"\\\*\[[^\]]*\]|\\\*.", ""), (r"\\s[-+]?\d", "")]


def page_text(path) -> str:
    with open(path, "rb") as f:
        data = f.read()
    if path.endswith(".gz"):
        data = gzip.decompress(data)
    return data.decode("utf-8", "replace")


def name_line(source: str) -> str | None:
    """The NAME section as one plain line: man(7) (`.SH NAME` then text) or mdoc(7) (`.Nm`/`.Nd`)."""
    m = re.search(r'^\.S[Hh]\s+"?NAME"?\s*$(.*?)^\.S[Hh]\s', source, re.M | re.S)
    if not m:
        return None
    body = m.group(1)
    if re.search(r"^\.Nd\s", body, re.M):  # mdoc: .Nm name ... .Nd description
        names = re.findall(r"^\.Nm\s+(\S+)", body, re.M)
        desc = re.search(r"^\.Nd\s+(.*)$", body, re.M).group(1)
        body = f"{', '.join(names)} - {desc}"
    else:
        body = " ".join(line for line in body.splitlines() if line.strip() and not line.startswith((".", "'")))
    for pattern, repl in TROFF_ESCAPES:
        body = re.sub(pattern, repl, body)
    return " ".join(body.split()) or None


def description(line: str) -> str | None:
    parts = re.split(r"\s+-+\s+", line, maxsplit=1)
    if len(parts) != 2:
        return None
    text = parts[1].strip().strip('"')
    return text if len(text) >= 8 else None


def licensed(source: str) -> bool:
    """Whether a page is under the Linux man-pages copyleft licence (its SPDX line, near the top),
    which lets the repo ship text made from it."""
    return "SPDX-License-Identifier: Linux-man-pages-copyleft" in source[:2000]


def split_of(name: str) -> str:
    h = int(hashlib.sha1(name.encode()).hexdigest(), 16) % 10
    return "test" if h == 0 else "dev" if h == 1 else "train"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out")
    parser.add_argument("--man-dir", default="/usr/share/man")
    parser.add_argument("--licensed-only", action="store_true")
    parser.add_argument("--sections", default=SECTIONS, help=f"which sections to keep (default {SECTIONS})")
    args = parser.parse_args()
    rows, seen, skipped = {"train": [], "dev": [], "test": []}, {}, {"no NAME line": 0, "duplicate": 0, "licence": 0}
    for section in args.sections:
        folder = os.path.join(args.man_dir, f"man{section}")
        for file in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
            path = os.path.join(folder, file)
            if file.startswith("gcloud") or os.path.islink(path):
                continue
            source = page_text(path)
            if args.licensed_only and not licensed(source):
                skipped["licence"] += 1
                continue
            line = name_line(source)
            text = line and description(line)
            if not text:
                skipped["no NAME line"] += 1
                continue
            if text.lower() in seen:  # the same one-liner twice (aliases, or in two sections)
                skipped["duplicate"] += 1
                continue
            seen[text.lower()] = section
            name = re.sub(r"\.\w+(\.gz)?$", "", file)
            rows[split_of(name)].append((name, section, text))
    os.makedirs(args.out, exist_ok=True)
    for split, items in rows.items():
        with open(os.path.join(args.out, f"{split}.tsv"), "w", encoding="utf-8") as f:
            f.write("name\tsection\tdescription\n")
            f.writelines(f"{n}\t{s}\t{t}\n" for n, s, t in items)
    stats = {split: {s: sum(1 for r in items if r[1] == s) for s in args.sections} for split, items in rows.items()}
    stats["skipped"] = skipped
    with open(os.path.join(args.out, "stats.json"), "w") as f:
        json.dump(stats, f, indent=1)
    print(json.dumps(stats), file=sys.stderr)


if __name__ == "__main__":
    main()
