"""bertlab data: build data sets from what this machine already has (no downloads).

One subcommand per data set. To add one, write `add_NAME(subparsers)` (its parser, with
`set_defaults(run=...)`) and list it in SUBCOMMANDS."""
import argparse
import sys

from .args import add_out_argument, flags_for, fraction_below_one, nonnegative_float, positive_int

ENGLISH_EXAMPLE = """example:
  bertlab data english-corpus -o corpus/english            # every source, >= 20 MB or an error
  bertlab data english-corpus -o /tmp/man --sources man,info --min-mb 0

DIR gets train.txt and heldout.txt (one sentence per line, a blank line between documents: the
input format of google-research/bert's create_pretraining_data.py), stats.json (files, documents,
sentences and bytes per source; what was rejected) and SOURCES.md (where the text came from)."""


def add_parser(subparsers):
    p = subparsers.add_parser(
        "data", help="build data sets from this machine's own text (pretraining corpora)",
        description="Build data sets from text already on this machine; nothing is downloaded.")
    sub = p.add_subparsers(dest="data_command", metavar="DATASET", required=True)
    for add in SUBCOMMANDS:
        add(sub)


def add_english_corpus(subparsers):
    from ..data.english_corpus import SOURCE_ORDER
    p = subparsers.add_parser(
        "english-corpus", help="English prose from installed documentation, one sentence per line",
        description="A pretraining corpus of English prose from the documentation installed here: "
                    "licences, package descriptions, Python docstrings, info manuals, manual pages "
                    "and /usr/share/doc. Code, tables, headings, changelog headers, addresses and "
                    "non-English text are left out, sentences are split by rule and de-duplicated, "
                    "and about 2% of documents (by a hash of their names) are held out.",
        epilog=ENGLISH_EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_out_argument(p, "output folder (created)")
    p.add_argument("--overwrite", action="store_true", help="replace a corpus already in DIR")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.add_argument("--min-mb", type=nonnegative_float, default=20.0,
                   help="fail unless train.txt reaches this many MB (default 20; 0 accepts any size)")
    p.add_argument("--sources", default=",".join(SOURCE_ORDER),
                   help=f"comma-separated, read in this order (default {','.join(SOURCE_ORDER)})")
    p.add_argument("--heldout", type=fraction_below_one, default=0.02, help="share of documents held out, below 1 (default 0.02)")
    p.add_argument("--min-sentences", type=positive_int, default=2, help="shortest document kept (default 2 sentences)")
    p.add_argument("--workers", type=positive_int, help="reader processes (default: the CPU count, at most 4)")
    p.add_argument("--root", default="/", metavar="PREFIX",
                   help="read another system's tree: every source path under PREFIX (default /)")
    p.set_defaults(run=run_english_corpus)


def run_english_corpus(args):
    from ..data.jobs import english_corpus_job
    sources = [s.strip() for s in args.sources.split(",") if s.strip()]
    summary = english_corpus_job(**flags_for(english_corpus_job, args, sources=sources))
    _report(summary, args.out)
    mb = summary["total"]["bytes"] / 1e6
    if mb < args.min_mb:
        raise ValueError(f"only {mb:.1f} MB of English prose found here (--min-mb {args.min_mb:g}); "
                         f"the files are written; see {args.out}/stats.json for what each source gave")
    return 0


def add_python_docs(subparsers):
    p = subparsers.add_parser(
        "python-docs", help="the shipped Python docstring summaries in the same corpus format",
        description="data/python-docs/summaries.txt (first sentences of the standard library's "
                    "docstrings, PSF licence) as a small pretraining corpus: one document per "
                    "module, one sentence per line; whole modules held out as english-corpus does.")
    add_out_argument(p, "output folder (created)")
    p.add_argument("--overwrite", action="store_true", help="replace a corpus already in DIR")
    p.add_argument("--summaries", default="data/python-docs/summaries.txt", metavar="FILE",
                   help="the summaries file (default data/python-docs/summaries.txt, from the repository root)")
    p.add_argument("--heldout", type=fraction_below_one, default=0.02, help="share of modules held out, below 1 (default 0.02)")
    p.set_defaults(run=run_python_docs)


def run_python_docs(args):
    from ..data.jobs import python_docs_job
    _report(python_docs_job(**flags_for(python_docs_job, args)), args.out)
    return 0


GETTEXT_EXAMPLE = """example:
  bertlab data gettext --lang de -o corpus/gettext_de
  bertlab data gettext --lang zh_CN -o corpus/gettext_zh

DIR gets {train,valid,test}.en and {train,valid,test}.LANG (line-aligned: line i of one file
translates line i of the other) and stats.json (catalogs and pairs per split, every dropped pair
counted by reason). Whole catalogs go to one split, so no program's strings straddle two."""


def add_gettext(subparsers):
    p = subparsers.add_parser(
        "gettext", help="an English -> LANG parallel corpus from the installed gettext catalogs",
        description="A translation corpus from LOCALE_DIR/LANG/LC_MESSAGES/*.mo: each English message "
                    "and its human translation. Plurals pair by the catalog's plural rule, contexts "
                    "are dropped, access keys (_File, &Save, 文件(_F)) stripped, whitespace collapsed; "
                    "untranslated, fuzzy, format-only, identical and laid-out multi-line entries are "
                    "dropped and counted. See bertlab/data/gettext_corpus.py for the rules.",
        epilog=GETTEXT_EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lang", required=True, help="locale name, as its folder is called (de, zh_CN, pt_BR)")
    add_out_argument(p, "output folder (created)")
    p.add_argument("--overwrite", action="store_true", help="replace a corpus already in DIR")
    p.add_argument("--locale-dir", default="/usr/share/locale", metavar="DIR",
                   help="where the LANG/LC_MESSAGES folders are (default /usr/share/locale)")
    p.add_argument("--heldout", type=fraction_below_one, default=0.05,
                   help="share of pairs for valid and for test, each; below 0.5 (default 0.05)")
    p.set_defaults(run=run_gettext)


def run_gettext(args):
    from ..data.jobs import gettext_job
    summary = gettext_job(**flags_for(gettext_job, args))
    pairs, catalogs = summary["pairs"], summary["catalogs"]
    print(f"{args.out}: " + ", ".join(f"{split} {pairs[split]:,} pairs ({len(catalogs[split])} catalogs)"
                                      for split in pairs), file=sys.stderr)
    print("  dropped: " + ", ".join(f"{k} {v:,}" for k, v in summary["drops"].items()), file=sys.stderr)
    return 0


DEBIAN_ZH_EXAMPLE = """example:
  sudo apt-get update -o Acquire::Languages=zh_CN      # apt fetches no Chinese descriptions unless asked
  bertlab data debian-zh -o corpus/debian-zh

DIR gets train.txt and heldout.txt (the pretraining corpus: one sentence per line, a blank line
between packages; held out: the dev and test packages' descriptions), {train,dev,test}.tsv (package,
section, description: for `bertlab finetune --task classify --text-a description --label section`)
and stats.json (the files read, rows per section and split, what was dropped and why)."""


def add_debian_zh(subparsers):
    from ..data.debian_zh import APT_LISTS
    p = subparsers.add_parser(
        "debian-zh", help="Chinese package descriptions from apt's lists: a corpus and a labelled set",
        description="Real Chinese text and labels from Debian's package index: the zh_CN translations of "
                    "package descriptions (apt's Translation-zh_CN list), each labelled with the package's "
                    "archive section from the Packages lists (joined by package name and description md5). "
                    "Split by source package; the zh_CN gettext catalogs can join the pretraining text.",
        epilog=DEBIAN_ZH_EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_out_argument(p, "output folder (created)")
    p.add_argument("--overwrite", action="store_true", help="replace a data set already in DIR")
    p.add_argument("--lists", default=APT_LISTS, metavar="DIR",
                   help=f"apt's lists folder, holding *Translation-zh_CN* and *_Packages* (default {APT_LISTS})")
    p.add_argument("--heldout", type=fraction_below_one, default=0.15,
                   help="share of source packages for dev and for test, each; below 0.5 (default 0.15)")
    p.add_argument("--min-per-section", type=positive_int, default=15,
                   help="keep sections with at least this many training descriptions (default 15)")
    p.add_argument("--gettext", metavar="LOCALE_DIR", nargs="?", const="/usr/share/locale",
                   help="add the zh_CN gettext catalogs' translations under LOCALE_DIR (default "
                        "/usr/share/locale) to train.txt")
    p.set_defaults(run=run_debian_zh)


def run_debian_zh(args):
    from ..data.jobs import debian_zh_job
    stats = debian_zh_job(**flags_for(debian_zh_job, args))
    for kind in ("translations", "packages", "gettext_catalogs"):
        files = stats["inputs"][kind]
        if files:
            print(f"read {kind}: " + (", ".join(files) if len(files) <= 4 else f"{len(files)} files"), file=sys.stderr)
    rows = stats["rows"]
    print(f"{args.out}: {len(stats['sections'])} sections; train {rows['train']:,}, dev {rows['dev']:,}, "
          f"test {rows['test']:,} rows", file=sys.stderr)
    for name, c in stats["corpus"].items():
        print(f"  {name}: {c['documents']:,} documents, {c['sentences']:,} sentences, {c['characters']:,} characters",
              file=sys.stderr)
    print("  dropped: " + (", ".join(f"{k} {v:,}" for k, v in stats["dropped"].items()) or "nothing"), file=sys.stderr)
    return 0


SYNOPSES_EXAMPLE = """example:
  mkdir -p /tmp/apt-en/partial && apt-get update -o Acquire::Languages=en -o Dir::State::Lists=/tmp/apt-en
  bertlab data debian-synopses -o corpus/synopses --lists /tmp/apt-en --max-train 20000 --max-test 500
  bertlab unilm-train --data corpus/synopses --src desc --tgt syn --init-from minilm --out runs/unilm

DIR gets {train,valid,test}.desc (long descriptions, cut to --max-words words) and .syn (the synopses,
line-aligned), test.lead (the lead baseline: the first sentence, cut to --lead-words words) and
stats.json (files read, rows per split, what was dropped and why)."""


def add_debian_synopses(subparsers):
    from ..data.debian_synopses import APT_LISTS
    p = subparsers.add_parser(
        "debian-synopses", help="package long descriptions and their one-line synopses (summarisation)",
        description="A real summarisation set from apt's lists: each package's long description (from the "
                    "Translation-en lists) paired with the one-line synopsis its maintainer wrote. Split by "
                    "source package; a repeated description or synopsis is kept once.",
        epilog=SYNOPSES_EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_out_argument(p, "output folder (created)")
    p.add_argument("--overwrite", action="store_true", help="replace a data set already in DIR")
    p.add_argument("--lists", default=APT_LISTS, metavar="DIR",
                   help=f"apt's lists folder, holding *Translation-en* and *_Packages* (default {APT_LISTS})")
    p.add_argument("--heldout", type=fraction_below_one, default=0.05,
                   help="share of source packages for valid and for test, each; below 0.5 (default 0.05)")
    p.add_argument("--max-words", type=positive_int, default=48, help="cut descriptions to this many words (48)")
    p.add_argument("--lead-words", type=positive_int, default=10, help="cut the lead baseline to this many words (10)")
    p.add_argument("--max-train", type=positive_int, help="keep this many training pairs (a fixed sample; "
                                                          "valid keeps a twentieth as many)")
    p.add_argument("--max-test", type=positive_int, help="keep this many test pairs (a fixed sample)")
    p.set_defaults(run=run_debian_synopses)


def run_debian_synopses(args):
    from ..data.jobs import debian_synopses_job
    stats = debian_synopses_job(**flags_for(debian_synopses_job, args))
    rows = stats["rows"]
    print(f"{args.out}: train {rows['train']:,}, valid {rows['valid']:,}, test {rows['test']:,} pairs; dropped: "
          + (", ".join(f"{k} {v:,}" for k, v in stats["dropped"].items()) or "nothing"), file=sys.stderr)
    return 0


def _report(summary: dict, out: str):
    total = summary["total"]
    print(f"{out}: {total['documents']:,} documents, {total['sentences']:,} sentences, "
          f"{total['bytes'] / 1e6:.1f} MB in train.txt; {total['heldout_documents']:,} documents held out",
          file=sys.stderr)
    for name, s in summary.get("sources", {}).items():
        print(f"  {name:9} {s['bytes'] / 1e6:7.2f} MB  {s['documents']:7,} documents  {s['sentences']:9,} sentences",
              file=sys.stderr)


SUBCOMMANDS = [add_english_corpus, add_python_docs, add_gettext, add_debian_zh, add_debian_synopses]
