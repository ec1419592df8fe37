"""A parallel corpus (English -> LANG) from the gettext catalogs installed on this machine.

Each catalog ``LOCALE_DIR/LANG/LC_MESSAGES/DOMAIN.mo`` (or ``.po``) pairs English source strings
(msgid) with a human translation (msgstr). ``build_gettext_corpus`` turns them into line-aligned
``{train,valid,test}.{en,LANG}`` files and a ``stats.json`` that counts every pair it dropped, by
reason. The rules, and why:

* **Plurals.** The singular msgid pairs with msgstr[0]. The msgid_plural pairs with the form the
  catalog's own ``Plural-Forms`` formula picks for most counts from 2 to 100 -- the counts for which
  English says the plural: form 1 in German, form 0 in Chinese (one form only), the "many" form in
  Russian. Without a formula, gettext's default (n != 1) holds.
* **Contexts** (msgctxt) only tell the program which "Open" is meant: the pair is kept, the context
  is dropped, and identical pairs are kept once.
* **Whitespace** runs collapse to one space. Wrapped prose ("...not connected to\\nany of your
  branches") is joined into one line; text laid out in lines -- a blank line or an indented line
  inside it (usage screens, option tables) -- is dropped as ``multiline_layout``: such a block is not a
  sentence and its line breaks carry meaning.
* **Access keys** (``_File``, ``&Save``; in CJK translations ``文件(_F)``) are stripped on both sides,
  so "File" and "Datei" pair, not "_File" and "_Datei". A marker counts only before a letter or digit
  and not inside a word, so ``NOTES_MERGE``, ``AT&T`` and ``&amp;`` are left alone.
* **Dropped**: fuzzy and obsolete entries (.po), untranslated ones, pairs with no letter on a side
  once format specifiers are removed (``%s: %s``, ``{0}``, ``%d%%``), and translations identical to
  the source (often a legitimate name, but nothing to learn from).
* **Split by catalog** so a program's strings never straddle train and test (its strings share
  vocabulary and phrasing). Catalogs are visited in the order of a hash of their domain name and
  given to test, then valid, while a catalog brings the split closer to ``heldout_share`` of the
  pairs. The split depends only on the catalogs' names and pair counts, so it is the same on every
  run. A pair repeated across catalogs is kept by the first (sorted by name) only, before splitting,
  and a valid/test pair whose English also occurs in an earlier split is dropped
  (``source_in_earlier_split``), so held-out sources are unseen. iso-codes' catalogs (``iso_*``:
  names of languages, countries, currencies) stay in train: test measures messages, not name lists.
"""

from __future__ import annotations

import gettext
import hashlib
import json
import os
from collections import Counter
from pathlib import Path

import regex

from ..io import atomic_write, atomic_write_text
from .local_text import LOCALE_DIR, catalogs_by_language

SPLITS = ("train", "valid", "test")

# printf (%s, %-5.2lf, %1$s, %%), Python %(name)s, Qt %1, brace fields {0} {name:>8}, shell ${x}
FORMAT_SPEC = regex.compile(
    r"%(?:\d+\$)?[-+ #0']*(?:\*|\d+)?(?:\.(?:\*|\d+))?(?:hh|h|ll|l|L|q|j|z|Z|t|I64|I32)?[diouxXeEfFgGaAcCsSpnm%]"
    r"|%\(\w+\)[-+ #0]*\d*(?:\.\d+)?[sdirfgx]|%\d|\{[\w.]*(?:[:!][^{}]*)?\}|\$\{\w+\}")
LETTER = regex.compile(r"\p{L}")
# "_File", "&Save": a marker before a word, not inside one; not an identifier's underscore
# (_open_osfhandle, _POSIX2_X, `_at_`, *_tz, x/_y, _sym@nn) nor an entity (&amp;)
ACCESS_KEY = regex.compile(r"(?<![\p{L}\p{N}_&/*`'])(?:_|&(?![\p{L}\p{N}#]+;))"
                           r"(?=[\p{L}\p{N}]++(?![_@]|\.[\p{L}_]))")
