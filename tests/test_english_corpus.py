"""The English pretraining corpus: sentence splitting, prose filtering, the format converters, and
`bertlab data english-corpus` end to end on a small fake system tree."""
import gzip
import sysconfig
from pathlib import Path

import pytest

from bertlab.cli import main
from bertlab.data.english_corpus import (
    CorpusWriter,
    build_corpus,
    default_roots,
    is_heldout,
    python_docs_corpus,
)
from bertlab.data.sentences import is_prose, split_sentences
from bertlab.data.text_formats import html_paragraphs, roff_paragraphs, text_paragraphs

# ---- sentences -----------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("Use a tool, e.g. Linux or BSD. Then stop.", ["Use a tool, e.g. Linux or BSD.", "Then stop."]),
    ("That is, i.e. Debian. It works.", ["That is, i.e. Debian.", "It works."]),
    ("Files, dirs, etc. The rest is ignored.", ["Files, dirs, etc.", "The rest is ignored."]),
    ("Version 1.2.3 was released. See setup.py for details!",
     ["Version 1.2.3 was released.", "See setup.py for details!"]),
    ("It is at www.example.org. Really? Yes.", ["It is at www.example.org.", "Really?", "Yes."]),
    ("Written by J. R. Smith. He left.", ["Written by J. R. Smith.", "He left."]),
    ("The U.S. Army uses it. (See below.) Done.", ["The U.S. Army uses it.", "(See below.)", "Done."]),
    ('He said "Stop." Then he left.', ['He said "Stop."', "Then he left."]),
    ("See Fig. 3 and No. 5 in the list. Next.", ["See Fig. 3 and No. 5 in the list.", "Next."]),
    ("Smith et al. Showed this. lower case. does not split", ["Smith et al. Showed this. lower case. does not split"]),
    ("Line one of a\nwrapped   paragraph. Two.", ["Line one of a wrapped paragraph.", "Two."]),
    ("Released in 2020. 2021 brought more.", ["Released in 2020.", "2021 brought more."]),
    ("", []),
])
def test_split_sentences(text, expected):
    assert split_sentences(text) == expected


@pytest.mark.parametrize("sentence", [
    "This is a simple sentence.",
    "The --foo option sets the size of the buffer.",
    "Mark the current pane (see select-pane -m).",
    'It prints "hello" and exits.',
    "Is this a question?",
])
def test_prose_is_kept(sentence):
    assert is_prose(sentence)


@pytest.mark.parametrize("sentence", [
    "int main() { return 0; }",
    "x = compute(a, b);",
    "Copyright (C) 2001 Foo Bar <foo@bar.org>.",
    "Dies ist ein deutscher Satz, der nicht englisch ist.",
    "Le programme est distribué sans aucune garantie.",
    "Это предложение написано на русском языке.",
    "Installation Guide",  # a heading: no end punctuation
    "-a, --all",
    "Yes.",  # too short
    "| name | value | default |.",
])
def test_non_prose_is_rejected(sentence):
    assert not is_prose(sentence)


# ---- formats -------------------------------------------------------------------------------

MAN_PAGE = r""".\" a comment that must not show
.TH FOO 1 "2024" "foo 1.0" "User Commands"
.SH NAME
foo \- frobnicate the widgets
.SH SYNOPSIS
.B foo
[\fIOPTION\fR]... \fIFILE\fR
.SH DESCRIPTION
.B foo
reads each
.IR FILE ,
and frobnicates it\(emquickly.
It uses \fBno\fP network.
.PP
Examples follow:
.nf
foo \-x file.txt | sort
.fi
.TP
.BR \-x ", " \-\-extra
Frobnicate the widgets twice, which doubles the work.
.SH SEE ALSO
.BR bar (1)
"""


def test_roff_paragraphs():
    assert roff_paragraphs(MAN_PAGE) == [
        "foo reads each FILE, and frobnicates it\u2014quickly. It uses no network.",
        "Examples follow:",
        "Frobnicate the widgets twice, which doubles the work."]


