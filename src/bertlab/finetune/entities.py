"""Entities in tag sequences and the entity-level scores of CoNLL NER.

A tag is `O` (outside every entity) or a prefix and a type joined by "-": B-PER begins an entity,
I-PER continues it, and in BIOES (IOBES) E-PER ends one and S-PER is a one-word entity.

The chunk rules are conlleval.pl's, as seqeval's default (non-strict) mode applies them to both
schemes. They are lenient, because a tagger's output is often malformed and conlleval still scores it:

* an entity ends after E-X or S-X, before B-, S- or O, and wherever the type changes;
* an entity starts at B-X or S-X, at I-X or E-X after O, E- or S- (an I-X with no B-X before it
  opens an entity rather than being dropped), and wherever the type changes.

So `O I-PER I-PER` is one PER entity, `B-PER I-LOC` is two entities, `B-PER E-PER E-PER` is two.
seqeval's strict mode instead drops chunks the scheme forbids; on well-formed sequences the two agree.

Scores are micro-averaged over entities: an entity is right only if its type and both boundaries
are; an undefined ratio (nothing predicted, nothing to find) counts as 0, as in seqeval.
"""
from typing import NamedTuple

SCHEMES = {"BIO": "BI", "BIOES": "BIES"}  # the entity prefixes each scheme allows


class Entity(NamedTuple):
    type: str
    start: int  # first word
    end: int  # one past the last word, as in a Python slice


def split_tag(tag: str) -> tuple[str, str]:
    """("B", "PER") from "B-PER"; ("O", "") from "O"."""
    return ("O", "") if tag == "O" else (tag[0], tag[2:])


def tag_problem(tag: str, scheme: str = "BIO") -> str | None:
    """Why `tag` is not a tag of `scheme`, or None when it is one."""
    prefixes = SCHEMES[scheme]
    if tag == "O" or (len(tag) > 2 and tag[0] in prefixes and tag[1] == "-"):
        return None
    allowed = ", ".join(f"{p}-TYPE" for p in prefixes)
    return f"tag {tag!r} is not O, {allowed} (scheme {scheme})"


def _ends(prev: tuple[str, str], cur: tuple[str, str]) -> bool:
    """Whether an entity ends between a word tagged `prev` and the next, tagged `cur`."""
    return prev[0] != "O" and (prev[0] in "ES" or cur[0] in "BSO" or prev[1] != cur[1])


def _starts(prev: tuple[str, str], cur: tuple[str, str]) -> bool:
    """Whether an entity starts at a word tagged `cur` that follows one tagged `prev`."""
    return cur[0] != "O" and (cur[0] in "BS" or prev[0] in "ESO" or prev[1] != cur[1])


def get_entities(tags: list[str]) -> list[Entity]:
    """The entities of one sentence's tags, in order (the rules of the module docstring)."""
    entities, start, prev = [], 0, ("O", "")
    # A trailing O closes an entity still open at the sentence's end.
    for i, cur in enumerate(map(split_tag, [*tags, "O"])):
        if _ends(prev, cur):
            entities.append(Entity(prev[1], start, i))
        if _starts(prev, cur):
            start = i
        prev = cur
    return entities


def _ratios(correct: int, predicted: int, actual: int) -> dict:
    precision = correct / predicted if predicted else 0.0
    recall = correct / actual if actual else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1, "support": actual}


def _check_lengths(gold: list[list[str]], pred: list[list[str]]) -> None:
    if len(gold) != len(pred):
        raise ValueError(f"{len(gold)} gold sentences but {len(pred)} predicted ones")
    for i, (g, p) in enumerate(zip(gold, pred)):
        if len(g) != len(p):
            raise ValueError(f"sentence {i}: {len(g)} gold tags but {len(p)} predicted ones")


def _entity_sets(sentences: list[list[str]]) -> set[tuple[int, Entity]]:
    return {(i, e) for i, tags in enumerate(sentences) for e in get_entities(tags)}


def entity_scores(gold: list[list[str]], pred: list[list[str]]) -> dict:
    """Micro precision, recall, F1 and support (gold entities) over all sentences, and the same
    per entity type under "per_type" (every type found in gold or pred, sorted)."""
    _check_lengths(gold, pred)
    gold_set, pred_set = _entity_sets(gold), _entity_sets(pred)
    scores = _ratios(len(gold_set & pred_set), len(pred_set), len(gold_set))
    types = sorted({e.type for _, e in gold_set | pred_set})
    scores["per_type"] = {t: _ratios(sum(e.type == t for _, e in gold_set & pred_set),
                                     sum(e.type == t for _, e in pred_set),
                                     sum(e.type == t for _, e in gold_set)) for t in types}
    return scores


def token_accuracy(gold: list[list[str]], pred: list[list[str]]) -> float:
    """The share of words whose predicted tag equals the gold one (0 when there are none)."""
    _check_lengths(gold, pred)
    pairs = [(g, p) for gs, ps in zip(gold, pred) for g, p in zip(gs, ps)]
    return sum(g == p for g, p in pairs) / len(pairs) if pairs else 0.0