# "文件(_F)", "打开（&O）": the CJK form, the key letter in brackets after the word
CJK_ACCESS_KEY = regex.compile(r"\s*[(（][_&][\p{L}\p{N}][)）]")
LAYOUT = regex.compile(r"\n\s*\n|\n[ \t]")
# iso-codes' catalogs: names of languages, countries, currencies, scripts -- not sentences
NAME_LISTS = regex.compile(r"iso_")


def plural_index(plural_forms: str | None) -> int:
    """The msgstr_plural index that translates English's plural (see the module docstring)."""
    match = regex.search(r"plural\s*=\s*([^;]+)", plural_forms or "")
    try:
        pick = gettext.c2py(match.group(1)) if match else (lambda n: int(n != 1))
    except (ValueError, SyntaxError):
        pick = lambda n: int(n != 1)  # noqa: E731 -- a malformed header: gettext's default
    return Counter(pick(n) for n in range(2, 101)).most_common(1)[0][0]


def strip_access_keys(text: str) -> str:
    return ACCESS_KEY.sub("", CJK_ACCESS_KEY.sub("", text))


def clean(text: str) -> tuple[str | None, str]:
    """(one normalised line or None, what happened: "" or a drop reason or "joined")."""
    text = text.strip()
    if not text:
        return None, "empty"
    if LAYOUT.search(text):
        return None, "multiline_layout"
    joined = "\n" in text
    text = " ".join(strip_access_keys(text).split())
    if not LETTER.search(FORMAT_SPEC.sub("", text)):
        return None, "no_letters"
    return text, "joined" if joined else ""


def entry_pairs(entry, plural: int) -> list[tuple[str, str]]:
    """The raw (English, translation) pairs of one catalog entry."""
    if not entry.msgid_plural:
        return [(entry.msgid, entry.msgstr)]
    forms = entry.msgstr_plural
    return [(entry.msgid, forms.get(0, "")), (entry.msgid_plural, forms.get(plural, ""))]


def catalog_pairs(path: Path, stats: Counter, seen: set) -> list[tuple[str, str]]:
    """The pairs of one catalog not in ``seen`` (earlier catalogs' pairs), in catalog order, each
    once; drops are counted in ``stats``, and the pairs kept are added to ``seen``."""
    import struct

    import polib
    try:
        catalog = polib.mofile(str(path)) if path.suffix == ".mo" else polib.pofile(str(path))
    except (OSError, ValueError, struct.error) as e:  # polib's errors for a corrupt or cut-short file
        raise ValueError(f"{path}: not a readable gettext catalog ({e})") from None
    plural = plural_index(catalog.metadata.get("Plural-Forms"))
    pairs: dict[tuple[str, str], None] = {}
    for entry in catalog:
        if not entry.msgid:
            continue  # the header
        for source, target in entry_pairs(entry, plural):
            stats["candidate_pairs"] += 1
            keys = strip_access_keys(source) != source or strip_access_keys(target) != target
            if entry.obsolete or "fuzzy" in entry.flags:
                stats["drop_fuzzy_or_obsolete"] += 1
                continue
            source, how_source = clean(source)
            target, how_target = clean(target) if target.strip() else (None, "untranslated")
            reason = how_target if target is None else how_source if source is None else None
            if reason is None and source == target:
                reason = "identical"
            if reason is None and ((source, target) in pairs or (source, target) in seen):
                reason = "duplicate"
            if reason:
                stats[f"drop_{reason}"] += 1
                continue
            stats["joined_lines"] += "joined" in (how_source, how_target)
            stats["plural_pairs"] += bool(entry.msgid_plural)
            stats["access_key_pairs"] += keys
            pairs[source, target] = None
    seen.update(pairs)
    return list(pairs)


def domain_hash(domain: str) -> int:
    return int.from_bytes(hashlib.sha256(domain.encode("utf-8")).digest()[:8], "big")