def test_roff_alias_page_has_no_text():
    assert roff_paragraphs(".so man1/foo.1\n") == []


def test_roff_mdoc():
    page = ".Dd May 1, 2020\n.Dt BAR 1\n.Sh NAME\n.Nm bar\n.Nd do things\n.Sh DESCRIPTION\n.Nm\n" \
           "reads\n.Ar file\nas\n.Xr cat 1\ndoes.\n.Pp\nWith\n.Fl v\nit talks.\n"
    assert roff_paragraphs(page) == ["bar reads file as cat(1) does.", "With -v it talks."]


def test_html_paragraphs():
    page = ("<html><head><title>T</title><style>p {}</style></head><body><h1>Heading</h1>"
            "<p>First <code>fs.open()</code> paragraph &amp; more.</p><pre>code here</pre>"
            "<table><tr><td>cell</td></tr></table><ul><li>An item.</li></ul><script>x()</script></body></html>")
    assert html_paragraphs(page) == ["First fs.open() paragraph & more.", "An item."]


def test_text_paragraphs_markdown():
    text = ("# Title\n\nSome **bold** text with a [link](http://x.org)\nand `code`.\n\n```sh\nmake install\n```\n\n"
            "- A list item.\n- Another one.\n\n| a | b |\n|---|---|\n\n    indented code\n")
    assert text_paragraphs(text, "markdown", code_indent=4) == [
        "Some bold text with a link and code.", "A list item.", "Another one."]


def test_text_paragraphs_rst_literal_block():
    text = "Use it like this::\n\n    foo --bar\n    baz\n\nThen :func:`run` finishes.\n"
    assert text_paragraphs(text, "rst") == ["Use it like this:", "Then run finishes."]


def test_text_paragraphs_changelogs():
    debian = ("foo (1.2-1) unstable; urgency=medium\n\n  * New upstream release.\n  * Fix the build\n"
              "    on arm64 (Closes: #123).\n\n -- Jane Doe <jane@example.org>  Mon, 01 Jan 2024 10:00:00 +0000\n")
    assert text_paragraphs(debian) == ["New upstream release.", "Fix the build on arm64 (Closes: #123)."]
    gnu = "2022-12-12  John Smith  <js@example.org>\n\n\t* src/a.c (main): Check the result.\n"
    assert text_paragraphs(gnu) == ["Check the result."]
    mail = "From: someone\nSubject: a patch\n\nThe body of the message.\n"
    assert text_paragraphs(mail) == ["The body of the message."]


# ---- the corpus ----------------------------------------------------------------------------

def read_documents(path) -> list[list[str]]:
    text = Path(path).read_text(encoding="utf-8")
    assert text == "" or text.endswith("\n\n")
    return [block.split("\n") for block in text.split("\n\n") if block]


def test_writer_dedupes_and_drops_short_documents(tmp_path):
    writer = CorpusWriter(tmp_path, heldout_share=0.0, min_sentences=2)
    writer.add("s", "one", ["The first sentence is here.", "The second sentence is here."])
    writer.add("s", "two", ["THE  first sentence is here.", "A new sentence appears.", "Another new one."], rejected=4)
    writer.add("s", "three", ["The second sentence is here.", "Only one is new."])
    summary = writer.close()
    assert read_documents(tmp_path / "train.txt") == [
        ["The first sentence is here.", "The second sentence is here."],
        ["A new sentence appears.", "Another new one."]]
    s = summary["sources"]["s"]
    assert (s["documents"], s["sentences"], s["dropped_duplicates"], s["dropped_short_documents"]) == (2, 4, 2, 1)
    assert s["rejected_not_prose"] == 4
    assert s["bytes"] == (tmp_path / "train.txt").stat().st_size - 2  # the blank lines are not text


