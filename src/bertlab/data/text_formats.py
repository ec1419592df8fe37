"""Paragraphs of running text out of the formats documentation comes in on a Linux machine:
roff manual pages (man(7), a little of mdoc(7)), HTML, and plain text / Markdown / reStructuredText
(READMEs, changelogs, licences, info files, docstrings).

Each converter returns a list of paragraphs (one string each, line breaks kept or not: the
sentence splitter joins them) and leaves out what is not prose: code and example blocks,
tables, headings, synopses, changelog entry headers and mail header lines. What slips through
is caught sentence by sentence by `sentences.is_prose`.
"""
import re
from html.parser import HTMLParser

# ---- roff ----------------------------------------------------------------------------------

ROFF_CHARS = {"em": "\u2014", "en": "\u2013", "hy": "-", "mi": "-", "aq": "'", "oq": "'", "cq": "'", "lq": '"',
              "rq": '"', "dq": '"', "co": "\u00a9", "rg": "\u00ae", "tm": "\u2122", "mu": "\u00d7", "ti": "~",
              "ha": "^", "ga": "`", "bu": "", "sq": "", "lh": "", "rh": "", "Tm": "\u2122", "R": "\u00ae"}
_ROFF_ESCAPE = re.compile(r"""\\(?:
      (?P<named>\((?P<two>..)|\[(?P<long>[^\]\s]*)\]|\*(?:\((?P<str2>..)|\[(?P<strl>[^\]]*)\]|(?P<str1>.)))
    | (?:f|F)(?:\(..|\[[^\]]*\]|.) | s[-+]?(?:\d|\(\d\d|\[\d+\]) | [hvwlLDbxXoSRZ]'[^']*' | N'(?P<num>\d+)'
    | n[-+]?(?:\(..|\[[^\]]*\]|.) | [kgYmM](?:\(..|\[[^\]]*\]|.) | [zc&:/,%^|!{}] | (?P<space>[ ~0t])
    | (?P<dash>-) | (?P<backslash>e|\\) | .)""", re.VERBOSE)
# Sections that are lists of names, command lines or boilerplate, not prose.
SKIP_SECTIONS = {"NAME", "SYNOPSIS", "SEE ALSO", "COLOPHON", "AUTHOR", "AUTHORS", "FILES", "ENVIRONMENT"}
_BREAKS = {"PP", "P", "LP", "sp", "br", "TP", "IP", "HP", "RS", "RE", "in", "ti", "bp", "TQ", "Pp", "Bl", "El", "It",
           "Lp", "Dl", "ne", "PD"}
_SKIP_BLOCKS = {"nf": "fi", "EX": "EE", "TS": "TE", "de": "..", "ig": "..", "PS": "PE", "EQ": "EN", "MT": "ME",
                "Bd": "Ed", "Rs": "Re", "SY": "YS", "am": ".."}
_FONT_MACROS = {"B", "I", "SM", "SB", "BI", "BR", "IB", "IR", "RB", "RI", "UR", "UE", "Em", "Sy", "Nm", "Ar", "Pa",
                "Cm", "Li", "Ev", "Va", "Dv", "Ql", "Dq", "Sq", "Qq", "Pq", "Xr", "Fl", "Fn", "Tn", "Ux", "No", "Ns",
                "Op", "Ic", "Er", "Ad", "Ms", "Aq", "Bq", "An", "Lk"}
_ALTERNATING = {"BI", "BR", "IB", "IR", "RB", "RI"}  # fonts alternate word by word, no spaces between
_MDOC_WORD = re.compile(r"^(?:[A-Z][a-z][a-z]?)$")  # Ar, Pa, Fl, Xr, Nm, Ns, Op, Oo, Oc, Dq, ...
_ARG = re.compile(r'"((?:[^"]|"")*)"?|(\S+)')


def _roff_escape(m) -> str:
    if m.group("named"):
        name = m.group("two") or m.group("long") or m.group("str2") or m.group("strl") or m.group("str1")
        if name.startswith("u") and len(name) in (5, 6) and all(c in "0123456789ABCDEFabcdef" for c in name[1:]):
            return chr(int(name[1:], 16))
        return ROFF_CHARS.get(name, "")
    if m.group("num"):
        return chr(int(m.group("num")))
    if m.group("space"):
        return " "
    if m.group("dash"):
        return "-"
    if m.group("backslash"):
        return "\\"
    return ""


def roff_text(line: str) -> str:
    """One line of roff with its escapes (fonts, sizes, named characters, strings) resolved."""
    return _ROFF_ESCAPE.sub(_roff_escape, line) if "\\" in line else line


def _macro_args(rest: str) -> list[str]:
    return [m.group(1).replace('""', '"') if m.group(2) is None else m.group(2) for m in _ARG.finditer(rest)]


