"""Labelled examples read from tables: TSV, CSV or JSON Lines, with named (or numbered) columns.

`InputExample` is run_classifier.py's: one text (or a pair) and its label. A new file layout is a
new `TableFormat` — the GLUE layouts in glue.py are a few lines each.
"""
import csv
import io
import json
import os
from dataclasses import dataclass

from ..io import decode_lines


@dataclass
class InputExample:
    guid: str  # "file:line", so every message can point back at the row
    text_a: str
    text_b: str | None = None
    label: str | float | None = None


@dataclass(frozen=True)
class TableFormat:
    """Where a table keeps its texts and label. Columns are header names, or 0-based indices for
    files without a header (GLUE's CoLA). Rows without the label column (test sets) read as
    unlabelled examples."""
    text_a: str | int = "sentence"
    text_b: str | int | None = None
    label: str | int | None = "label"
    header: bool = True
    kind: str = "auto"  # tsv | csv | jsonl | auto (by the file's extension)
    quoting: bool = True  # GLUE's TSVs are read as run_classifier reads them: no quote characters


def read_table(path, fmt: TableFormat) -> list[InputExample]:
    """Every row of `path` as an InputExample (label None where the table has no label column).
    Raises ValueError naming the file and line for a ragged row, a missing text column, an empty
    text, and for a file with no rows. (CSV fields spanning several lines are not supported.)"""
    examples = []
    for where, row in read_rows(path, fmt):
        has_label = fmt.label is not None and (fmt.label in row if isinstance(row, dict) else fmt.label < len(row))
        label = field(row, fmt.label, where, "label") if has_label else None
        text_b = field(row, fmt.text_b, where, "text_b") if fmt.text_b is not None else None
        examples.append(InputExample(where, field(row, fmt.text_a, where, "text_a"), text_b, label))
    if not examples:
        raise ValueError(f"{path}: no examples: the file holds no data rows (only a header or blank lines)")
    return examples


def read_rows(path, fmt: TableFormat):
    """(where, row) for every data row of a table: row is a dict (header or JSON) or a list of
    fields; where is "file:line". Ragged rows and bad JSON raise ValueError naming the line."""
    kind = fmt.kind if fmt.kind != "auto" else _kind_from_name(path)
    with open(path, "rb") as f:
        lines = decode_lines(f.read(), path)
    rows = _json_rows(lines, path) if kind == "jsonl" else _delimited_rows(lines, path, kind, fmt)
    for line, row in rows:
        yield f"{path}:{line}", row


def _kind_from_name(path) -> str:
    ext = os.path.splitext(os.fspath(path))[1].lower()
    kinds = {".tsv": "tsv", ".txt": "tsv", ".csv": "csv", ".jsonl": "jsonl", ".json": "jsonl"}
    if ext not in kinds:
        raise ValueError(f"{path}: can't tell the table format from the extension {ext!r}; "
                         "use .tsv, .csv or .jsonl (or name the format)")
    return kinds[ext]


def _json_rows(lines, path):
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}:{number}: not a JSON object ({e.msg})") from None
        if not isinstance(row, dict):
            raise ValueError(f"{path}:{number}: expected a JSON object, got {type(row).__name__}")
        yield number, row


def _delimited_rows(lines, path, kind, fmt):
    delimiter = "\t" if kind == "tsv" else ","
    quoting = csv.QUOTE_MINIMAL if fmt.quoting else csv.QUOTE_NONE
    header, width = None, None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        fields = next(csv.reader(io.StringIO(line), delimiter=delimiter, quoting=quoting), [])
        if fmt.header and header is None:
            header, width = fields, len(fields)
            continue
        if width is None:
            width = len(fields)
        if len(fields) != width:
            raise ValueError(f"{path}:{number}: {len(fields)} fields, but "
                             f"{'the header has' if header else 'the first row has'} {width}")
        yield number, dict(zip(header, fields)) if header else fields


def field(row, column, where, role):
    """One column of a row; a missing column or (for texts) an empty one is a ValueError naming
    the row and the columns it does have."""
    try:
        value = row[column]
    except (KeyError, IndexError):
        have = ", ".join(map(repr, row)) if isinstance(row, dict) else f"{len(row)} columns"
        raise ValueError(f"{where}: no column {column!r} for the {role} (the row has {have})") from None
    if role != "label" and not str(value).strip():
        raise ValueError(f"{where}: the {role} column {column!r} is empty")
    return value if role == "label" else str(value)
