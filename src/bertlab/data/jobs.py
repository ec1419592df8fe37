"""The `bertlab data` jobs with explicit arguments: each checks its settings, claims its output
folder (refusing to replace a data set there unless overwrite, since a rebuild from other inputs
would silently change it) and runs its builder, returning the builder's stats. Modules are
imported inside each job, so one data set's imports do not slow another's."""
import os

from ..io import claim_output_folder

CORPUS_FILES = ("train.txt", "heldout.txt", "stats.json", "SOURCES.md")
DEBIAN_ZH_FILES = ("train.txt", "heldout.txt", "train.tsv", "dev.tsv", "test.tsv", "stats.json")


def check_heldout(share: float, below: float):
    if share >= below:  # the flag's type has checked [0, 1]
        raise ValueError(f"--heldout {share}: must be less than {below:g}")


def english_corpus_job(out: str, sources: list[str] | None = None, heldout: float = 0.02, min_sentences: int = 2,
                       workers: int | None = None, root: str = "/", overwrite: bool = False,
                       progress: bool = True) -> dict:
    """English prose from the documentation installed under `root` (data.english_corpus), the
    `sources` in order (default every one); `heldout` of the documents held out."""
    from .english_corpus import SOURCE_ORDER, build_corpus, default_roots
    sources = list(SOURCE_ORDER) if sources is None else list(sources)
    unknown = sorted(set(sources) - set(SOURCE_ORDER))
    if unknown or not sources:
        raise ValueError(f"--sources: unknown {', '.join(unknown) or '(none given)'}; "
                         f"choose from {', '.join(SOURCE_ORDER)}")
    check_heldout(heldout, below=1)
    claim_output_folder(out, CORPUS_FILES, overwrite)
    return build_corpus(out, default_roots(root), sources=sources, heldout_share=heldout,
                        min_sentences=min_sentences, workers=workers, progress=progress)


def python_docs_job(out: str, summaries: str = "data/python-docs/summaries.txt", heldout: float = 0.02,
                    overwrite: bool = False) -> dict:
    """The shipped Python docstring summaries as a small corpus (data.english_corpus.python_docs_corpus)."""
    from .english_corpus import python_docs_corpus
    if not os.path.exists(summaries):
        raise FileNotFoundError(f"--summaries {summaries}: no such file (the default is relative to the "
                                "repository root)")
    check_heldout(heldout, below=1)
    claim_output_folder(out, CORPUS_FILES, overwrite)
    return python_docs_corpus(summaries, out, heldout)


def gettext_job(lang: str, out: str, locale_dir: str = "/usr/share/locale", heldout: float = 0.05,
                overwrite: bool = False) -> dict:
    """An English -> `lang` parallel corpus from the installed gettext catalogs (data.gettext_corpus)."""
    from .gettext_corpus import SPLITS, build_gettext_corpus
    check_heldout(heldout, below=0.5)
    claim_output_folder(out, ["stats.json"] + [f"{split}.{side}" for split in SPLITS for side in ("en", lang)],
                        overwrite)
    return build_gettext_corpus(lang, out, locale_dir, heldout)


def debian_zh_job(out: str, lists: str | None = None, heldout: float = 0.15, min_per_section: int = 15,
                  gettext: str | None = None, overwrite: bool = False) -> dict:
    """Chinese package descriptions and their sections from apt's lists (data.debian_zh); `gettext`,
    a locale folder, adds the zh_CN catalogs to the pretraining text."""
    from .debian_zh import APT_LISTS, build_debian_zh
    check_heldout(heldout, below=0.5)
    if heldout == 0:
        raise ValueError("--heldout 0: dev and test would be empty")
    claim_output_folder(out, DEBIAN_ZH_FILES, overwrite)
    return build_debian_zh(out, lists or APT_LISTS, heldout, min_per_section, gettext)


def debian_synopses_job(out: str, lists: str | None = None, heldout: float = 0.05, max_words: int = 48,
                        lead_words: int = 10, max_train: int | None = None, max_test: int | None = None,
                        overwrite: bool = False) -> dict:
    """Package long descriptions paired with their synopses (data.debian_synopses)."""
    from .debian_synopses import APT_LISTS, SPLITS, build_debian_synopses
    check_heldout(heldout, below=0.5)
    if heldout == 0:
        raise ValueError("--heldout 0: valid and test would be empty")
    names = [f"{s}.{side}" for s in SPLITS for side in ("desc", "syn")] + ["test.lead", "stats.json"]
    claim_output_folder(out, names, overwrite)
    return build_debian_synopses(out, lists or APT_LISTS, heldout, max_words, lead_words, max_train, max_test)