def _mdoc_text(tokens: list[str], page_name: str) -> str:
    """The words of an mdoc line: `Fl x` is "-x", `Xr ls 1` is "ls(1)", a bare `Nm` is the page's
    name, `Ns` glues words, punctuation sticks to the word before it, other macro names vanish."""
    out, prefix, glue, i = "", "", False, 0
    while i < len(tokens):
        t = tokens[i]
        following = tokens[i + 1] if i + 1 < len(tokens) else None
        if t == "Xr" and i + 2 < len(tokens):
            t, i = f"{tokens[i + 1]}({tokens[i + 2]})", i + 2
        elif t == "Nm" and (following is None or _MDOC_WORD.match(following) or len(following) == 1):
            t = page_name
        elif t == "Ux":
            t = "UNIX"
        elif t == "Fl":
            prefix, t = "-", ""
        elif t in ("Ns", "Pf"):
            glue, t = True, ""
        elif _MDOC_WORD.match(t):
            t = ""
        if t:
            if len(t) == 1 and t in ".,:;)]?!" or glue or not out:
                out += prefix + t
            else:
                out += " " + prefix + t
            prefix, glue = "", False
        i += 1
    return out


def roff_paragraphs(source: str) -> list[str]:
    """The prose paragraphs of a manual page's roff source (no-fill blocks, tables, macro
    definitions and the SYNOPSIS-like sections left out; an alias page (`.so`) has none)."""
    paragraphs, current = [], []
    skip_until, skip_section, drop_tag, page_name = None, False, False, ""

    def flush():
        if current:
            paragraphs.append(" ".join(current))
            current.clear()

    for line in source.split("\n"):
        if line.startswith((".", "'")):
            request = line[1:].lstrip()
            macro, _, rest = request.partition(" ")
            macro = macro.rstrip()
            if skip_until is not None:
                if macro == skip_until or (skip_until == ".." and request.startswith(".")):
                    skip_until = None
                continue
            if not macro or macro.startswith(('\\"', "\\}")):  # a comment, the end of a conditional block
                continue
            if macro in ("SH", "Sh", "SS", "Ss"):
                flush()
                title = roff_text(" ".join(_macro_args(rest))).strip().upper()
                if macro in ("SH", "Sh"):
                    skip_section = title in SKIP_SECTIONS
                continue
            if macro == "so":
                return []
            if macro in _SKIP_BLOCKS:
                flush()
                if macro != "Bd" or "-literal" in rest or "-unfilled" in rest:
                    skip_until = _SKIP_BLOCKS[macro]
                continue
            if macro in _BREAKS:
                flush()
                drop_tag = macro in ("TP", "TQ")  # the next line is the tag (an option), not prose
                continue
            if macro == "Nm" and rest.strip() and not page_name:
                page_name = rest.split()[0]
            if macro not in _FONT_MACROS or skip_section:
                continue
            args = _macro_args(roff_text(rest))
            if macro[1:].islower():  # mdoc: arguments may be macros too
                text = _mdoc_text([macro] + args, page_name)
            else:
                text = ("" if macro in _ALTERNATING else " ").join(args)
        else:
            if skip_until is not None or skip_section:
                continue
            if line.startswith((" ", "\t")):
                flush()  # a leading space breaks the line in roff: hand-aligned text
            text = roff_text(line)
        if drop_tag:
            drop_tag = False
            continue
        if text.strip():
            current.append(text.strip())
    flush()
    return paragraphs


# ---- HTML ----------------------------------------------------------------------------------

class _HtmlParagraphs(HTMLParser):
    BLOCK = frozenset("p div li dd dt br blockquote section article ul ol dl hr body main aside figure "
                      "figcaption details summary form".split())
    SKIP = frozenset("script style pre table head nav header footer h1 h2 h3 h4 h5 h6 title svg math textarea "
                     "select button object".split())  # code, tables, headings, page furniture

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.paragraphs, self.current, self.skip = [], [], 0

    def flush(self):
        text = " ".join("".join(self.current).split())
        if text:
            self.paragraphs.append(text)
        self.current = []

    def handle_starttag(self, tag, attrs):
        if tag in self.SKIP:
            self.flush()
            self.skip += 1
        elif tag in self.BLOCK:
            self.flush()

    def handle_endtag(self, tag):
        if tag in self.SKIP:
            self.skip = max(0, self.skip - 1)
        if tag in self.SKIP or tag in self.BLOCK:
            self.flush()

    def handle_data(self, data):
        if not self.skip:
            self.current.append(data)


def html_paragraphs(source: str) -> list[str]:
    """Text of the block elements of an HTML page (headings, tables, <pre> and scripts left out)."""
    parser = _HtmlParagraphs()
    parser.feed(source)
    parser.close()
    parser.flush()
    return parser.paragraphs


