"""A pretraining corpus of English prose from the documentation installed on this machine, in
google-research/bert's input format: one sentence per line, a blank line between documents.

Sources, read in this order (a sentence seen before is dropped, so the first source to hold a
sentence keeps it, e.g. the GPL goes to `licenses`, not to each package's copyright file):

    licenses  /usr/share/common-licenses/*             one document per licence
    dpkg      /var/lib/dpkg/status                     long descriptions of installed packages
    apt       /var/lib/apt/lists/*_Packages,           long descriptions of every package, where
              *_Translation-en (.lz4, .gz)             the lists carry them (synopses are phrases)
    python    the standard library's docstrings        one document per module (parsed, not imported)
    info      /usr/share/info/*.info*                  one document per node
    man       /usr/share/man/man*/                     English pages, one document per page
    doc       /usr/share/doc/<package>/                READMEs, NEWS, changelogs, copyright, text,
                                                       Markdown, reStructuredText, HTML (.gz too)

A document is held out (heldout.txt) when the hash of its name ("man/man1/ls.1.gz") falls in
the held-out share, so a split does not depend on what else the machine has installed.
"""
import ast
import contextlib
import hashlib
import json
import os
import re
import sysconfig
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from ..io import make_folder, read_compressed, read_lines
from ..validate import positive_int
from .sentences import is_prose, split_sentences
from .text_formats import html_paragraphs, roff_paragraphs, text_paragraphs

SOURCE_ORDER = ("licenses", "dpkg", "apt", "python", "info", "man", "doc")


def default_roots(prefix="/") -> dict[str, Path]:
    """Where each source lives; under `prefix` for another system's tree (a mounted image, a test)."""
    paths = {"licenses": "/usr/share/common-licenses", "dpkg": "/var/lib/dpkg/status", "apt": "/var/lib/apt/lists",
             "python": sysconfig.get_paths()["stdlib"], "info": "/usr/share/info", "man": "/usr/share/man",
             "doc": "/usr/share/doc"}
    return {name: Path(prefix, path.lstrip("/")) for name, path in paths.items()}


# ---- finding the files of each source ------------------------------------------------------

PYTHON_SKIP = {"test", "tests", "idlelib", "lib2to3", "site-packages", "dist-packages", "turtledemo",
               "ensurepip", "pydoc_data", "__pycache__", "tkinter", "config-3", "venv"}
# gcloud's alpha and beta command pages (11k here) are near-copies of its 5k GA pages
GCLOUD_PRERELEASE = ("gcloud_alpha_", "gcloud_beta_")
# Larger files are concatenations of others (nodejs's api/all.html, 8 MB) or logs, and slow to parse
DOC_MAX_BYTES = 4_000_000
DOC_NAMES = re.compile(r"^(README|NEWS|CHANGES|CHANGELOG|HISTORY|FAQ|TODO|BUGS|NOTES|INSTALL|USAGE|"
                       r"copyright|changelog)", re.IGNORECASE)
DOC_EXTENSIONS = {".txt", ".md", ".markdown", ".rst", ".html", ".htm", ".text"}


def _files(root: Path, pattern: str = "**/*") -> list[Path]:
    return sorted(p for p in root.glob(pattern) if p.is_file() and not p.is_symlink())


def find_files(source: str, root: Path) -> list[Path]:
    if not root.exists():
        return []
    if source == "dpkg":
        return [root] if root.is_file() else []
    if source == "apt":
        return sorted(p for pattern in ("*_Packages*", "*_Translation-en*") for p in root.glob(pattern)
                      if p.suffix in ("", ".lz4", ".gz"))
    if source == "python":
        found = []
        for folder, dirs, names in os.walk(root):  # pruned as it goes: site-packages is large
            dirs[:] = [d for d in dirs if d not in PYTHON_SKIP and not d.startswith("config-")]
            found += [Path(folder, n) for n in names if n.endswith(".py") and not os.path.islink(Path(folder, n))]
        return sorted(found)
    if source == "info":
        return [p for p in _files(root, "*") if ".info" in p.name]
    if source == "man":  # man1..man9, mann: the untranslated pages (translations live in de/, fr/, ...)
        return _distinct([p for d in sorted(root.glob("man[0-9n]*")) for p in _files(d, "*")
                          if not p.name.startswith(GCLOUD_PRERELEASE)])
    if source == "doc":
        return _distinct([p for p in _files(root) if _is_doc_text(p) and p.stat().st_size <= DOC_MAX_BYTES])
    return _files(root, "*")


