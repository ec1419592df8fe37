"""Relation extraction with entity markers: both readers on small inline files, the exact marked
tokens, the model reading the two start markers, a tiny model trained through `bertlab finetune`
and used by `bertlab predict`, and a missing marker named with its file and line."""
import json

import pytest
import torch

from bertlab.cli import main
from bertlab.finetune.relation import MARKERS, RelationTask, mark_words, read_relations, read_semeval, read_tacred
from bertlab.models import BertConfig
from bertlab.models.accelerate import accelerate
from bertlab.models.bert_tasks import BertForRelationClassification
from bertlab.tokenization import BertTokenizer, Vocab

pytestmark = pytest.mark.usefixtures("one_thread")

SEMEVAL = ('1\t"The <e1>company</e1> fabricates plastic <e2>chairs</e2>."\n'
           "Product-Producer(e2,e1)\n"
           "Comment: a made thing and its maker\n"
           "\n"
           '2\t"The <e2>author</e2> of a keygen uses a disassembler to look at the <e1>raw code</e1>."\n'
           "Other\n"
           "\n")
TACRED = """[
  {"id": "a", "token": ["Bill", "Gates", "founded", "Microsoft", "."],
   "subj_start": 3, "subj_end": 3, "obj_start": 0, "obj_end": 1, "relation": "org:founded_by"},
  {"id": "b", "token": ["He", "lives", "in", "Paris"],
   "subj_start": 0, "subj_end": 0, "obj_start": 3, "obj_end": 3, "relation": "no_relation"}
]
"""
WORDS = "the company fabricates plastic chairs . author of a keygen uses to look at raw code made by for with".split()


def write(path, text):
    path.write_text(text, encoding="utf-8")
    return str(path)


def tokenizer():
    t = BertTokenizer(Vocab(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]), do_lower_case=True)
    t.add_special_tokens(MARKERS)
    return t


def test_semeval_sentences_get_the_markers_and_their_labels(tmp_path):
    path = write(tmp_path / "train.txt", SEMEVAL)
    first, second = read_semeval(path)
    assert first.text == "The [E1] company [/E1] fabricates plastic [E2] chairs [/E2] ."
    assert first.label == "Product-Producer(e2,e1)" and first.guid == f"{path}:1"
    assert second.text.startswith("The [E2] author [/E2] of") and "[E1] raw code [/E1]" in second.text
    assert second.label == "Other" and second.guid == f"{path}:5"
    unlabelled = read_semeval(write(tmp_path / "test.txt", '8001\t"A <e1>b</e1> c <e2>d</e2>."\n'
                                                           '8002\t"<e2>x</e2> and <e1>y</e1>"\n'))
    assert [e.label for e in unlabelled] == [None, None]


def test_tacred_objects_get_the_markers_around_inclusive_spans_with_their_lines(tmp_path):
    path = write(tmp_path / "train.json", TACRED)
    first, second = read_tacred(path)
    assert first.text == "[E2] Bill Gates [/E2] founded [E1] Microsoft [/E1] ."
    assert first.label == "org:founded_by" and first.guid == f"{path}:2"
    assert second.text == "[E1] He [/E1] lives in [E2] Paris [/E2]" and second.guid == f"{path}:4"
    lines = write(tmp_path / "train.jsonl", "\n".join(json.dumps(r) for r in json.loads(TACRED)) + "\n")
    assert [e.text for e in read_relations(lines)] == [first.text, second.text]  # auto: JSON Lines by extension
    assert mark_words(["x"], (0, 0), (0, 0)) == "[E1] [E2] x [/E2] [/E1]"  # nesting order is stable