def assign_splits(sizes: dict[str, int], heldout_share: float) -> dict[str, str]:
    """domain -> split: test, then valid, each given catalogs (in hash order) while a catalog
    brings it closer to ``heldout_share`` of the pairs; name lists stay in train."""
    target = heldout_share * sum(sizes.values())
    split_of = {domain: "train" for domain in sizes}
    order = [d for d in sorted(sizes, key=lambda d: (domain_hash(d), d)) if not NAME_LISTS.match(d)]
    for split in ("test", "valid"):
        held = 0
        for domain in order:
            if split_of[domain] == "train" and sizes[domain] and held + sizes[domain] / 2 < target:
                split_of[domain] = split
                held += sizes[domain]
    return split_of


def find_catalogs(locale_dir, lang: str) -> list[Path]:
    """LANG's catalogs: every .mo, and a .po where no .mo of that domain exists."""
    languages = catalogs_by_language(locale_dir, suffixes=(".mo", ".po"))
    if lang not in languages:
        known = sorted(languages)
        hint = f"languages with catalogs there: {', '.join(known)}" if known else "it holds no catalogs at all"
        if not Path(locale_dir, lang).is_dir():
            raise ValueError(f"no language {lang!r} in {locale_dir}; {hint}")
        raise ValueError(f"{Path(locale_dir, lang, 'LC_MESSAGES')}: no .mo or .po catalogs; {hint}")
    by_domain: dict[str, Path] = {}
    for path in languages[lang]:
        if path.suffix == ".mo" or path.stem not in by_domain:
            by_domain[path.stem] = path
    return [by_domain[d] for d in sorted(by_domain)]


def build_gettext_corpus(lang: str, out_dir, locale_dir=LOCALE_DIR, heldout_share: float = 0.05) -> dict:
    """Write ``{train,valid,test}.{en,LANG}`` and ``stats.json`` to ``out_dir``; return the stats."""
    if not 0 <= heldout_share < 0.5:  # (NaN fails too) valid and test each take this share
        raise ValueError(f"heldout_share {heldout_share}: must be at least 0 and less than 0.5")
    stats: Counter = Counter()
    seen: set[tuple[str, str]] = set()  # a pair repeated across catalogs: the first keeps it
    per_catalog = {path.stem: catalog_pairs(path, stats, seen) for path in find_catalogs(locale_dir, lang)}
    split_of = assign_splits({d: len(p) for d, p in per_catalog.items()}, heldout_share)
    chosen = {split: [] for split in SPLITS}
    seen_sources: set[str] = set()
    for split in SPLITS:
        for domain in (d for d in per_catalog if split_of[d] == split):
            for pair in per_catalog[domain]:
                if split != "train" and pair[0] in seen_sources:
                    stats["drop_source_in_earlier_split"] += 1
                else:
                    chosen[split].append(pair)
        seen_sources.update(source for source, _ in chosen[split])
    if not chosen["train"]:
        raise ValueError(f"no usable pairs in the {len(per_catalog)} {lang} catalogs of {locale_dir} "
                         f"(dropped: {dict(sorted((k, v) for k, v in stats.items() if k.startswith('drop_')))})")
    for split, pairs in chosen.items():
        for side, suffix in ((0, "en"), (1, lang)):
            atomic_write(os.path.join(out_dir, f"{split}.{suffix}"),
                         lambda f, side=side, pairs=pairs: f.writelines(p[side] + "\n" for p in pairs))
    summary = {
        "language": lang, "locale_dir": str(locale_dir), "heldout_share": heldout_share,
        "pairs": {split: len(chosen[split]) for split in SPLITS},
        "catalogs": {split: sorted(d for d in per_catalog if split_of[d] == split) for split in SPLITS},
        "catalog_pairs": {d: len(p) for d, p in per_catalog.items()},
        "drops": {k.removeprefix("drop_"): v for k, v in sorted(stats.items()) if k.startswith("drop_")},
        "candidate_pairs": stats["candidate_pairs"], "joined_lines": stats["joined_lines"],
        "plural_pairs": stats["plural_pairs"], "access_key_pairs": stats["access_key_pairs"],
    }
    atomic_write_text(os.path.join(out_dir, "stats.json"), json.dumps(summary, ensure_ascii=False, indent=1) + "\n")
    return summary
