"""Real Chinese text and a real labelled Chinese set from Debian's package index.

Debian's translators (the DDTP) write Chinese package descriptions; apt keeps them in
``/var/lib/apt/lists/*_i18n_Translation-zh%5fCN*`` when it is told to fetch them
(``apt-get update -o Acquire::Languages=zh_CN``). Each entry names a package and the md5 of the
English description it translates; the same pair (``Package``, ``Description-md5``) in apt's
``*_Packages*`` lists gives the package's archive **Section** (games, net, libs, ...) and source
package. So every translated description comes with a label its maintainers chose, not us.

``build_debian_zh`` writes:

* ``train.txt`` / ``heldout.txt``: a pretraining corpus in create_pretraining_data's format (one
  sentence per line, a blank line between documents); a document is one package's description
  (the synopsis, then its sentences, cut at 。！？；). Held-out text is the descriptions of the
  dev and test packages, so neither pretraining nor its held-out accuracy sees what the classifier
  is tested on. With ``locale_dir``, the installed zh_CN gettext catalogs' translations join
  ``train.txt`` (one document per catalog, one message a line).
* ``train.tsv`` / ``dev.tsv`` / ``test.tsv`` (columns package, section, description): the
  translated description (synopsis and body on one line) labelled with its section. Sections with
  fewer than ``min_per_section`` training descriptions are left out (counted), so every label of
  dev and test is learnable. The split is by a hash of the
  *source* package, so binaries of one source (foo, foo-data) never straddle two splits; a
  description repeated word for word is kept once.
* ``stats.json``: the input files read, rows per split and section, and everything dropped, by reason.

The text is the translators' and the packages' (DFSG-free licences); nothing is shipped with
bertlab beyond a hand-written test fixture.
"""
from __future__ import annotations

import glob
import hashlib
import json
import os
import re
from collections import Counter
from pathlib import Path

from ..io import atomic_write_text
from ..tokenization import is_chinese_char

APT_LISTS = "/var/lib/apt/lists"
SPLITS = ("train", "dev", "test")
TSV_COLUMNS = ("package", "section", "description")
HOW_TO_FETCH = ("fetch them with: sudo apt-get update -o Acquire::Languages=zh_CN "
                "(or put 'Acquire::Languages { \"en\"; \"zh_CN\"; };' in /etc/apt/apt.conf.d/)")
SENTENCE_END = re.compile(r"(?<=[。！？；])")


def find_lists(lists_dir=APT_LISTS, language="zh_CN", why_missing=" (apt fetches none unless asked)",
               how_to_fetch=HOW_TO_FETCH, packages_for="the sections") -> tuple[list[str], list[str]]:
    """(Translation files of `language`, Packages files) in apt's lists folder, sorted; an error that
    says how to fetch them when either is missing. debian_synopses asks for "en"."""
    if not os.path.isdir(lists_dir):
        raise ValueError(f"{lists_dir}: no such folder (apt's package lists); {how_to_fetch}")
    pattern = f"*_i18n_Translation-{language.replace('_', '*')}*"  # apt writes zh_CN as zh%5fCN
    translations = sorted(p for p in glob.glob(os.path.join(lists_dir, pattern))
                          if not p.endswith(".diff") and os.path.isfile(p))
    packages = sorted(p for p in glob.glob(os.path.join(lists_dir, "*_Packages*")) if os.path.isfile(p))
    if not translations:
        raise ValueError(f"{lists_dir}: holds no Translation-{language} list{why_missing}; {how_to_fetch}")
    if not packages:
        raise ValueError(f"{lists_dir}: holds no Packages list to take {packages_for} from; run apt-get update")
    return translations, packages


def stanzas(text: str):
    """Each entry's fields (deb822: 'Field: value', continuation lines start with a space)."""
    for block in text.split("\n\n"):
        fields, key = {}, None
        for line in block.splitlines():
            if line.startswith((" ", "\t")) and key:
                fields[key] += "\n" + line
            elif ":" in line:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
        if "Package" in fields:
            yield fields


def _joins_without_space(left: str, right: str) -> bool:
    """Chinese lines are wrapped inside words ("经济" across a line end): no space between two CJK
    characters or CJK punctuation."""
    def cjk(c):
        return is_chinese_char(ord(c)) or "\u3000" <= c <= "\u303f" or "\uff00" <= c <= "\uffef"
    return cjk(left[-1]) or cjk(right[0])


def description_paragraphs(field: str) -> tuple[str, list[str]]:
    """(synopsis, paragraphs) of a Description field: ' .' separates paragraphs; wrapped lines
    rejoin (without a space between Chinese characters)."""
    first, *body = field.split("\n")
    paragraphs, current = [], ""
    for line in body:
        line = line.strip()
        if line in (".", ""):
            paragraphs.append(current)
            current = ""
        elif current:
            current += ("" if _joins_without_space(current, line) else " ") + line
        else:
            current = line
    paragraphs.append(current)
    clean = [" ".join(p.split()) for p in paragraphs]
    return " ".join(first.split()), [p for p in clean if p]


def split_sentences_zh(paragraph: str) -> list[str]:
    return [s.strip() for s in SENTENCE_END.split(paragraph) if s.strip()]