def test_featurize_gives_the_exact_marker_tokens_and_their_positions(tmp_path):
    task = RelationTask(max_seq_length=16)
    examples = read_semeval(write(tmp_path / "train.txt", SEMEVAL))
    task.fit_labels(examples)
    t = tokenizer()
    f = task.featurize(examples, t)[0]
    assert t.convert_ids_to_tokens(f["input_ids"]) == ["[CLS]", "the", "[E1]", "company", "[/E1]", "fabricates",
                                                       "plastic", "[E2]", "chairs", "[/E2]", ".", "[SEP]"]
    assert f["entity_positions"] == [2, 7] and f["label"] == task.labels.index("Product-Producer(e2,e1)")
    # too long: cut around the two start markers, which stay inside
    long = [type(examples[0])("x:1", " ".join(["the"] * 20 + ["[E1] code [/E1] made by [E2] author [/E2]"] + ["a"] * 20),
                              "Other")]
    g = task.featurize(long, t)[0]
    assert len(g["input_ids"]) == 16 and g["truncated"]
    assert [t.convert_ids_to_tokens([g["input_ids"][p]])[0] for p in g["entity_positions"]] == ["[E1]", "[E2]"]
    # markers further apart than the window: half a window from each, the middle cut out
    apart = [type(examples[0])("x:2", "[E1] code [/E1] " + "the " * 30 + "[E2] author [/E2] a a", "Other")]
    h = task.featurize(apart, t)[0]
    assert t.convert_ids_to_tokens(h["input_ids"]) == ["[CLS]", "[E1]", "code", "[/E1]", *["the"] * 4,
                                                       "[E2]", "author", "[/E2]", "a", "a", "[SEP]"][:16]
    assert h["entity_positions"] == [1, 8] and h["truncated"]


def test_the_model_reads_the_last_layer_at_the_two_start_markers():
    config = BertConfig(vocab_size=40, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=32, hidden_dropout_prob=0.0,
                        attention_probs_dropout_prob=0.0)
    torch.manual_seed(0)
    model = accelerate(BertForRelationClassification(config, num_labels=3)).eval()
    ids = torch.randint(5, 40, (2, 10))
    mask = torch.ones_like(ids)
    mask[1, 7:] = 0  # a padded row: the accelerated encoder packs it
    positions = torch.tensor([[2, 5], [1, 4]])
    logits = model(ids, torch.zeros_like(ids), mask, positions)
    hidden = model.bert(ids, torch.zeros_like(ids), mask).sequence_output
    by_hand = model.classifier(torch.cat([hidden[torch.arange(2), positions[:, 0]],
                                          hidden[torch.arange(2), positions[:, 1]]], -1))
    torch.testing.assert_close(logits, by_hand, atol=1e-5, rtol=1e-5)
    swapped = model(ids, torch.zeros_like(ids), mask, positions.flip(-1))
    assert not torch.allclose(logits, swapped)  # the order of the markers matters: E1 first


def synthetic_semeval(n, offset=0):
    """The relation is told by the word between the entities: 'made by' -> Made, 'for' -> For."""
    rows = []
    for i in range(offset, offset + n):
        made = i % 2 == 0
        between = "made by" if made else "for"
        rows.append(f'{i}\t"the <e1>chairs</e1> {between} the <e2>company</e2> ."\n'
                    f"{'Made' if made else 'For'}\n\n")
    return "".join(rows)


