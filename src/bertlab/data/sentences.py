"""Sentences of English prose: a small rule-based splitter and the test that a sentence is prose.

`split_sentences` cuts a paragraph after ".", "!" or "?" (and any closing quotes or brackets) when
whitespace and a capital letter, digit or opening quote follow, unless the word ending there is an
abbreviation that never ends a sentence ("e.g.", "i.e.", "Dr.", "vs.", "et al."), a single
initial ("J. Smith") or a numbered item ("No. 5"). A period inside a token (a version "1.2.3", a
file name "setup.py", "www.example.org") is never a boundary, because no whitespace follows it.

`is_prose` keeps a sentence only if it reads as English prose: a few words, mostly letters, enough
English function words, nothing that looks like code, an e-mail address or a table row.
"""
import re

# Abbreviations after which a capital letter does not start a new sentence ("e.g. Linux").
# "etc." is not here: it ends sentences as often as not, and before a capital it usually does.
ABBREVIATIONS = frozenset("""
    e.g i.e cf vs viz al approx ca resp incl esp
    mr mrs ms dr prof sr jr st mt
    fig figs eq eqs ref refs sec ch vol vols no nos pp p art op
    jan feb mar apr jun jul aug sep sept oct nov dec
    inc ltd co corp dept univ
""".split())

_BOUNDARY = re.compile(r"""[.!?]+["')\]]*(?=\s+["'(\[]?[A-Z0-9])""")

# Words that make up a large share of any English text and little of any other language's.
FUNCTION_WORDS = frozenset("""
    a an the this that these those it its is are was were be been being has have had do does did
    will would shall should can could may might must not no of to in on at by for from with without
    as and or but if then than so such which who whom whose what when where while how all any each
    every some more most other into onto over under about after before between through during you
    your we our they their he she his her there here also only same one two only very
""".split())

_EMAIL = re.compile(r"[\w.+-]+@[\w-]+\.[\w.-]+|<[^<>\s]+@[^<>\s]+>")
_CODE = re.compile(r"[{};]\s*$|[{}]|==|!=|->|=>|&&|\|\||::|#include|^\s*(def|class|import|return)\s|\w\(\)\s*[;{]|^\$ ")
_SYMBOL = re.compile(r"[{}\[\]<>=|\\$#@*_~^`]")
_WORD = re.compile(r"[\w'-]+")


def split_sentences(paragraph: str) -> list[str]:
    """The sentences of one paragraph (its line breaks and runs of spaces become single spaces)."""
    text = " ".join(paragraph.split())
    sentences, start = [], 0
    for m in _BOUNDARY.finditer(text):
        if m.group().startswith(".") and not _ends_sentence(text[start:m.start()]):
            continue
        sentences.append(text[start:m.end()])
        start = m.end() + 1  # the single space that follows
    if start < len(text):
        sentences.append(text[start:])
    return sentences


def _ends_sentence(before: str) -> bool:
    """Whether a period after `before` (the text of the sentence so far) can end the sentence."""
    word = before.rsplit(" ", 1)[-1].lstrip("\"'([")
    if not word:
        return True
    if word.lower() in ABBREVIATIONS:
        return False
    if len(word) == 1 and word.isupper():  # an initial: "J. Smith"
        return False
    return not re.fullmatch(r"(?:[A-Za-z]\.)+[A-Za-z]", word)  # "e.g", "U.S": an abbreviation


def is_prose(sentence: str, min_words: int = 3, max_chars: int = 1000) -> bool:
    """Whether `sentence` reads as English prose rather than code, a table row, a heading, an address."""
    n = len(sentence)
    if not n or n > max_chars or sentence[-1] not in ".!?:\"')":
        return False
    words = _WORD.findall(sentence.lower())
    if len(words) < min_words:
        return False
    letters = sum(map(str.isalpha, sentence))
    if letters < 0.65 * n or len(_SYMBOL.findall(sentence)) > 0.03 * n + 1:
        return False
    if not sentence.isascii() and sum(not c.isascii() for c in sentence if c.isalpha()) > 0.05 * letters:
        return False  # mostly another script
    if sum(map(FUNCTION_WORDS.__contains__, words)) < max(1, 0.12 * len(words)):
        return False
    return not (("@" in sentence and _EMAIL.search(sentence)) or _CODE.search(sentence))