def _distinct(paths: list[Path]) -> list[Path]:
    """The first of each set of byte-identical files (packages of one source share changelogs)."""
    by_size: dict[int, list[Path]] = {}
    for p in paths:
        by_size.setdefault(p.stat().st_size, []).append(p)
    keep, seen = set(), set()
    for same in by_size.values():
        for p in same:
            digest = hashlib.blake2b(p.read_bytes(), digest_size=16).digest() if len(same) > 1 else p
            if digest not in seen:
                seen.add(digest)
                keep.add(p)
    return [p for p in paths if p in keep]


def _is_doc_text(path: Path) -> bool:
    name = path.name.removesuffix(".gz")
    ext = os.path.splitext(name)[1].lower()
    return ext in DOC_EXTENSIONS or (DOC_NAMES.match(name) is not None and ext in ("", ".debian", ".old"))


# ---- reading a file into documents: (name, paragraphs) -------------------------------------

def _read_text(path: Path) -> str:
    """The text of a plain, .gz or .lz4 file, its size capped while it is inflated: a file under
    --root is whatever the machine holds, and a small archive must not become gigabytes."""
    return read_compressed(path, CORPUS_FILE_MAX_BYTES).decode("utf-8", "replace")


# The largest text one corpus file may inflate to: Debian's biggest Packages list is under 100 MB.
CORPUS_FILE_MAX_BYTES = 256 << 20


def _package_descriptions(text: str, source: str) -> list[tuple[str, list[str]]]:
    """Long descriptions of a dpkg status / apt Packages file: " ." separates paragraphs, lines
    indented by two or more spaces are verbatim (lists, examples) and are left out."""
    documents = []
    for stanza in text.split("\n\n"):
        package = re.search(r"^Package: *(\S+)", stanza, re.MULTILINE)
        description = re.search(r"^Description(?:-en)?: [^\n]*\n((?: [^\n]*\n?)*)", stanza, re.MULTILINE)
        if not package or not description:
            continue
        paragraphs, current = [], []
        for line in description.group(1).split("\n"):
            if line.strip() in (".", "") or line.startswith("  "):
                paragraphs.append(" ".join(current))
                current = []
            else:
                current.append(line.strip())
        paragraphs.append(" ".join(current))
        documents.append((f"{source}/{package.group(1)}", [p for p in paragraphs if p]))
    return documents


def _docstrings(source: str) -> list[str]:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    docs, stack = [], [tree]
    while stack:  # modules, classes and functions, in source order (ast.walk visits every node: slow)
        node = stack.pop()
        doc = ast.get_docstring(node, clean=True)
        if doc:
            docs.extend(text_paragraphs(doc, "rst", code_indent=4))
        stack.extend(reversed(list(_definitions(node.body))))
    return docs


def _definitions(body):
    """The classes and functions of a body, including those under if/try/with at this level."""
    for node in body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node
        elif isinstance(node, (ast.If, ast.Try, ast.With)):
            for block in (node.body, getattr(node, "orelse", []), getattr(node, "finalbody", []),
                          *(h.body for h in getattr(node, "handlers", []))):
                yield from _definitions(block)


def _info_nodes(text: str, name: str) -> list[tuple[str, list[str]]]:
    documents = []
    for node in text.split("\x1f")[1:]:
        header = re.search(r"Node: *([^,\n]+)", node[:300])
        if header and not node.lstrip().startswith("Tag Table"):
            body = node.split("\n", 2)[-1]
            documents.append((f"{name}#{header.group(1).strip()}", text_paragraphs(body, "plain", code_indent=5)))
    return documents


def read_documents(source: str, root: Path, path: Path) -> list[tuple[str, list[str]]]:
    """The documents of one file of a source, as (name, paragraphs)."""
    rel = path.relative_to(root).as_posix() if path != root else path.name
    name = f"{source}/{rel}"
    if source in ("dpkg", "apt"):
        return _package_descriptions(_read_text(path), source)
    text = _read_text(path)
    if source == "python":
        return [(name, _docstrings(text))]
    if source == "info":
        return _info_nodes(text, name)
    if source == "man":
        return [(name, roff_paragraphs(text))]
    if source == "doc":
        base = path.name.removesuffix(".gz")
        ext = os.path.splitext(base)[1].lower()
        if ext in (".html", ".htm"):
            return [(name, html_paragraphs(text))]
        markup = {".md": "markdown", ".markdown": "markdown", ".rst": "rst"}.get(ext, "plain")
        return [(name, text_paragraphs(text, markup, code_indent=4 if markup != "plain" else None))]
    return [(name, text_paragraphs(text))]


