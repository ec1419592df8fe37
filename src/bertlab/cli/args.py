"""Argument types shared by every command: a number outside its range is refused by argparse
(exit 2, the flag and the value named) before any work starts. The checks themselves are the
library's (bertlab.validate), so Python callers get the same ones."""
import argparse
import codecs

from .. import validate


def _type(check, kind: str, parse):
    def convert(text: str):
        try:
            value = parse(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {kind}") from None
        try:
            return check("value", value)
        except ValueError as e:
            raise argparse.ArgumentTypeError(f"{text}: {str(e).split(': ', 1)[1]}") from None
    convert.__name__ = kind  # argparse names the type in its own messages
    return convert


positive_int = _type(validate.positive_int, "a whole number", int)
nonnegative_int = _type(validate.nonnegative_int, "a whole number", int)
positive_float = _type(validate.positive_float, "a number", float)
nonnegative_float = _type(validate.nonnegative_float, "a number", float)
fraction = _type(validate.fraction, "a number", float)
positive_fraction = _type(validate.positive_fraction, "a number", float)
fraction_below_one = _type(validate.fraction_below_one, "a number", float)


def escaped_text(text: str) -> str:
    """Command-line text with backslash escapes (\\n, \\t, \\\\, \\u4e2d) read as such, and every other
    character, Chinese included, kept as it is (Python's unicode_escape codec would turn non-ASCII
    characters into mojibake, since it reads its input as Latin-1)."""
    out, i = [], 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text):
            j = i + 2
            if text[i + 1] in "xuU":
                j += {"x": 2, "u": 4, "U": 8}[text[i + 1]]
            elif text[i + 1] in "01234567":
                while j < min(i + 4, len(text)) and text[j] in "01234567":
                    j += 1
            try:
                out.append(codecs.decode(text[i:j], "unicode_escape"))
                i = j
                continue
            except UnicodeDecodeError:
                pass
        out.append(text[i])
        i += 1
    return "".join(out)
