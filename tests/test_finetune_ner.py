"""Token classification: the CoNLL reader, label alignment, sliding windows, entity metrics against
seqeval, and a tiny BERT that learns to tag."""
import random
import types
import warnings

import numpy as np
import pytest
import torch

from bertlab.finetune.entities import Entity, entity_scores, get_entities, token_accuracy
from bertlab.finetune.ner import IGNORE, InputExample, TokenClassificationTask, read_conll
from bertlab.models.bert_config import BertConfig
from bertlab.tokenization.bert_tokenizer import BertTokenizer

GOOD = ("-DOCSTART- -X- -X- O\n\n"
        "EU NNP B-NP B-ORG\nrejects VBZ B-VP O\nGerman JJ B-NP B-MISC\n\n\n"
        "Peter\tB-PER\nBlackburn\tI-PER\n")


def write(tmp_path, text, name="train.txt"):
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    return path


def one_hot_outputs(task, features, label_of_position):
    """Fake per-feature logits whose argmax at each position is label_of_position(feature, position)."""
    outputs = []
    for f in features:
        logits = np.zeros((len(f["input_ids"]), len(task.labels)), dtype=np.float32)
        for p in range(len(f["input_ids"])):
            logits[p, label_of_position(f, p)] = 1.0
        outputs.append(logits)
    return outputs


# --- reader -----------------------------------------------------------------------------------------
def test_reader_takes_first_and_last_columns_skips_docstart_and_blank_lines(tmp_path):
    examples = read_conll(write(tmp_path, GOOD))
    assert [(e.words, e.tags, e.lines) for e in examples] == [
        (["EU", "rejects", "German"], ["B-ORG", "O", "B-MISC"], [3, 4, 5]),
        (["Peter", "Blackburn"], ["B-PER", "I-PER"], [8, 9])]
    assert [e.guid for e in examples] == ["train.txt-0", "train.txt-1"]
    assert read_conll(write(tmp_path, "\ufeff" + GOOD, "bom.txt"))[0].words == ["EU", "rejects", "German"]


@pytest.mark.parametrize("text, message", [
    ("", r"train.txt: the file is empty"),
    ("-DOCSTART- O\n\n  \n", r"train.txt: no sentences"),
    ("EU B-ORG\n\nrejects O\nGerman\n", r"train.txt:4: one column 'German'"),
    ("EU B-ORG\nrejects X-PER\n", r"train.txt:2: tag 'X-PER' is not O, B-TYPE, I-TYPE \(scheme BIO\)"),
    ("EU B-\n", r"train.txt:1: tag 'B-' is not"),
    ("EU O\nPeter E-PER\n", r"train.txt:2: tag 'E-PER' is not O, B-TYPE, I-TYPE \(scheme BIO\)"),
    (b"EU O\nM\xfcller B-PER\n", r"train.txt:2: not valid UTF-8"),
])
def test_reader_errors_name_file_line_and_problem(tmp_path, text, message):
    with pytest.raises(ValueError, match=message):
        read_conll(write(tmp_path, text))


def test_reader_bioes_scheme_accepts_e_and_s_tags_only_there(tmp_path):
    path = write(tmp_path, "Peter B-PER\nBlackburn E-PER\nin O\nParis S-LOC\n")
    assert read_conll(path, "BIOES")[0].tags == ["B-PER", "E-PER", "O", "S-LOC"]
    assert TokenClassificationTask(scheme="BIOES").read(path)[0].tags[3] == "S-LOC"
    with pytest.raises(ValueError, match=r"train.txt:2: tag 'E-PER'.*scheme BIO\)"):
        TokenClassificationTask().read(path)
    with pytest.raises(ValueError, match="scheme must be one of"):
        TokenClassificationTask(scheme="IOB1")


# --- labels -----------------------------------------------------------------------------------------
def test_fit_labels_is_o_first_then_sorted_and_unseen_tags_name_file_and_line(tmp_path):
    task = TokenClassificationTask()
    task.fit_labels(read_conll(write(tmp_path, GOOD)))
    assert task.labels == ["O", "B-MISC", "B-ORG", "B-PER", "I-PER"]
    dev = write(tmp_path, "Paris B-LOC\nis O\n\nin O\nFrance B-LOC\nBerlin I-LOC\n", "dev.txt")
    with pytest.raises(ValueError, match=r"dev.txt: tags never seen in training: "
                                         r"B-LOC \(line 1, sentence dev.txt-0\); I-LOC \(line 6, sentence dev.txt-1\)"):
        task.check_labels(task.read(dev), dev)
    assert task.is_labelled(task.read(dev))  # CoNLL files always carry tags, so predict scores them
    task.check_labels(task.read(write(tmp_path, "Peter B-PER\n", "ok.txt")), "ok.txt")


