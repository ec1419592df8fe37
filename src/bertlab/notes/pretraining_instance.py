"""The notes' pretraining instance (file 001, "PreTraining" / "准备数据"): google's
create_pretraining_data.py with max_seq_length 15, masked_lm_prob 0.2 and max_predictions_per_seq 2
on the document "it is a good day" / "I want to go out", made by bertlab's port of it
(pretraining.instances / pretraining.masking), which draws from the random generator exactly as
google's does. 15 x 0.2 = 3 > 2, so two pieces are predicted; each is replaced by [MASK] 80% of
the time, by a random piece 10%, and kept 10%."""
import random
from collections import Counter

from ..pretraining.instances import (InstanceOptions, RawSentence, Vocabulary, create_training_instances,
                                     tokenize_documents)
from ..tokenization import BertTokenizer
from . import Shown

DOCUMENT = ["it is a good day", "I want to go out"]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + "it is a good day i want to go out".split()
OPTIONS = InstanceOptions(max_seq_length=15, masked_lm_prob=0.2, max_predictions_per_seq=2, dupe_factor=1,
                          short_seq_prob=0.1)
# The notes show one draw of google's generator; this seed gives that draw (A and B in order,
# "good" and "want" masked). Any seed gives google's instance for that seed (tests/test_notes.py).
SEED = 82

NOTES = {
    "tokens": ["[CLS]", "it", "is", "a", "[MASK]", "day", "[SEP]", "I", "[MASK]", "to", "go", "out", "[SEP]", 0, 0],
    "input_mask": [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0],
    "segment_ids": [0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 0, 0],
    "is_random_next": False,
    "masked_lm_positions": [4, 8],
    "masked_lm_weights": [1, 1],
    "masked_lm_labels": ["good", "want"],
}


def notes_instances(seed: int = SEED) -> list[dict]:
    """The instances of the notes' document for `seed`, as google's TrainingInstance fields in tokens."""
    tokenizer = BertTokenizer({t: i for i, t in enumerate(VOCAB)})
    vocabulary = Vocabulary.of(tokenizer.vocab)
    documents = tokenize_documents([[RawSentence(s) for s in DOCUMENT]], tokenizer, OPTIONS, vocabulary)
    words = tokenizer.vocab.convert_ids_to_tokens
    return [{"tokens": words(i.tokens), "segment_ids": [0] * i.len_a + [1] * (len(i.tokens) - i.len_a),
             "is_random_next": i.is_random_next, "masked_lm_positions": list(i.masked_lm_positions),
             "masked_lm_labels": words(i.masked_lm_labels)}
            for i in create_training_instances(documents, OPTIONS, vocabulary, random.Random(seed), Counter())]


def pretraining_instance() -> Shown:
    shown = Shown("google's masked pretraining instance", "001, PreTraining (准备数据, max_seq_length=15 example)")
    instance = notes_instances()[0]
    pad = OPTIONS.max_seq_length - len(instance["tokens"])
    shown.say(f"document: {' / '.join(DOCUMENT)}; max_seq_length {OPTIONS.max_seq_length}, masked_lm_prob "
              f"{OPTIONS.masked_lm_prob}, max_predictions_per_seq {OPTIONS.max_predictions_per_seq}, seed {SEED}")
    shown.compare("tokens", NOTES["tokens"], instance["tokens"] + [0] * pad)
    shown.compare("input_mask", NOTES["input_mask"], [1] * len(instance["tokens"]) + [0] * pad)
    shown.compare("segment_ids", NOTES["segment_ids"], instance["segment_ids"] + [0] * pad)
    shown.compare("is_random_next", NOTES["is_random_next"], instance["is_random_next"])
    shown.compare("masked_lm_positions", NOTES["masked_lm_positions"], instance["masked_lm_positions"])
    shown.compare("masked_lm_weights", NOTES["masked_lm_weights"], [1] * len(instance["masked_lm_positions"]))
    shown.compare("masked_lm_labels", NOTES["masked_lm_labels"], instance["masked_lm_labels"])
    shown.say("(the notes keep 'I' cased; an uncased vocabulary lower-cases it)")
    shown.values.update(instance=instance)
    return shown