def test_heldout_split_is_by_document(tmp_path):
    writer = CorpusWriter(tmp_path, heldout_share=0.3)
    names = [f"doc/package{i}/README" for i in range(60)]
    for name in names:
        writer.add("doc", name, [f"This is the start of {name}.", f"This is the end of {name}."])
    summary = writer.close()
    expected = {n for n in names if is_heldout(n, 0.3)}
    assert 5 < len(expected) < 35
    heldout = read_documents(tmp_path / "heldout.txt")
    train = read_documents(tmp_path / "train.txt")
    assert {d[0].split(" of ")[1][:-1] for d in heldout} == expected
    assert len(train) + len(heldout) == 60 and all(len(d) == 2 for d in train + heldout)
    for doc in train + heldout:  # both sentences of a document in the same file
        assert doc[0].split(" of ")[1] == doc[1].split(" of ")[1]
    assert summary["total"]["heldout_documents"] == len(expected)


PROSE = ["The widget reads its configuration from the file named on the command line.",
         "Every option can also be given in the configuration file.",
         "When the file is missing, the defaults are used instead.",
         "The widget has no other dependencies."]


@pytest.fixture
def fake_root(tmp_path):
    """A tiny system tree holding each source, under tmp_path/root."""
    root = tmp_path / "root"

    def write(rel, text, compress=False):
        path = root / rel.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(gzip.compress(text.encode()) if compress else text.encode())
        return path

    write("/usr/share/common-licenses/Fake-1.0", "Fake License\n\n" + " ".join(PROSE[:2]) + "\n\nYou may copy it. "
          "You may not sell it without asking first.\n")
    write("/var/lib/dpkg/status", "Package: widget\nStatus: install ok installed\nDescription: a widget tool\n"
          " The widget tool frobnicates the widgets of a system.\n .\n It is fast and it is small.\n\n"
          "Package: other\nDescription: synopsis only\n")
    write("/var/lib/apt/lists/deb_dists_main_binary-amd64_Packages", "Package: widget\nDescription: a widget tool\n")
    write("/var/lib/apt/lists/deb_dists_main_i18n_Translation-en", "Package: gadget\nDescription-md5: 0123\n"
          "Description-en: a gadget\n The gadget measures how long a widget runs.\n .\n It writes a report "
          "at the end.\n\n")
    write(sysconfig.get_paths()["stdlib"] + "/widget.py",
          '"""Widgets for the standard library.\n\nThe module holds one class and one function."""\n\n'
          'class Widget:\n    """A widget that can be turned on.\n\n    >>> Widget().on()\n    True\n    """\n\n'
          '    def on(self):\n        """Turn the widget on and return whether it worked."""\n        return True\n')
    write(sysconfig.get_paths()["stdlib"] + "/test/test_widget.py", '"""Tests are not documentation at all."""\n')
    write("/usr/share/info/widget.info.gz", "This is widget.info.\n\x1f\nFile: widget.info,  Node: Top,  Next: Use\n\n"
          "Widget\n******\n\n   The widget program is described in this manual.\n   It has two chapters.\n\n"
          "* Menu:\n\n* Use::   How to use it.\n\n\x1f\nFile: widget.info,  Node: Use,  Prev: Top\n\n"
          "   To use the widget, run it from a shell.\n\n     widget --run\n\n   It stops when it is done.\n",
          compress=True)
    write("/usr/share/man/man1/widget.1.gz", MAN_PAGE, compress=True)
    write("/usr/share/man/man1/widget-alias.1", ".so man1/widget.1\n")
    write("/usr/share/man/de/man1/widget.1", ".TH WIDGET 1\n.SH BESCHREIBUNG\nDas ist ein deutscher Text, "
          "der hier nicht hingehört.\nEr ist lang genug.\n")
    readme = "# Widget\n\n" + "\n".join(PROSE) + "\n\n```\nwidget --run\n```\n"
    write("/usr/share/doc/widget/README.md", readme)
    write("/usr/share/doc/widget/changelog.Debian.gz", "widget (1.0-1) unstable; urgency=low\n\n"
          "  * Initial release of the package.\n  * Fix a crash when the file is empty.\n\n"
          " -- Jane Doe <jane@example.org>  Mon, 01 Jan 2024 10:00:00 +0000\n", compress=True)
    write("/usr/share/doc/widget-data/README.md", readme)  # a byte-identical copy: not read
    write("/usr/share/doc/widget/index.html", "<p>The manual in HTML form has one page.</p><p>It is short.</p>")
    write("/usr/share/doc/widget/logo.png", "\x89PNG not text")
    return root