def test_a_tiny_model_learns_a_relation_through_finetune_and_predicts(tmp_path, capsys):
    from bertlab import save_pretrained
    from bertlab.models import BertModel
    t = BertTokenizer(Vocab(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]), do_lower_case=True)
    config = BertConfig(vocab_size=len(t.vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=32, hidden_dropout_prob=0.0,
                        attention_probs_dropout_prob=0.0)
    torch.manual_seed(0)
    save_pretrained(BertModel(config), tmp_path / "base", t)
    train = write(tmp_path / "train.txt", synthetic_semeval(24))
    dev = write(tmp_path / "dev.txt", synthetic_semeval(8, offset=100))
    code = main(["finetune", "--task", "relation", "--model", str(tmp_path / "base"), "--train", train, "--dev", dev,
                 "--test", dev, "-o", str(tmp_path / "run"), "--epochs", "8", "--batch-size", "8", "--lr", "3e-3",
                 "--max-seq-length", "16", "--quiet"])
    assert code == 0
    result = json.loads(capsys.readouterr().err.strip().splitlines()[-1])
    assert result["metric"] == "macro_f1" and result["best_score"] == 1.0 and result["test"]["macro_f1"] == 1.0
    task_json = json.loads((tmp_path / "run" / "model" / "task.json").read_text())
    assert task_json["task"] == "relation" and task_json["labels"] == ["For", "Made"]
    assert main(["predict", "--model", str(tmp_path / "run" / "model"), dev, "--quiet"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(rows) == 8 and all(r["label"] == r["gold"] for r in rows)


def test_a_missing_entity_marker_names_the_file_and_line(tmp_path, capsys):
    bad = write(tmp_path / "bad.txt", SEMEVAL + '3\t"The <e1>cat</e1> sat on the mat."\nOther\n')
    with pytest.raises(ValueError, match=r"bad.txt:8: entity marker <e2>...</e2> missing"):
        read_semeval(bad)
    rows = json.loads(TACRED)
    del rows[1]["obj_start"]
    bad_json = write(tmp_path / "bad.json", json.dumps(rows, indent=1))
    with pytest.raises(ValueError, match=r"bad.json:\d+: entity marker position missing: no obj_start"):
        read_tacred(bad_json)
    code = main(["finetune", "--task", "relation", "--model", "minilm", "--train", bad, "-o", str(tmp_path / "r"),
                 "--quiet"])
    assert code == 2 and "bad.txt:8: entity marker <e2>...</e2> missing" in capsys.readouterr().err
    # the line named is where the broken object starts
    lines = open(bad_json, encoding="utf-8").read().splitlines()
    where = int(str(pytest.raises(ValueError, read_tacred, bad_json).value).split(":")[1])
    assert lines[where - 1].strip() == "{" and '"He"' in "".join(lines[where:where + 8])


PACKAGES = """Package: editorx
Depends: libfoo1 (>= 1.2), libc6 | libc6-alt
Suggests: spellz
Breaks: oldeditor (<< 2)

Package: libfoo1
Source: foo

Package: spellz

Package: oldeditor

Package: viewer

Package: the
"""
TRANSLATIONS = """Package: editorx
Description-en: an editor
 It links against libfoo1, which does the drawing.
 .
 Install spellz (optional) to check words, and the oldeditor will no longer work with it.
 Unlike viewer, editorx edits files.

Package: viewer
Description-en: a tool
 Shows the pictures of the day.
"""


def test_the_debian_relation_set_labels_mentions_from_the_control_fields(tmp_path):
    import importlib.util
    import pathlib
    root = pathlib.Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("make_relations", root / "data/debian-relations/make_relations.py")
    make_relations = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_relations)
    lists = tmp_path / "lists"
    lists.mkdir()
    write(lists / "x_main_binary-amd64_Packages", PACKAGES)
    write(lists / "x_main_i18n_Translation-en", TRANSLATIONS)
    make_relations.build(tmp_path / "out", str(lists), str(tmp_path / "no-status"), none_ratio=1.0, common_words=1)
    rows = [r for split in ("train", "dev", "test") for r in json.loads((tmp_path / "out" / f"{split}.json").read_text())]
    labels = {r["id"]: r["relation"] for r in rows}
    assert labels == {"editorx/libfoo1": "Depends", "editorx/spellz": "Suggests", "editorx/oldeditor": "Conflicts",
                      "editorx/viewer": "none"}  # "the" is the most frequent word: no mention
    spellz = next(r for r in rows if r["id"] == "editorx/spellz")
    assert spellz["token"][:2] == ["editorx", ":"] and spellz["token"][spellz["obj_start"]] == "spellz"
    files = [tmp_path / "out" / f"{split}.json" for split in ("train", "dev", "test")]
    marked = [e.text for f in files if json.loads(f.read_text()) for e in read_tacred(str(f))]
    assert "[E1] editorx [/E1] : It links against [E2] libfoo1 [/E2] , which does the drawing." in marked