def _prose_documents(task) -> list[tuple[str, list[str], int]] | None:
    """Worker: the documents of one file as (name, prose sentences, sentences rejected)."""
    source, root, path = task
    try:
        documents = read_documents(source, Path(root), Path(path))
    except (OSError, EOFError, ValueError, RecursionError):
        return None  # an unreadable or corrupt file: skipped, counted by the caller
    out = []
    for name, paragraphs in documents:
        sentences = [s for p in paragraphs for s in split_sentences(p)]
        kept = [s for s in sentences if is_prose(s)]
        out.append((name, kept, len(sentences) - len(kept)))
    return out


# ---- the corpus ----------------------------------------------------------------------------

def is_heldout(name: str, heldout_share: float) -> bool:
    bucket = int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "big") % 10_000
    return bucket < heldout_share * 10_000


def _key(sentence: str) -> int:
    """A sentence's identity for de-duplication: case and spacing do not count."""
    return int.from_bytes(hashlib.blake2b(" ".join(sentence.lower().split()).encode(), digest_size=8).digest(), "big")


class CorpusWriter:
    """Writes documents to DIR/train.txt or DIR/heldout.txt (by a hash of the document's name),
    dropping sentences seen before and documents left shorter than `min_sentences`, and counts
    what it kept and dropped per source. The files appear, complete, at `close()`; a corpus whose
    train.txt would be empty is an error there instead."""

    COUNTS = ("files", "documents", "sentences", "bytes", "heldout_documents", "heldout_sentences", "heldout_bytes",
              "rejected_not_prose", "dropped_duplicates", "dropped_short_documents", "unreadable_files")

    def __init__(self, out_dir, heldout_share: float = 0.02, min_sentences: int = 2):
        if not 0 <= heldout_share < 1:  # (NaN fails too) with a share of 1 train.txt would be empty
            raise ValueError(f"heldout_share {heldout_share}: must be at least 0 and less than 1")
        positive_int("min_sentences", min_sentences)
        self.dir, self.heldout_share, self.min_sentences = Path(out_dir), heldout_share, min_sentences
        make_folder(self.dir)
        # closed by close() or abort()
        self.files = {split: open(self._tmp(split), "w", encoding="utf-8", newline="\n")  # noqa: SIM115
                      for split in ("train", "heldout")}
        self.seen: set[int] = set()
        self.stats: dict[str, dict] = {}

    def _tmp(self, split):
        return self.dir / f".{split}.txt.tmp"

    def source(self, name: str, root: str = "") -> dict:
        return self.stats.setdefault(name, {"root": root, **dict.fromkeys(self.COUNTS, 0)})

    def add(self, source: str, name: str, sentences: list[str], rejected: int = 0):
        st = self.source(source)
        st["rejected_not_prose"] += rejected
        kept = []
        for sentence in sentences:
            key = _key(sentence)
            if key not in self.seen:
                self.seen.add(key)
                kept.append(sentence)
        st["dropped_duplicates"] += len(sentences) - len(kept)
        if len(kept) < self.min_sentences:
            st["dropped_short_documents"] += bool(kept)
            return
        text = "\n".join(kept) + "\n"
        prefix = "heldout_" if is_heldout(name, self.heldout_share) else ""
        self.files["heldout" if prefix else "train"].write(text + "\n")
        st[prefix + "documents"] += 1
        st[prefix + "sentences"] += len(kept)
        st[prefix + "bytes"] += len(text.encode("utf-8"))

    def train_bytes(self) -> int:
        return sum(s["bytes"] for s in self.stats.values())

    def close(self, **extra) -> dict:
        """Move the files into place; write and return stats.json's summary."""
        total = {k: sum(s[k] for s in self.stats.values()) for k in self.COUNTS}
        if not total["documents"]:
            self.abort()
            raise ValueError(f"{self.dir}: no documents for train.txt: of {total['files']:,} files read, "
                             f"{total['unreadable_files']:,} unreadable, {total['rejected_not_prose']:,} passages not "
                             f"prose, {total['dropped_short_documents']:,} documents under {self.min_sentences} "
                             f"sentences, {total['heldout_documents']:,} held out; nothing was written")
        for split, f in self.files.items():
            f.close()
            os.replace(self._tmp(split), self.dir / f"{split}.txt")
        summary = {"format": "one sentence per line, a blank line between documents (google-research/bert)",
                   "heldout_share": self.heldout_share, "min_sentences": self.min_sentences, **extra,
                   "total": total, "sources": self.stats}
        with open(self.dir / "stats.json", "w", encoding="utf-8") as f:
            json.dump(summary, f, indent=1)
        return summary

    def abort(self):
        for split, f in self.files.items():
            f.close()
            if self._tmp(split).exists():
                os.unlink(self._tmp(split))