def test_state_rebuilds_the_same_task():
    task = TokenClassificationTask(["O", "B-X"], 64, scheme="BIOES", doc_stride=16)
    state = task.state()
    assert state == {"task": "ner", "labels": ["O", "B-X"], "max_seq_length": 64, "scheme": "BIOES", "doc_stride": 16}
    again = TokenClassificationTask(**{k: v for k, v in state.items() if k != "task"})
    assert again.state() == state
    with pytest.raises(TypeError, match="stride"):
        TokenClassificationTask(stride=3)  # a misspelt option is an error, not a silent default


# --- alignment and windows --------------------------------------------------------------------------
def test_label_goes_on_the_first_piece_and_empty_words_become_unk(bert_vocab_path):
    tokenizer = BertTokenizer(bert_vocab_path)
    task = TokenClassificationTask(["O", "B-PER", "I-PER"])
    example = InputExample("s-0", ["Anna", "Johanson", "\x07", "sings"], ["B-PER", "I-PER", "O", "O"])
    [feature] = task.featurize([example], tokenizer)
    pieces = tokenizer.tokenize("Johanson")
    assert len(pieces) > 1
    tokens = tokenizer.convert_ids_to_tokens(feature["input_ids"])
    assert tokens == ["[CLS]", "anna", *pieces, "[UNK]", "sings", "[SEP]"]
    assert feature["label_ids"] == [IGNORE, 1, 2, *[IGNORE] * (len(pieces) - 1), 0, 0, IGNORE]
    assert feature["token_to_word"] == [-1, 0, 1, *[-1] * (len(pieces) - 1), 2, 3, -1]
    assert feature["token_type_ids"] == [0] * len(tokens) and feature["example_index"] == 0


