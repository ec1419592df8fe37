"""Tokenizing a text file: one line of WordPiece tokens (or ids) per input line, for `bertlab
tokenize`. Lines go through the batched tokenizer a chunk at a time, so a big file streams."""
import os
from collections.abc import Iterator

from ..io import decode_lines, read_input, read_lines
from .bert_tokenizer import BertTokenizer
from .vocab import CLS, SEP, UNK

CHUNK = 10_000  # lines per batch: big enough to amortise, small enough to stream


def text_lines(path, allow_empty_file: bool = False, max_bytes: int | None = None, what: str = "file") -> list[str]:
    """The lines of a line-based text input (prompts, sentences to translate, references, merges.txt,
    vectors.txt; "-" is standard input), read with io.read_lines (or, with `max_bytes`, refused
    before reading when larger); CRLF line ends as io.decode_lines reads them."""
    if max_bytes is None or os.fspath(path) == "-":
        return read_lines(path, allow_empty_file)
    return decode_lines(read_input(path, max_bytes, what=what), path, allow_empty_file)


def tokenize_file(vocab: str, file: str = "-", cased: bool = False, ids: bool = False) -> Iterator[str]:
    """The tokens (or with `ids`, the token ids) of each line of `file` ('-': stdin), joined by single
    spaces, no [CLS]/[SEP] added; an empty line gives an empty line. `vocab` is vocab.txt or a folder
    holding it. A file that is not a BERT vocabulary, or an empty input file, is an error before the
    first line is returned."""
    vocab_file = os.path.join(vocab, "vocab.txt") if os.path.isdir(vocab) else vocab
    tokenizer = BertTokenizer(vocab_file, do_lower_case=not cased)
    for token in (UNK, CLS, SEP):  # a file that is not a BERT vocabulary fails now, not mid-output
        tokenizer.vocab.special_id(token, "every BERT vocabulary")
    return _tokenized(tokenizer, read_lines(file), ids)


def _tokenized(tokenizer: BertTokenizer, lines: list[str], ids: bool) -> Iterator[str]:
    names = tokenizer.vocab.id_to_token
    for start in range(0, len(lines), CHUNK):
        for row in tokenizer.tokenize_ids_batch(lines[start:start + CHUNK], add_special_tokens=False):
            yield " ".join(map(str, row)) if ids else " ".join([names[i] for i in row])
