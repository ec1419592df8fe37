"""Relation extraction with entity markers: which relation a sentence states between two marked
entities (the notes' recipe, file 001, downstream tasks; Baldini Soares et al. 2019, "Matching the
Blanks", the ENTITY MARKERS - ENTITY START variant).

The two entities are wrapped in four new special tokens, never split by WordPiece and given fresh
embedding rows (special_tokens.py):

    [CLS] the [E1] company [/E1] fabricates plastic [E2] chairs [/E2] . [SEP]

and the relation is read from the encoder's last-layer vectors at the two start markers [E1] and
[E2], concatenated (2 x hidden) and fed to one linear layer. The [CLS] vector is not used: it sums
up the sentence, where the marker vectors say what the sentence says about each entity.

Two file layouts:
- SemEval-2010 Task 8: `8001<TAB>"The <e1>company</e1> fabricates plastic <e2>chairs</e2>."`, then
  the label line (`Product-Producer(e2,e1)`), an optional `Comment:` line and a blank line; a test
  file without label lines reads as unlabelled.
- TACRED: a JSON array (or JSON Lines) of objects with `token` (the words), `subj_start`,
  `subj_end`, `obj_start`, `obj_end` (inclusive word indices) and `relation`; the subject is E1.
"""
import json
import os
import re
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from ..io import decode_lines
from .classification import SequenceClassificationTask

MARKERS = ("[E1]", "[/E1]", "[E2]", "[/E2]")
SEMEVAL_SENTENCE = re.compile(r'^\s*(\d+)\t"(.*)"\s*$')
TACRED_FIELDS = ("token", "subj_start", "subj_end", "obj_start", "obj_end")


@dataclass
class RelationExample:
    guid: str  # "file:line"
    text: str  # the sentence with the four markers in it, words separated by spaces
    label: str | None = None


# --- reading ----------------------------------------------------------------------------------------
def mark_words(words: list[str], e1: tuple[int, int], e2: tuple[int, int]) -> str:
    """The words with [E1] ... [/E1] around words e1[0]..e1[1] and [E2] ... [/E2] around e2's (inclusive)."""
    out = []
    for i, word in enumerate(words):
        out += [m for m, at in (("[E1]", e1[0]), ("[E2]", e2[0])) if at == i]
        out.append(word)
        out += [m for m, at in (("[/E2]", e2[1]), ("[/E1]", e1[1])) if at == i]
    return " ".join(out)


def mark_semeval(sentence: str, where: str) -> str:
    """`<e1>x</e1>` and `<e2>y</e2>` turned into the special markers; each tag once, opened before closed."""
    for n in ("1", "2"):
        opened, closed = sentence.count(f"<e{n}>"), sentence.count(f"</e{n}>")
        if (opened, closed) != (1, 1) or sentence.index(f"<e{n}>") > sentence.index(f"</e{n}>"):
            raise ValueError(f"{where}: entity marker <e{n}>...</e{n}> missing or malformed "
                             f"({opened} opening, {closed} closing); a relation example needs both entities marked")
    for tag, marker in zip(("<e1>", "</e1>", "<e2>", "</e2>"), MARKERS):
        sentence = sentence.replace(tag, f" {marker} ")
    return " ".join(sentence.split())


def read_semeval(path) -> list[RelationExample]:
    with open(path, "rb") as f:
        lines = decode_lines(f.read(), path)
    examples, current = [], None
    for number, line in enumerate(lines, 1):
        match = SEMEVAL_SENTENCE.match(line)
        if match:
            current = RelationExample(f"{path}:{number}", mark_semeval(match.group(2), f"{path}:{number}"))
            examples.append(current)
        elif not line.strip() or line.startswith("Comment"):
            continue
        elif current is not None and current.label is None:
            current.label = line.strip()
        else:
            raise ValueError(f"{path}:{number}: expected a sentence line 'ID<TAB>\"...<e1>...</e1>...<e2>...</e2>...\"'"
                             f" or its label, got {line[:60]!r}")
    if not examples:
        raise ValueError(f"{path}: no relation examples (SemEval-2010 Task 8 layout: 'ID<TAB>\"sentence\"' lines)")
    return examples


def json_objects(path):
    """(line, object) for each object of a JSON array or of JSON Lines, the line where it starts."""
    with open(path, "rb") as f:
        text = "\n".join(decode_lines(f.read(), path))
    line_of = lambda pos: text.count("\n", 0, pos) + 1  # noqa: E731
    decoder, pos = json.JSONDecoder(), len(text) - len(text.lstrip())
    is_array = text[pos:pos + 1] == "["
    pos += is_array
    while True:
        while pos < len(text) and (text[pos].isspace() or (is_array and text[pos] == ",")):
            pos += 1
        if pos >= len(text) or (is_array and text[pos] == "]"):
            return
        try:
            value, end = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}:{line_of(e.pos)}: not JSON ({e.msg})") from None
        if not isinstance(value, dict):
            raise ValueError(f"{path}:{line_of(pos)}: expected a JSON object, got {type(value).__name__}")
        yield line_of(pos), value
        pos = end


