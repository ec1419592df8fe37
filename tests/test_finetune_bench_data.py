"""The benchmark sets built from manual pages (benchmarks/finetune_tasks.py): the NER tags come from
the page's typesetting as its docstring says, and every SQuAD answer sits at its answer_start."""
import json
import os
import random
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
import finetune_tasks  # noqa: E402

NAMES = {"grep": "CMD", "ls": "CMD", "write": "CMD", "open": "FUNC"}
PAGE = r""".TH DEMO 1
.SH NAME
demo \- a page
.SH DESCRIPTION
.B grep
searches each
.IR FILE ,
see \fBls\fR(1) and \fIopen\fP(2).
With \fB\-l\fR or \fB\-\-block\-size\fR=\fISIZE\fR it reads /etc/passwd (see
.BR write (2)).
.PP
The time to grep is short , and ls is roman here .
.SH SEE ALSO
"""


def _tagged(sentences):
    return [[(w, t) for w, t in zip(words, tags) if t != "O"] for words, tags in sentences]


def test_ner_tags_come_from_the_typesetting():
    sentences = list(finetune_tasks.tagged_sentences(PAGE, NAMES))
    assert _tagged(sentences) == [
        [("grep", "B-CMD"), ("ls(1)", "B-CMD"), ("open(2)", "B-FUNC")],
        [("-l", "B-OPT"), ("--block-size=SIZE", "B-OPT"), ("/etc/passwd", "B-PATH"), ("write(2)", "B-FUNC")],
        [],  # roman "grep" and "ls" are words of the sentence, not names
    ]
    assert sentences[0][0][:4] == ["grep", "searches", "each", "FILE"]
    assert sentences[1][0][-5:] == ["(", "see", "write(2)", ")", "."]


def test_punctuation_is_split_off_words():
    assert finetune_tasks.split_punctuation("(see") == ["(", "see"]
    assert finetune_tasks.split_punctuation("ls(1),") == ["ls(1)", ","]
    assert finetune_tasks.split_punctuation("/etc/passwd.") == ["/etc/passwd", "."]


def test_squad_answers_sit_at_their_answer_start(tmp_path):
    lines = [(f"tool{i}", f"does thing number {i} well") for i in range(30)]
    paragraphs = finetune_tasks.squad_paragraphs(lines, random.Random(0))
    assert sum(len(p["qas"]) for p in paragraphs) >= 29  # a last line left alone makes no context
    for p in paragraphs:
        assert 2 <= len(p["qas"]) <= 8
        for qa in p["qas"]:
            (answer,) = qa["answers"]
            name = qa["question"].removeprefix("What does ").removesuffix(" do?")
            assert p["context"][answer["answer_start"]:][:len(answer["text"])] == answer["text"]
            assert p["context"][:answer["answer_start"]].endswith(f"{name} - ")


@pytest.mark.skipif(not os.path.isdir("/usr/share/man/man1"), reason="no manual pages on this machine")
def test_built_sets_read_as_the_tasks_read_them(tmp_path):
    from bertlab.finetune.ner import TokenClassificationTask
    from bertlab.finetune.squad import QuestionAnsweringTask
    sizes = {"train": 40, "dev": 10, "test": 10}
    stats = finetune_tasks.build_squad(tmp_path, sizes=sizes)
    assert QuestionAnsweringTask(max_seq_length=128).read(tmp_path / "dev.json")
    assert stats["train"]["questions"] >= 40
    assert json.loads((tmp_path / "train.json").read_text())["version"] == "1.1"
    stats = finetune_tasks.build_ner(tmp_path, sizes=sizes)
    assert len(TokenClassificationTask().read(tmp_path / "train.txt")) == stats["train"]["sentences"] == 40