# ---- plain text, Markdown, reStructuredText ------------------------------------------------

_BULLET = re.compile(r"^\s*(?:[*+\u2022-]|\d{1,2}[.)]|\([a-z0-9]\)|[a-z][.)])\s+")
_NOT_TEXT = re.compile(
    r"^\s*(?:#{1,6}\s|[=\-~^*+#_.:`'\"]{3,}\s*$|[+|].*[+|]\s*$|\.\.\s|>>>|\.\.\.\s|\$\s|%\s|#!|@\w"
    r"|(?:From|To|Cc|Date|Subject|Signed-off-by|Reviewed-by|Acked-by|Reported-by|Tested-by|Co-authored-by|"
    r"Author|AuthorDate|Committer|CommitDate|Merge|File|Node):\s|commit [0-9a-f]{7,}|\*\s[^:]*::"
    r"|\S+ \([^)]*\) [\w.-]+(?:[ \w-]*)?; urgency="  # a Debian changelog entry header
    r"|-- \S.*<.*>"  # a Debian changelog trailer (maintainer, date)
    r"|\d{4}-\d\d-\d\d\s|\w{3} \w{3} +\d+ [\d:]+ \d{4}"  # a GNU ChangeLog entry header
    r")")
# A line of code, a shell prompt, an assignment or a table row, anywhere in a block.
_CODE_OR_TABLE = re.compile(
    r"\S {3,}\S|\t\S.*\t|\|.*\||[;{}\\]$"
    r"|^\s*(?:[$#>] |\w+ ?= ?\S|import |from \S+ import|def |class \w+[:(]|if .*:$)", re.MULTILINE)
_GNU_ENTRY = re.compile(r"^[\w./+-]+(?:,\s*[\w./+-]+)*(?:\s*\([^)]*\))?(?:\s*\[[^\]]*\])?:\s+")  # "src/a.c (f): "
_MD_INLINE = [(re.compile(r":[\w:]+:`~?([^`<]*?)(?:\s*<[^>]*>)?`"), r"\1"),  # rst roles :func:`x`
              (re.compile(r"`([^`<]+?)\s*<[^>]*>`_{1,2}"), r"\1"),  # rst links `text <url>`_
              (re.compile(r"!\[[^\]]*\]\([^)]*\)"), ""), (re.compile(r"\[([^\]]+)\]\([^)]*\)"), r"\1"),
              (re.compile(r"\[([^\]]+)\]\[[^\]]*\]"), r"\1"), (re.compile(r"</?[a-zA-Z][^>]*>"), ""),
              (re.compile(r"(\*\*|__)(\S.*?\S|\S)\1"), r"\2"), (re.compile(r"`+([^`]+)`+"), r"\1"),
              (re.compile(r"(?<=\w)_{1,2}\b"), "")]


def text_paragraphs(source: str, markup: str = "plain", code_indent: int | None = None) -> list[str]:
    """Paragraphs (blank-line separated blocks, list items apart) of plain text, Markdown or
    reStructuredText, without fenced or literal blocks, tables, headings and changelog headers.

    code_indent: a block whose first line is indented at least this far is an example (info
    files indent examples by 5 columns; Markdown indents code by 4)."""
    paragraphs, block = [], []
    in_fence = literal = skip_block = False

    def flush():
        if block:
            text = "\n".join(block)
            if not _CODE_OR_TABLE.search(text):
                text = " ".join(text.split())
                if markup != "plain":
                    for pattern, repl in _MD_INLINE:
                        text = pattern.sub(repl, text)
                paragraphs.append(text)
            block.clear()

    for line in source.split("\n"):
        body = line.strip()
        if markup != "plain" and body.startswith(("```", "~~~")):
            flush()
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        if not body:
            flush()
            skip_block = False
            continue
        indented = line[0] in " \t"
        if literal:  # an rst literal block: everything indented after "::"
            if indented:
                continue
            literal = False
        if skip_block:
            continue
        if not block and code_indent is not None and indented and \
                len(line) - len(line.lstrip()) >= code_indent and not _BULLET.match(line):
            skip_block = True  # an indented example, to its end
            continue
        if _NOT_TEXT.match(line):
            flush()
            if markup == "rst" and body.startswith(".. ") and body.endswith("::") and "code" in body:
                literal = True
            continue
        bullet = _BULLET.match(line)
        if bullet:
            flush()
            body = line[bullet.end():].strip()
            if markup == "plain":
                body = _GNU_ENTRY.sub("", body, count=1)
        block.append(body)
        if markup == "rst" and body.endswith("::"):
            block[-1] = body[:-1]
            flush()
            literal = True
    flush()
    return paragraphs