def split_of(source: str, heldout_share: float) -> str:
    """test for the first share of hash buckets, dev for the next, else train."""
    bucket = int(hashlib.sha1(source.encode("utf-8")).hexdigest(), 16) % 1000 / 1000
    return "test" if bucket < heldout_share else "dev" if bucket < 2 * heldout_share else "train"


def read_sections(packages_files) -> dict[tuple[str, str], tuple[str, str]]:
    """(package, description md5) -> (section, source package) from apt's Packages lists; the
    first list (sorted by name) that has a pair gives it."""
    from .english_corpus import _read_text
    info = {}
    for path in packages_files:
        for p in stanzas(_read_text(Path(path))):
            key = (p["Package"], p.get("Description-md5", ""))
            if key not in info:
                section = p.get("Section", "").split("/")[-1]  # contrib/net -> net
                source = p.get("Source", p["Package"]).split()[0]  # "foo (1.2)" -> foo
                info[key] = (section, source)
    return info


def read_translations(translation_files):
    """(package, md5, synopsis, paragraphs) of every zh_CN description, each package once."""
    from .english_corpus import _read_text
    seen = set()
    for path in translation_files:
        for t in stanzas(_read_text(Path(path))):
            field = t.get("Description-zh_CN")
            key = (t["Package"], t.get("Description-md5", ""))
            if field and key not in seen:
                seen.add(key)
                yield key + description_paragraphs(field)


def gettext_documents(locale_dir, lang: str = "zh_CN") -> list[tuple[str, list[str]]]:
    """(catalog, translated messages) of the installed LANG catalogs, by gettext_corpus's rules."""
    from .gettext_corpus import catalog_pairs, find_catalogs
    stats, seen, documents = Counter(), set(), []
    for path in find_catalogs(locale_dir, lang):
        lines = [target for _, target in catalog_pairs(path, stats, seen)]
        if lines:
            documents.append((str(path), lines))
    return documents


def build_debian_zh(out_dir, lists_dir=APT_LISTS, heldout_share: float = 0.15, min_per_section: int = 15,
                    locale_dir=None) -> dict:
    """Write the corpus, the labelled set and stats.json to out_dir (see the module docstring);
    return the stats."""
    if not 0 < heldout_share < 0.5:
        raise ValueError(f"heldout_share {heldout_share}: must be more than 0 and less than 0.5")
    translations, packages = find_lists(lists_dir)
    sections = read_sections(packages)
    drops, rows, documents = Counter(), [], {split: [] for split in SPLITS}
    seen_text = set()
    for package, md5, synopsis, paragraphs in read_translations(translations):
        if (package, md5) not in sections:
            drops["no Packages entry with that description md5"] += 1
            continue
        section, source = sections[package, md5]
        split = split_of(source, heldout_share)
        text = " ".join([synopsis] + paragraphs)
        if text in seen_text:
            drops["description repeated word for word"] += 1
            continue
        seen_text.add(text)
        sentences = [synopsis] + [s for p in paragraphs for s in split_sentences_zh(p)]
        documents[split].append([s for s in sentences if s])
        if "\t" in text or not text:
            drops["empty or holds a tab"] += 1
            continue
        rows.append((split, package, section, text))
    if not rows:
        raise ValueError(f"none of the descriptions in {', '.join(translations)} matches a package in "
                         f"{', '.join(packages)} (package name and description md5); are they from the same suite?")
    in_train = Counter(section for split, _, section, _ in rows if split == "train")
    kept = {s for s, n in in_train.items() if n >= min_per_section and s}
    labelled = {split: [] for split in SPLITS}
    for split, package, section, text in rows:
        if section in kept:
            labelled[split].append((package, section, text))
        else:
            drops[f"section with fewer than {min_per_section} training descriptions"] += 1
    os.makedirs(out_dir, exist_ok=True)
    for split in SPLITS:
        atomic_write_text(os.path.join(out_dir, f"{split}.tsv"),
                          "\t".join(TSV_COLUMNS) + "\n" + "".join("\t".join(r) + "\n" for r in labelled[split]))
    extra = gettext_documents(locale_dir) if locale_dir else []
    corpus = {"train.txt": documents["train"] + [lines for _, lines in extra],
              "heldout.txt": documents["dev"] + documents["test"]}
    for name, docs in corpus.items():
        atomic_write_text(os.path.join(out_dir, name), "\n\n".join("\n".join(d) for d in docs) + "\n")
    stats = {
        "inputs": {"translations": translations, "packages": packages,
                   "gettext_catalogs": [name for name, _ in extra]},
        "descriptions": len(rows),
        "corpus": {name: {"documents": len(docs), "sentences": sum(map(len, docs)),
                          "characters": sum(len(s) for d in docs for s in d)} for name, docs in corpus.items()},
        "rows": {split: len(labelled[split]) for split in SPLITS},
        "sections": {s: {split: sum(r[1] == s for r in labelled[split]) for split in SPLITS} for s in sorted(kept)},
        "dropped": dict(sorted(drops.items())),
        "settings": {"heldout_share": heldout_share, "min_per_section": min_per_section,
                     "split": "sha1(source package) per mille: test < share <= dev < 2 share <= train"},
    }
    atomic_write_text(os.path.join(out_dir, "stats.json"), json.dumps(stats, indent=2, ensure_ascii=False) + "\n")
    return stats