def test_each_word_is_answered_by_its_max_context_window():
    # Ten one-piece words, windows of 4 pieces every 3 (test_finetune_windows' case):
    # words 0-3 -> window 0 (a tie goes to the first), 4-6 -> window 1, 7-9 -> window 2.
    words = [f"w{i}" for i in range(10)]
    tokenizer = BertTokenizer({t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", *words])})
    task = TokenClassificationTask(["O", "B-X", "I-X"], max_seq_length=6, doc_stride=3)
    example = InputExample("s-0", words, ["O"] * 10)
    features = task.featurize([example], tokenizer)
    assert [f["input_ids"][1:-1] for f in features] == [[4, 5, 6, 7], [7, 8, 9, 10], [10, 11, 12, 13]]
    assert all(f["label_ids"] == [IGNORE, 0, 0, 0, 0, IGNORE] for f in features)  # training sees all
    # Window k predicts label k everywhere, so each word's tag shows which window answered it.
    outputs = one_hot_outputs(task, features, lambda f, p: features.index(f))
    [prediction] = task.predictions([example], features, outputs)
    assert prediction == {"words": words, "tags": ["O"] * 4 + ["B-X"] * 3 + ["I-X"] * 3}


def test_long_sentence_windows_give_every_word_exactly_one_prediction(bert_vocab_path):
    tokenizer = BertTokenizer(bert_vocab_path)
    rng = random.Random(0)
    vocabulary = ["Johanson", "Wolfeschlegelsteinhausen", "U.S.", "in", "Paris", "\x07", "Müller", "the"]
    tags = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
    examples = [InputExample(f"s-{i}", [rng.choice(vocabulary) for _ in range(n)],
                             [rng.choice(tags) for _ in range(n)]) for i, n in enumerate([3, 40, 97])]
    task = TokenClassificationTask(tags, max_seq_length=12, doc_stride=4)
    features = task.featurize(examples, tokenizer)
    assert len(features) > 3 and all(len(f["input_ids"]) <= 12 for f in features)
    for index, example in enumerate(examples):
        answered = [w for f in features if f["example_index"] == index for w in f["token_to_word"] if w >= 0]
        assert sorted(answered) == list(range(len(example.words)))
    # Logits that point at the gold label of the position: predictions are the gold tags.
    outputs = one_hot_outputs(task, features, lambda f, p: max(f["label_ids"][p], 0))
    assert [p["tags"] for p in task.predictions(examples, features, outputs)] == [e.tags for e in examples]
    assert task.evaluate(examples, features, outputs) == {"f1": 1.0, "precision": 1.0, "recall": 1.0, "accuracy": 1.0}
    with pytest.raises(ValueError, match=r"sentence s-2: no prediction for word"):
        task.evaluate(examples, features[:-1], outputs[:-1])


def test_loss_ignores_unlabelled_positions():
    task = TokenClassificationTask(["O", "B-X"])
    logits = torch.randn(1, 4, 2, requires_grad=True)
    labels = torch.tensor([[IGNORE, 1, IGNORE, 0]])
    expected = torch.nn.functional.cross_entropy(logits[0, [1, 3]], torch.tensor([1, 0]))
    torch.testing.assert_close(task.loss(logits, {"label_ids": labels}), expected)
    empty = task.loss(logits, {"label_ids": torch.full((1, 4), IGNORE)})
    assert empty.item() == 0.0
    empty.backward()


# --- entities and scores against seqeval -------------------------------------------------------------
@pytest.fixture(scope="module")
def seqeval():
    """seqeval's metrics, its get_entities and its schemes (skips only the tests that compare)."""
    metrics = pytest.importorskip("seqeval.metrics")
    from seqeval import scheme
    from seqeval.metrics.sequence_labeling import get_entities as seqeval_entities
    return types.SimpleNamespace(metrics=metrics, get_entities=seqeval_entities, scheme=scheme)


TYPES = ["PER", "LOC", "MISC"]
TAGS = {"BIO": ["O"] + [f"{p}-{t}" for p in "BI" for t in TYPES],
        "BIOES": ["O"] + [f"{p}-{t}" for p in "BIES" for t in TYPES]}
FIXED = [  # (tags, entities): conlleval's lenient rules on well-formed and malformed sequences
    (["B-PER", "I-PER", "O", "B-LOC"], [("PER", 0, 2), ("LOC", 3, 4)]),
    (["O", "I-PER", "I-PER"], [("PER", 1, 3)]),  # I- without B- starts an entity
    (["B-PER", "I-LOC", "I-LOC"], [("PER", 0, 1), ("LOC", 1, 3)]),  # a type change ends one
    (["B-PER", "B-PER", "I-PER"], [("PER", 0, 1), ("PER", 1, 3)]),
    (["I-PER", "B-PER"], [("PER", 0, 1), ("PER", 1, 2)]),
    (["B-PER", "E-PER", "E-PER"], [("PER", 0, 2), ("PER", 2, 3)]),  # E- after E- is a new one
    (["S-LOC", "I-LOC", "E-LOC"], [("LOC", 0, 1), ("LOC", 1, 3)]),
    (["B-PER", "I-PER", "E-PER", "S-PER", "O", "E-LOC"], [("PER", 0, 3), ("PER", 3, 4), ("LOC", 5, 6)]),
    (["B-PER", "S-PER"], [("PER", 0, 1), ("PER", 1, 2)]),
    ([], []), (["O", "O"], []),
]


def random_tags(rng, scheme, n):
    return [[rng.choice(TAGS[scheme]) for _ in range(rng.randint(0, 12))] for _ in range(n)]


def well_formed_tags(rng, scheme, length):
    """One sentence of `length` words: O and whole entities (B I* in BIO; S, or B I* E in BIOES)."""
    tags = []
    while len(tags) < length:
        if rng.random() < 0.4:
            tags.append("O")
            continue
        t, n = rng.choice(TYPES), rng.randint(1, min(4, length - len(tags)))
        if scheme == "BIO":
            tags += [f"B-{t}"] + [f"I-{t}"] * (n - 1)
        else:
            tags += [f"S-{t}"] if n == 1 else [f"B-{t}"] + [f"I-{t}"] * (n - 2) + [f"E-{t}"]
    return tags


def seqeval_scores(seqeval, gold, pred, **mode):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # seqeval warns where a ratio is 0/0; both sides give 0
        m = seqeval.metrics
        report = m.classification_report(gold, pred, output_dict=True, **mode)
        return ({"precision": m.precision_score(gold, pred, **mode), "recall": m.recall_score(gold, pred, **mode),
                 "f1": m.f1_score(gold, pred, **mode)},
                {t: r for t, r in report.items() if not t.endswith(" avg")})


def assert_scores_match(seqeval, gold, pred, **mode):
    ours = entity_scores(gold, pred)
    theirs, per_type = seqeval_scores(seqeval, gold, pred, **mode)
    for key in ("precision", "recall", "f1"):
        assert ours[key] == pytest.approx(theirs[key], abs=1e-12), (key, gold, pred)
    assert sorted(ours["per_type"]) == sorted(per_type)
    for t, r in per_type.items():
        mine = ours["per_type"][t]
        assert (mine["precision"], mine["recall"], mine["f1"], mine["support"]) == pytest.approx(
            (r["precision"], r["recall"], r["f1-score"], r["support"]), abs=1e-12), (t, gold, pred)


@pytest.mark.parametrize("tags, expected", FIXED)
def test_fixed_entities(seqeval, tags, expected):
    assert get_entities(tags) == [Entity(*e) for e in expected]
    assert [(t, s, e + 1) for t, s, e in seqeval.get_entities(tags)] == expected


@pytest.mark.parametrize("scheme", ["BIO", "BIOES"])
def test_entities_equal_seqeval_default_mode_on_random_malformed_tags(seqeval, scheme):
    # seqeval's default (conlleval) get_entities reads B/I/E/S/O alike, so both schemes compare here.
    rng = random.Random(scheme)
    for tags in random_tags(rng, scheme, 3000):
        assert get_entities(tags) == [Entity(t, s, e + 1) for t, s, e in seqeval.get_entities(tags)], tags


@pytest.mark.parametrize("scheme", ["BIO", "BIOES"])
def test_scores_equal_seqeval_default_mode(seqeval, scheme):
    rng = random.Random(f"scores-{scheme}")
    fixed = [tags for tags, _ in FIXED]
    assert_scores_match(seqeval, fixed, [tags[::-1] for tags in fixed])
    for _ in range(150):
        gold = random_tags(rng, scheme, rng.randint(1, 6))
        pred = [[rng.choice(TAGS[scheme]) if rng.random() < 0.3 else t for t in tags] for tags in gold]
        assert_scores_match(seqeval, gold, pred)


@pytest.mark.parametrize("scheme, seqeval_scheme", [("BIO", "IOB2"), ("BIOES", "IOBES")])
def test_scores_equal_seqeval_strict_mode_on_well_formed_tags(seqeval, scheme, seqeval_scheme):
    # Strict mode (seqeval's scheme-aware mode, the one it documents for IOBES) drops chunks the
    # scheme forbids, so it can only agree with the lenient rules where both sides are well formed.
    rng = random.Random(f"strict-{scheme}")
    for _ in range(100):
        lengths = [rng.randint(1, 12) for _ in range(4)]
        gold = [well_formed_tags(rng, scheme, n) for n in lengths]
        pred = [g if rng.random() < 0.3 else well_formed_tags(rng, scheme, len(g)) for g in gold]
        assert_scores_match(seqeval, gold, pred, mode="strict", scheme=getattr(seqeval.scheme, seqeval_scheme))


def test_empty_scores_are_zero_and_token_accuracy_counts_words():
    assert entity_scores([["O"]], [["O"]])["f1"] == 0.0
    assert token_accuracy([["B-PER", "O"], ["O"]], [["B-PER", "B-LOC"], ["O"]]) == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="sentence 0: 2 gold tags but 1 predicted"):
        entity_scores([["O", "O"]], [["O"]])


# --- a tiny BERT learns to tag ----------------------------------------------------------------------
SENTENCES = [("anna johanson lives in paris", "B-PER I-PER O O B-LOC"),
             ("paris is far from berlin", "B-LOC O O O B-LOC"),
             ("john smith met anna", "B-PER I-PER O B-PER"),
             ("berlin loves john johanson", "B-LOC O B-PER I-PER"),
             ("in berlin anna met john smith in paris", "O B-LOC B-PER O B-PER I-PER O B-LOC")]


@pytest.fixture
def one_thread():
    """A model this small gains nothing from threads, and on a busy machine they cost 20x."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_tiny_bert_overfits_a_few_sentences_to_entity_f1_one(one_thread):
    torch.manual_seed(0)
    examples = [InputExample(f"s-{i}", words.split(), tags.split()) for i, (words, tags) in enumerate(SENTENCES)]
    pieces = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "johan", "##son", "smi", "##th",
              *{w for words, _ in SENTENCES for w in words.split()} - {"johanson", "smith"}]
    tokenizer = BertTokenizer({p: i for i, p in enumerate(sorted(set(pieces), key=pieces.index))})
    task = TokenClassificationTask(max_seq_length=8, doc_stride=3)  # the last sentence needs windows
    task.fit_labels(examples)
    features = task.featurize(examples, tokenizer)
    assert len(features) > len(examples)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=16,
                        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = task.build_model(config)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    batch = task.collate(features)
    for step in range(1, 301):
        loss = task.loss(task.forward(model, batch), batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 10 == 0 and tagging_f1(task, model, examples, features, batch) == 1.0:
            break
    assert tagging_f1(task, model, examples, features, batch) == 1.0, f"F1 below 1 after {step} steps"
    model.eval()
    with torch.no_grad():
        outputs = task.unbatch(task.forward(model, batch), batch)
    assert [p["tags"] for p in task.predictions(examples, features, outputs)] == [e.tags for e in examples]


def tagging_f1(task, model, examples, features, batch):
    model.eval()
    with torch.no_grad():
        outputs = task.unbatch(task.forward(model, batch), batch)
    model.train()
    return task.evaluate(examples, features, outputs)["f1"]
