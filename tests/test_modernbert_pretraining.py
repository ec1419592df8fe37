"""`--recipe modernbert`: ModernBERT pretrained on our shards (issue 32, point 5): full sentences,
30% masked, no next-sentence task, a long-context phase whose global layers turn slower; the folder
it writes loads in transformers (weights and AutoTokenizer) and in every bertlab command."""
import json
import os

import pytest
import torch

from bertlab.cli import main
from bertlab.interop import load_model
from bertlab.models import ModernBertForPreTraining
from bertlab.models.modernbert import set_global_rope_theta
from bertlab.models.modernbert_config import modernbert_preset
from bertlab.pretraining.objective import preset_config
from bertlab.pretraining.recipes import data_settings
from bertlab.tokenization.vocab import Vocab

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUMMARIES = os.path.join(REPO, "data", "python-docs", "summaries.txt")
MANPAGES = os.path.join(REPO, "data", "manpages")
transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """The shipped docstring summaries (a document every 8 lines) -> an 800-piece vocabulary ->
    modernbert-recipe shards of 32 and 64 pieces, and BERT's next-sentence shards of 32."""
    root = tmp_path_factory.mktemp("modernbert_pretraining")
    with open(SUMMARIES, encoding="utf-8") as f:
        lines = f.read().splitlines()[:1200]
    corpus = root / "corpus.txt"
    corpus.write_text("".join(line + "\n" + ("\n" if i % 8 == 7 else "") for i, line in enumerate(lines)),
                      encoding="utf-8")
    assert main(["vocab", str(corpus), "--vocab-size", "800", "-o", str(root / "vocab"), "--quiet"]) == 0
    base = ["create-pretraining-data", str(corpus), "--vocab", str(root / "vocab"), "--workers", "1", "--quiet"]
    for length in (32, 64):
        assert main([*base, "-o", str(root / f"mb{length}"), "--recipe", "modernbert",
                     "--max-seq-length", str(length)]) == 0
    assert main([*base, "-o", str(root / "nsp32"), "--max-seq-length", "32", "--dupe-factor", "1"]) == 0
    return root


def test_the_recipe_makes_full_sentences_with_30_percent_masked(shards, capsys):
    meta = json.loads((shards / "mb32" / "meta.json").read_text())
    assert meta["settings"]["mode"] == "full-sentences" and meta["dynamic_masking"] and not meta["nsp"]
    assert meta["settings"]["masked_lm_prob"] == 0.3
    assert meta["max_predictions_per_seq"] == 10  # 30% of 32, rounded up
    assert data_settings(None, None, False)["max_predictions_per_seq"] == 20  # google's default stays
    capsys.readouterr()
    assert main(["create-pretraining-data", str(shards / "corpus.txt"), "--vocab", str(shards / "vocab"), "-o",
                 str(shards / "bad"), "--recipe", "modernbert", "--masked-lm-prob", "0.15", "--quiet"]) == 2
    assert "--recipe modernbert masks 0.3 of the pieces, not --masked-lm-prob 0.15" in capsys.readouterr().err


def test_modernbert_small_has_bert_smalls_parameter_count():
    vocab = Vocab(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(995)])
    from bertlab.models import BertForPreTraining
    bert = sum(p.numel() for p in BertForPreTraining(preset_config("small", 1000)).parameters())
    modern = sum(p.numel() for p in ModernBertForPreTraining(modernbert_preset("modernbert-small", vocab)).parameters())
    assert abs(modern - bert) / bert < 0.01
    config = modernbert_preset("modernbert-small", vocab)
    assert (config.pad_token_id, config.cls_token_id, config.sep_token_id) == (0, 2, 3)


def test_raising_the_global_rotary_base_equals_a_model_built_with_it(one_thread):
    vocab = Vocab(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(95)])
    config = modernbert_preset("modernbert-tiny", vocab)
    torch.manual_seed(0)
    model = ModernBertForPreTraining(config).eval()
    set_global_rope_theta(model, 160000.0)
    built = ModernBertForPreTraining(model.config, init_weights=False).eval()
    built.load_state_dict(model.state_dict())
    assert model.config.rope_theta(True) == 160000.0 and model.config.rope_theta(False) == 10000.0
    assert model.modernbert.config is model.config
    ids = torch.randint(5, 100, (2, 40))
    with torch.no_grad():
        torch.testing.assert_close(model(ids)[0], built(ids)[0], rtol=0, atol=0)
        old = ModernBertForPreTraining(config, init_weights=False).eval()
        old.load_state_dict(model.state_dict())
        # the base changes what a global layer sees (little, from near-uniform random attention)
        assert (old(ids)[0] - model(ids)[0]).abs().max() > 1e-5
    assert [layer.attention.rotary.base for layer in model.modernbert.layers] == [160000.0, 10000.0, 10000.0]