def build_corpus(out_dir, roots: dict[str, Path] | None = None, sources=SOURCE_ORDER, heldout_share: float = 0.02,
                 min_sentences: int = 2, workers: int | None = None, progress: bool = True) -> dict:
    """Write out_dir/train.txt, heldout.txt, stats.json and SOURCES.md; return the stats.
    `roots` overrides where sources live (default_roots())."""
    from ..progress import progress_bar
    start = time.perf_counter()
    roots = {**default_roots(), **(roots or {})}
    workers = min(4, os.cpu_count() or 1) if workers is None else positive_int("workers", workers)
    writer = CorpusWriter(out_dir, heldout_share, min_sentences)
    try:
        tasks = [(s, str(roots[s]), str(p)) for s in sources for p in find_files(s, Path(roots[s]))]
        for s in sources:
            writer.source(s, str(roots[s]))
        with ProcessPoolExecutor(workers) if workers > 1 else contextlib.nullcontext() as pool:
            results = pool.map(_prose_documents, tasks, chunksize=8) if pool else map(_prose_documents, tasks)
            bar = progress_bar(zip(tasks, results), total=len(tasks), unit="file", enabled=progress,
                               desc="english-corpus")
            for (source, _, _), documents in bar:
                st = writer.source(source)
                st["files"] += 1
                st["unreadable_files"] += documents is None
                for name, sentences, rejected in documents or []:
                    writer.add(source, name, sentences, rejected)
                bar.set_postfix_str(f"{writer.train_bytes() / 1e6:.1f} MB train", refresh=False)
    except BaseException:
        writer.abort()
        raise
    summary = writer.close(seconds=round(time.perf_counter() - start, 1))
    (Path(out_dir) / "SOURCES.md").write_text(sources_note(summary), encoding="utf-8")
    return summary


def sources_note(summary: dict) -> str:
    rows = "\n".join(f"| {name} | `{s['root']}` | {s['files']:,} | {s['documents']:,} | {s['sentences']:,} | "
                     f"{s['bytes'] / 1e6:.2f} |" for name, s in summary["sources"].items())
    return f"""# Where this corpus comes from

English prose from the documentation installed on the machine that built it (`bertlab data
english-corpus`): no download. One sentence per line, a blank line between documents
(google-research/bert's input format); `heldout.txt` holds whole documents chosen by a hash of
their names ({summary['heldout_share']:.0%}). Code, examples, tables, headings, synopses, changelog
headers, mail addresses and non-English text were left out; a sentence seen before (ignoring case
and spacing) was dropped; documents with fewer than {summary['min_sentences']} sentences were dropped.

| source | read from | files | train documents | train sentences | train MB |
|---|---|---:|---:|---:|---:|
{rows}

Left out on purpose: gcloud's alpha and beta command pages (near-copies of its GA pages), files of
/usr/share/doc over {DOC_MAX_BYTES // 1_000_000} MB (concatenations of other pages, logs), byte-identical copies of a file
(packages of one source share changelogs), translated manual pages, and package synopses (one-line
phrases; the long descriptions are read where dpkg's status or apt's Translation-en lists have them).

Licences: every sentence keeps the licence of the package it came from (see
`/usr/share/doc/<package>/copyright`; the Python standard library is under the PSF licence). The
corpus is for training on this machine; do not redistribute it without checking those licences.
"""


def python_docs_corpus(summaries_path, out_dir, heldout_share: float = 0.02) -> dict:
    """data/python-docs/summaries.txt ("module.name: summary" lines) in the same format, one
    document per top-level module (its summaries in file order): the README's small pretraining job."""
    documents: dict[str, list[str]] = {}
    for line in read_lines(summaries_path):
        name, sep, summary = line.partition(": ")
        if sep and summary.strip():
            documents.setdefault(name.split(".")[0], []).extend(split_sentences(summary))
    writer = CorpusWriter(out_dir, heldout_share, min_sentences=2)
    writer.source("python-docs", str(summaries_path))["files"] = 1
    for module, sentences in documents.items():
        writer.add("python-docs", f"python-docs/{module}", sentences)
    summary = writer.close()
    (Path(out_dir) / "SOURCES.md").write_text(
        f"# Where this corpus comes from\n\nThe first sentences of the docstrings of CPython's standard library "
        f"({summaries_path}), one document per top-level module.\n\nCopyright (c) 2001-2023 Python Software "
        f"Foundation; All Rights Reserved. Licence: Python Software Foundation License Version 2 (PSF-2.0).\n",
        encoding="utf-8")
    return summary