def test_corpus_from_a_fake_tree(fake_root, tmp_path):
    out = tmp_path / "corpus"
    summary = build_corpus(out, default_roots(fake_root), workers=1, progress=False)
    train = read_documents(out / "train.txt") + read_documents(out / "heldout.txt")
    sentences = [s for d in train for s in d]
    assert len(sentences) == len(set(sentences))  # no repeats
    assert all("\n" not in s and s.strip() == s and s for s in sentences)
    text = "\n".join(sentences)
    for wanted in ["The widget tool frobnicates the widgets of a system.", "Widgets for the standard library.",
                   "The widget program is described in this manual.", "It stops when it is done.",
                   "foo reads each FILE, and frobnicates it\u2014quickly.", PROSE[0], PROSE[2],
                   "Fix a crash when the file is empty.", "The manual in HTML form has one page.",
                   "Turn the widget on and return whether it worked."]:
        assert wanted in sentences, wanted
    for unwanted in ["deutscher", "widget --run", "jane@example.org", "urgency", "Tests are not", ">>>",
                     "frobnicate the widgets\n", "Menu", "Fake License"]:
        assert unwanted not in text, unwanted
    src = summary["sources"]
    assert src["licenses"]["sentences"] == 4  # PROSE[0:2] and two more; the doc README keeps only PROSE[2:]
    assert src["doc"]["dropped_duplicates"] == 2
    assert src["man"]["files"] == 2 and src["man"]["documents"] == 1  # the alias has no text
    assert src["doc"]["files"] == 3  # README.md, changelog, index.html: the copy and the PNG are not read
    assert src["apt"]["files"] == 2 and src["apt"]["documents"] == 1  # Packages holds synopses only
    assert "The gadget measures how long a widget runs." in sentences
    assert src["python"]["files"] == 1
    assert summary["total"]["documents"] + summary["total"]["heldout_documents"] == len(train)
    assert "| man |" in (out / "SOURCES.md").read_text()
    # the same corpus whatever the number of worker processes
    build_corpus(tmp_path / "again", default_roots(fake_root), workers=2, progress=False)
    assert (tmp_path / "again" / "train.txt").read_bytes() == (out / "train.txt").read_bytes()


def test_cli_english_corpus(fake_root, tmp_path, capsys):
    out = tmp_path / "cli"
    assert main(["data", "english-corpus", "-o", str(out), "--root", str(fake_root), "--min-mb", "0",
                 "--workers", "1"]) == 0
    assert (out / "train.txt").stat().st_size > 0 and (out / "stats.json").exists()
    assert main(["data", "english-corpus", "-o", str(out), "--root", str(fake_root), "--workers", "1",
                 "--overwrite"]) == 2
    assert "MB of English prose" in capsys.readouterr().err
    assert main(["data", "english-corpus", "-o", str(out), "--sources", "man,nope"]) == 2


def test_python_docs_corpus(tmp_path):
    summaries = tmp_path / "summaries.txt"
    summaries.write_text("json.dumps: Serialize obj to a JSON formatted str.\njson.loads: Deserialize s to a "
                         "Python object.\nabc.ABC: Helper class. It helps.\nos.getcwd: Return the directory.\n")
    summary = python_docs_corpus(summaries, tmp_path / "out", heldout_share=0.0)
    assert read_documents(tmp_path / "out" / "train.txt") == [
        ["Serialize obj to a JSON formatted str.", "Deserialize s to a Python object."],
        ["Helper class.", "It helps."]]  # os has one sentence: too short to be a document
    assert summary["total"]["documents"] == 2


def test_python_docs_corpus_from_the_repo(tmp_path):
    summary = python_docs_corpus(Path(__file__).parents[1] / "data/python-docs/summaries.txt", tmp_path)
    assert summary["total"]["documents"] > 100 and summary["total"]["sentences"] > 2500