def read_tacred(path) -> list[RelationExample]:
    examples = []
    for line, row in json_objects(path):
        where = f"{path}:{line}"
        missing = [k for k in TACRED_FIELDS if k not in row]
        if missing:
            raise ValueError(f"{where}: entity marker position missing: no {', '.join(missing)} "
                             f"(a TACRED example needs {', '.join(TACRED_FIELDS)})")
        words, n = row["token"], len(row["token"])
        spans = [(row["subj_start"], row["subj_end"]), (row["obj_start"], row["obj_end"])]
        for name, (start, end) in zip(("subject", "object"), spans):
            if not (isinstance(start, int) and isinstance(end, int) and 0 <= start <= end < n):
                raise ValueError(f"{where}: the {name} span {start}..{end} is not inside the {n} tokens")
        if spans[0][0] <= spans[1][1] and spans[1][0] <= spans[0][1]:
            raise ValueError(f"{where}: the subject {spans[0]} and object {spans[1]} spans overlap")
        label = row.get("relation")
        examples.append(RelationExample(where, mark_words([str(w) for w in words], *spans),
                                        None if label is None else str(label)))
    if not examples:
        raise ValueError(f"{path}: no relation examples (TACRED layout: a JSON array of objects)")
    return examples


def read_relations(path, kind: str = "auto") -> list[RelationExample]:
    """SemEval-2010 Task 8 text or TACRED JSON, by `kind` or (auto) by the file's extension."""
    if kind == "auto":
        kind = "tacred" if os.fspath(path).lower().endswith((".json", ".jsonl")) else "semeval"
    if kind not in ("semeval", "tacred"):
        raise ValueError(f"relation format {kind!r}: choose semeval, tacred or auto")
    return read_semeval(path) if kind == "semeval" else read_tacred(path)


# --- the task -----------------------------------------------------------------------------------------
class RelationTask(SequenceClassificationTask):
    """Classification of a marked entity pair; metric macro-F1 over the relation labels."""
    name = "relation"
    metric = "macro_f1"
    special_tokens = MARKERS

    def __init__(self, labels=None, max_seq_length=128, *, format="auto", metric=None):
        super().__init__(labels, max_seq_length, metric=metric or "macro_f1")
        if format not in ("auto", "semeval", "tacred"):
            raise ValueError(f"relation format {format!r}: choose semeval, tacred or auto")
        self.options = {"format": format, "metric": self.metric}

    def read(self, path):
        return read_relations(path, self.options["format"])

    def target_fields(self):
        return ["label", "entity_positions"]

    def featurize(self, examples, tokenizer):
        missing = [m for m in MARKERS if m not in tokenizer.special_tokens]
        if missing:
            raise ValueError(f"the tokenizer lacks the entity markers {missing}: fine-tune with them added "
                             "(the relation task adds them) or load a folder fine-tuned for relations")
        e1, e2 = tokenizer.convert_tokens_to_ids(["[E1]", "[E2]"])
        cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
        features = []
        for i, (e, ids) in enumerate(zip(examples, tokenizer.tokenize_ids_batch([e.text for e in examples],
                                                                                add_special_tokens=False))):
            window, truncated = self._window(ids, [ids.index(e1), ids.index(e2)])
            positions = [window.index(e1) + 1, window.index(e2) + 1]  # + 1: [CLS] comes first
            features.append({**self._feature(i, e, [cls, *window, sep], [0] * (len(window) + 2), truncated),
                             "entity_positions": positions})
        return features

    def _window(self, ids, starts):
        """The pieces, cut to max_seq_length - 2 when too long: a window with the two start markers
        centred in it or, where they are further apart than that, half a window from each marker on
        (the middle between the entities is cut out)."""
        room = self.max_seq_length - 2
        if len(ids) <= room:
            return ids, False
        first, last = min(starts), max(starts)
        if last - first >= room:
            half = room // 2
            return ids[first:first + half] + ids[last:last + room - half], True
        begin = min(max(0, first - (room - (last - first + 1)) // 2), len(ids) - room)
        return ids[begin:begin + room], True

    def forward(self, model, batch):
        return model(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"], batch["entity_positions"])

    def loss(self, outputs, batch):
        return F.cross_entropy(outputs.float(), batch["label"])

    def predictions(self, examples, features, outputs):
        probs = torch.softmax(torch.tensor(np.stack(outputs)), -1).numpy()
        return [{"id": e.guid, "label": self.labels[int(p.argmax())], "probability": round(float(p.max()), 6),
                 "text": e.text, **({"gold": e.label} if e.label is not None else {})}
                for e, p in zip(examples, probs)]
