"""Real text found on this machine, for tests and benchmarks: no download, deterministic.

* ``gettext_lines``: the strings of the gettext catalogs ``/usr/share/locale/*/LC_MESSAGES/*.mo``
  (parsed with polib): contexts, English msgids (with plurals) and their translations into ~190
  languages -- CJK, Arabic, Thai, Greek, accented Latin, odd whitespace and control characters.
* ``doc_lines``: English lines of package documentation in ``/usr/share/doc`` (README*, NEWS*,
  copyright, changelogs; ``.gz`` files are unzipped).
* ``local_lines``: both, interleaved.

Strings are split on "\\n" only (never ``splitlines``, which would also split on the odd
separators that make this text interesting), empty lines are dropped and a line is kept only
the first time it occurs. Sources are visited in sorted order, round-robin across languages
(packages), a chunk at a time, and only as many files are read as ``limit`` needs.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from itertools import islice
from pathlib import Path

from ..io import read_compressed
from .english_corpus import CORPUS_FILE_MAX_BYTES

LOCALE_DIR = Path("/usr/share/locale")
DOC_DIR = Path("/usr/share/doc")
DOC_PATTERNS = ("README*", "NEWS*", "copyright", "changelog*")


def _catalog_strings(path: Path) -> Iterator[str]:
    import polib
    for entry in polib.mofile(str(path)):
        if entry.msgctxt:
            yield entry.msgctxt
        yield entry.msgid
        if entry.msgid_plural:
            yield entry.msgid_plural
        yield entry.msgstr
        for _, text in sorted(entry.msgstr_plural.items()):
            yield text


def _doc_strings(path: Path) -> Iterator[str]:
    data = read_compressed(path, CORPUS_FILE_MAX_BYTES)
    for raw in data.split(b"\n"):
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError:
            continue  # a Latin-1 line in an old changelog: not text we can vouch for


def _lines(paths: Iterable[Path], read) -> Iterator[str]:
    for path in paths:
        for text in read(path):
            yield from (line for line in text.split("\n") if line)


def _round_robin(streams: list[Iterator[str]], limit: int) -> list[str]:
    """Up to ``limit`` distinct lines, a chunk from each stream in turn."""
    out: list[str] = []
    seen: set[str] = set()
    chunk = max(1, math.ceil(limit / max(1, len(streams))))
    while streams and len(out) < limit:
        alive = []
        for stream in streams:
            taken = 0
            for line in stream:
                if line not in seen:
                    seen.add(line)
                    out.append(line)
                    taken += 1
                    if taken == chunk or len(out) == limit:
                        break
            else:
                continue  # exhausted: drop it
            alive.append(stream)
            if len(out) == limit:
                break
        streams = alive
    return out


def catalogs_by_language(locale_dir: str | Path = LOCALE_DIR, suffixes=(".mo",)) -> dict[str, list[Path]]:
    """Locale name -> its catalogs ``LOCALE/LC_MESSAGES/*{suffix}``, sorted by path."""
    languages: dict[str, list[Path]] = {}
    for path in sorted(p for suffix in suffixes for p in Path(locale_dir).glob(f"*/LC_MESSAGES/*{suffix}")):
        languages.setdefault(path.parts[-3], []).append(path)
    return languages


def gettext_lines(limit: int = 20_000, locale_dir: str | Path = LOCALE_DIR) -> list[str]:
    """Lines of gettext catalogs, spread evenly over the languages (sorted by locale name)."""
    languages = catalogs_by_language(locale_dir)
    streams = [_lines(paths, _catalog_strings) for _, paths in sorted(languages.items())]
    return _round_robin(streams, limit)


def doc_lines(limit: int = 20_000, doc_dir: str | Path = DOC_DIR) -> list[str]:
    """Lines of package documentation, spread evenly over the packages (sorted by name)."""
    streams = []
    for package in sorted(p for p in Path(doc_dir).iterdir() if p.is_dir()):
        paths = sorted({p for pattern in DOC_PATTERNS for p in package.glob(pattern)
                        if p.is_file() and not p.is_symlink()})
        if paths:
            streams.append(_lines(paths, _doc_strings))
    return _round_robin(streams, limit)


def local_lines(limit: int = 20_000, doc_fraction: float = 0.25) -> list[str]:
    """``limit`` lines: gettext strings with documentation lines spread evenly among them.

    When the catalogs run short, documentation fills in; a line is never repeated, even
    across the two sources.
    """
    n_docs = round(limit * doc_fraction)
    gettext = gettext_lines(limit - n_docs)
    known = set(gettext)
    # a few doc lines ("Copyright", "GNU General Public License") are gettext strings too
    docs = [t for t in doc_lines(limit - len(gettext) + 200) if t not in known]
    docs = docs[:limit - len(gettext)]
    out: list[str] = []
    total = len(gettext) + len(docs)
    docs_iter, gettext_iter = iter(docs), iter(gettext)
    for i in range(total):
        # a doc line whenever the running share of docs falls behind its target
        want_docs = math.floor((i + 1) * len(docs) / total) > math.floor(i * len(docs) / total)
        out.extend(islice(docs_iter if want_docs else gettext_iter, 1))
    return out
