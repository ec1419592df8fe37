"""A real summarisation set from Debian's package index: each package's long description (the
source) and the one-line synopsis its maintainer wrote for it (the target). The labels are the
data's own structure: the first line of a deb822 ``Description`` field is the synopsis, the
indented lines after it the long description.

apt keeps the long descriptions in ``*_i18n_Translation-en*`` lists (bookworm's ``Packages`` lists
carry only the synopsis and an md5), which it fetches only when told to; the ``Packages`` lists give
each package's source package, so the split is by source: binaries of one source (foo, foo-data)
never straddle two splits. A long description whose first paragraph was seen before (its first
300 characters, e.g. a -data package repeating its program's) is dropped; so is a repeated synopsis.

``build_debian_synopses`` writes, per split (train, valid, test), line-aligned ``SPLIT.desc``
(the long description's first ``max_words`` words, paragraphs joined) and ``SPLIT.syn`` (the
synopsis), the input `bertlab unilm-train` and `bertlab translate-train --src desc --tgt syn`
read; ``test.lead``, the lead baseline (the description's first sentence cut to
``lead_words`` words); and ``stats.json``. The text is the package maintainers' (DFSG-free
licences, but each package's own): nothing of it is shipped with bertlab.
"""
import hashlib
import json
import os
from collections import Counter
from pathlib import Path

from ..io import atomic_write_text
from . import debian_zh
from .debian_zh import description_paragraphs, read_sections, split_of, stanzas
from .sentences import split_sentences

APT_LISTS = "/var/lib/apt/lists"
SPLITS = ("train", "valid", "test")
HOW_TO_FETCH = ("fetch them with: apt-get update -o Acquire::Languages=en (as root; add "
                "-o Dir::State::Lists=DIR, after mkdir -p DIR/partial, to keep them out of the system's lists)")


def find_lists(lists_dir=APT_LISTS) -> tuple[list[str], list[str]]:
    """(Translation-en files, Packages files) in apt's lists folder; an error saying how to fetch
    them when either is missing."""
    return debian_zh.find_lists(lists_dir, "en", ", where apt keeps the long descriptions", HOW_TO_FETCH,
                                "the source packages")


def read_descriptions(translation_files):
    """(package, md5, synopsis, paragraphs) of every English description, each package once."""
    from .english_corpus import _read_text
    seen = set()
    for path in translation_files:
        for t in stanzas(_read_text(Path(path))):
            field = t.get("Description-en")
            if field and t["Package"] not in seen:
                seen.add(t["Package"])
                synopsis, paragraphs = description_paragraphs(field)
                yield t["Package"], t.get("Description-md5", ""), synopsis, paragraphs


def lead_sentence(description: str, max_words: int) -> str:
    """The lead baseline: the description's first sentence, cut to max_words words."""
    sentences = split_sentences(description)
    return " ".join((sentences[0] if sentences else description).split()[:max_words])


def build_debian_synopses(out_dir, lists_dir=APT_LISTS, heldout_share: float = 0.05, max_words: int = 48,
                          lead_words: int = 10, max_train: int | None = None, max_test: int | None = None,
                          min_words: int = 8) -> dict:
    """Write the pairs (module docstring) to out_dir; return the stats. heldout_share: share of
    source packages for valid and for test, each; max_train / max_test: keep the first rows of
    train (and valid) / test, in a fixed order (by a hash of the package name), for CPU budgets."""
    translations, packages = find_lists(lists_dir)
    sources = {package: source for (package, _), (_, source) in read_sections(packages).items()}
    rows, drops, seen_text, seen_synopsis = {s: [] for s in SPLITS}, Counter(), set(), set()
    for package, _, synopsis, paragraphs in read_descriptions(translations):
        text = " ".join(paragraphs)
        words = text.split()
        if len(words) < min_words or len(synopsis.split()) < 2:
            drops["description or synopsis too short"] += 1
        elif "\t" in text + synopsis:
            drops["tab in the text"] += 1
        elif paragraphs[0][:300].lower() in seen_text or synopsis.lower() in seen_synopsis:
            drops["repeated description or synopsis"] += 1
        else:
            seen_text.add(paragraphs[0][:300].lower())
            seen_synopsis.add(synopsis.lower())
            split = split_of(sources.get(package, package), heldout_share)
            rows["valid" if split == "dev" else split].append((package, " ".join(words[:max_words]), synopsis))
    for split, limit in (("train", max_train), ("valid", max_train and max(1, max_train // 20)), ("test", max_test)):
        if limit:
            rows[split] = sorted(rows[split], key=lambda r: hashlib.sha1(r[0].encode()).hexdigest())[:limit]
    os.makedirs(out_dir, exist_ok=True)
    for split, items in rows.items():
        atomic_write_text(os.path.join(out_dir, f"{split}.desc"), "".join(d + "\n" for _, d, _ in items))
        atomic_write_text(os.path.join(out_dir, f"{split}.syn"), "".join(s + "\n" for _, _, s in items))
    atomic_write_text(os.path.join(out_dir, "test.lead"),
                      "".join(lead_sentence(d, lead_words) + "\n" for _, d, _ in rows["test"]))
    stats = {"inputs": {"translations": translations, "packages": packages},
             "rows": {s: len(r) for s, r in rows.items()}, "dropped": dict(drops),
             "settings": {"heldout_share": heldout_share, "max_words": max_words, "lead_words": lead_words,
                          "max_train": max_train, "max_test": max_test, "min_words": min_words}}
    atomic_write_text(os.path.join(out_dir, "stats.json"), json.dumps(stats, indent=1) + "\n")
    return stats
