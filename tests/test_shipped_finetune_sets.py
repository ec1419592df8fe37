"""The NER and QA sets the repo ships (data/manpages-ner, data/manpages-qa; the main job fine-tunes on
them): the library's readers take every file, the sizes are those their READMEs state, and each file
stays small enough to ship."""
import os
import re

import pytest

from bertlab.finetune.ner import read_conll
from bertlab.finetune.squad import read_squad

DATA = os.path.join(os.path.dirname(__file__), "..", "data")
SPLITS = ("train", "dev", "test")


def _readme_counts(folder: str, unit: str) -> list[int]:
    """The three numbers of the README's "800 / 150 / 150 sentences" (train / dev / test)."""
    with open(os.path.join(DATA, folder, "README.md"), encoding="utf-8") as f:
        m = re.search(rf"(\d+) / (\d+) / (\d+) {unit}", f.read())
    return [int(n) for n in m.groups()]


@pytest.mark.parametrize("folder, ext", [("manpages-ner", "txt"), ("manpages-qa", "json")])
def test_files_are_small(folder, ext):
    for split in SPLITS:
        assert os.path.getsize(os.path.join(DATA, folder, f"{split}.{ext}")) < 300_000


def test_ner_set_reads_and_has_the_readme_sizes():
    examples = {s: read_conll(os.path.join(DATA, "manpages-ner", f"{s}.txt")) for s in SPLITS}
    assert [len(examples[s]) for s in SPLITS] == _readme_counts("manpages-ner", "sentences")
    entities = [sum(t != "O" for e in examples[s] for t in e.tags) for s in SPLITS]
    assert entities == _readme_counts("manpages-ner", "entities")
    tags = {t for s in SPLITS for e in examples[s] for t in e.tags}
    assert tags == {"O", "B-CMD", "B-FUNC", "B-OPT", "B-PATH"}


def test_qa_set_reads_and_has_the_readme_sizes():
    examples = {s: read_squad(os.path.join(DATA, "manpages-qa", f"{s}.json")) for s in SPLITS}
    assert [len(examples[s]) for s in SPLITS] == _readme_counts("manpages-qa", "questions")
    for split in SPLITS:
        assert all(e.found_answers() == e.answers for e in examples[split])  # every answer at its start
