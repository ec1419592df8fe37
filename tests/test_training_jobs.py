"""The training commands as Python calls: gpt_train_job, translate_train_job and pretrain_job take explicit
arguments (no argparse namespace), make their data in OUT and leave the same run folder the
commands do; an earlier run is neither resumed nor replaced unless asked."""
import os

import pytest
import torch

from bertlab.models import BertConfig
from bertlab.pretraining import objective as pretraining_trainer
from bertlab.pretraining.job import pretrain_job
from bertlab.lm import objective as lm_objective
from bertlab.translation import objective as translation_objective
from bertlab.lm.job import gpt_train_job
from bertlab.translation.job import translate_train_job

from pretraining_data import TINY, make_folders
from test_translation_training import write_corpus


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_gpt_train_job(tmp_path):
    text = tmp_path / "corpus.txt"
    text.write_text("the cat sat on the mat.\n" * 40, encoding="utf-8")
    out = tmp_path / "run"
    summary = gpt_train_job([str(text)], str(out), tokenizer="char", preset="test", model={"n_layer": 1},
                            block_size=16, batch_size=4, max_steps=3, eval_every=3, eval_tokens=64, progress=False)
    assert summary["steps"] == 3 and summary["model"].config.n_layer == 1
    assert summary["model"].config.n_positions == 16
    for name in ("inputs.json", "data/meta.json", "model/config.json", "summary.json", "samples.txt"):
        assert os.path.exists(out / name), name
    assert lm_objective.report(summary, str(out)).splitlines()[1] == f"model: {out / 'model'}"
    with pytest.raises(ValueError, match="holds a training checkpoint"):
        gpt_train_job([str(text)], str(out), tokenizer="char", preset="test", block_size=16)


def test_translate_train_job(tmp_path):
    (tmp_path / "corpus").mkdir()
    corpus = write_corpus(tmp_path / "corpus")
    out = tmp_path / "run"
    paths = [str(corpus / f"{split}.{lang}") for split in ("train", "valid") for lang in ("en", "de")]
    summary = translate_train_job(*paths, str(out), joint_vocab=True, vocab_size=80, min_frequency=1, preset="test",
                                  max_tokens=256, max_steps=2, eval_every=2, bleu_sentences=4, progress=False)
    assert summary["steps"] == 2 and "valid_bleu" in summary
    assert summary["model"].config.share_embeddings  # one vocabulary for both sides
    for name in ("inputs.json", "vocab/source_tokenizer", "model/translation.json", "summary.json"):
        assert os.path.exists(out / name), name
    assert translation_objective.report(summary, str(out)).endswith(f"model: {out / 'model'}")
    with pytest.raises(ValueError, match="--max-tokens 4: the longest pair needs"):
        translate_train_job(*paths, str(tmp_path / "other"), joint_vocab=True, vocab_size=80, min_frequency=1,
                            preset="test", max_tokens=4)


def test_pretrain_job(tmp_path):
    train, _, tokenizer = make_folders(tmp_path / "shards", max_seq_length=32, masked=4)
    config = tmp_path / "bert_config.json"
    BertConfig(**TINY, vocab_size=len(tokenizer.vocab)).to_json_file(config)
    out = tmp_path / "run"
    summary = pretrain_job(train, str(out), config=str(config), batch_size=8, max_steps=2, warmup=1, eval_every=100,
                           save_every=100, progress=False)
    assert summary["steps"] == 2 and summary["model"].config.hidden_size == TINY["hidden_size"]
    assert os.path.exists(out / "model" / "config.json")
    assert pretraining_trainer.report(summary, str(out)).endswith(f"model: {out / 'model'}")
    with pytest.raises(FileNotFoundError, match="--config .*: no such file"):
        pretrain_job(train, str(tmp_path / "other"), config=str(tmp_path / "missing.json"))