def test_pretrain_the_recipe_in_two_phases_and_transformers_reads_the_folder(shards, tmp_path, capsys, one_thread):
    out = tmp_path / "run"
    assert main(["pretrain", "--recipe", "modernbert", "--preset", "modernbert-tiny", "--data", str(shards / "mb32"),
                 "--data-512", str(shards / "mb64"), "--phase2-fraction", "0.5", "--eval-data", str(shards / "mb32"),
                 "--eval-instances", "16", "--max-steps", "4", "--batch-size", "4", "--save-every", "4",
                 "-o", str(out), "--quiet"]) == 0
    capsys.readouterr()
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["phase"] for r in records if r["kind"] == "train"] == [1, 1, 2, 2]
    assert all("nsp_loss" not in r for r in records)
    config = json.loads((out / "model" / "config.json").read_text())
    assert config["architectures"] == ["ModernBertForMaskedLM"]
    assert (config["global_rope_theta"], config["local_rope_theta"]) == (160000.0, 10000.0)  # the phase-2 base
    assert config["vocab_size"] == 800 and config["pad_token_id"] == 0

    ours = load_model(out / "model")
    assert ours.kind == "modernbert" and [layer.attention.rotary.base for layer in ours.model.modernbert.layers] \
        == [160000.0, 10000.0, 10000.0]
    hf, info = transformers.ModernBertForMaskedLM.from_pretrained(out / "model", output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    hf_tokenizer = transformers.AutoTokenizer.from_pretrained(out / "model")
    texts = ["Return the number of items in a container.",
             "Open a file and return a stream; raise OSError upon failure, Ünïcode 中文."]
    batch = hf_tokenizer(texts, return_tensors="pt", padding=True)
    assert [row[:n] for row, n in zip(batch["input_ids"].tolist(), batch["attention_mask"].sum(1).tolist())] \
        == ours.tokenizer(texts).input_ids
    with torch.no_grad():
        theirs, mine = hf.eval()(**batch).logits, ours.model(batch["input_ids"], batch["attention_mask"])
    real = batch["attention_mask"].bool()
    torch.testing.assert_close(mine[real], theirs[real], rtol=0, atol=1e-5)

    # the checkpoint exports to the same folder (the base it was last trained with included)
    assert main(["export", str(out), "--hf", str(tmp_path / "exported")]) == 0
    assert json.loads((tmp_path / "exported" / "config.json").read_text()) == config
    again = load_model(tmp_path / "exported")
    for (name, a), b in zip(ours.model.state_dict().items(), again.model.state_dict().values()):
        assert torch.equal(a, b), name
    # and the commands take it: pretraining continues from it, fill-mask reads its head, finetune starts from it
    assert main(["pretrain", "--data", str(shards / "mb64"), "--init-from", str(out / "model"), "-o",
                 str(tmp_path / "more"), "--max-steps", "1", "--batch-size", "4", "--quiet"]) == 0
    more = json.loads((tmp_path / "more" / "model" / "config.json").read_text())
    assert more["global_rope_theta"] == 160000.0 and more["num_hidden_layers"] == 3
    assert main(["fill-mask", "--model", str(out / "model"), "--top-k", "2", "Return the [MASK] of items."]) == 0
    assert main(["finetune", "--task", "classify", "--model", str(out / "model"), "--text-a", "description",
                 "--label", "section", "--train", os.path.join(MANPAGES, "train.tsv"), "--dev", os.path.join(MANPAGES, "dev.tsv"),
                 "--max-steps", "2", "--batch-size", "8", "-o", str(tmp_path / "ft"), "--quiet"]) == 0


def test_modernbert_refuses_next_sentence_data_and_bert_refuses_its_base(shards, tmp_path, capsys):
    assert main(["pretrain", "--preset", "modernbert-tiny", "--data", str(shards / "nsp32"), "-o",
                 str(tmp_path / "a"), "--max-steps", "1", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "next-sentence" in err and "--recipe modernbert" in err
    assert main(["pretrain", "--recipe", "modernbert", "--preset", "small", "--data", str(shards / "mb32"), "-o",
                 str(tmp_path / "b"), "--max-steps", "1", "--quiet"]) == 2
    assert "--recipe modernbert trains a modernbert model; --preset small is not one" in capsys.readouterr().err
    assert main(["pretrain", "--preset", "tiny", "--phase2-rope-theta", "160000", "--data", str(shards / "mb32"),
                 "-o", str(tmp_path / "c"), "--max-steps", "1", "--quiet"]) == 2
    assert "phase2_rope_theta is the rotary base of ModernBERT's long-context phase" in capsys.readouterr().err
    assert main(["pretrain", "--recipe", "modernbert", "--preset", "modernbert-tiny", "--data", str(shards / "nsp32"),
                 "-o", str(tmp_path / "d"), "--max-steps", "1", "--quiet"]) == 2
    assert "was made with --mode nsp" in capsys.readouterr().err
