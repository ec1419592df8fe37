"""ELECTRA: the discriminator and the generator against HF's ElectraForPreTraining /
ElectraForMaskedLM on random weights, both ways; the replaced-token labels; the objective on the
engine (the losses fall, kill -9 then --resume is exact, the export is what finetune and HF read);
the errors a user meets."""
import dataclasses
import json

import numpy as np
import pytest
import torch

from bertlab.interop.folder import read_state_dict
from bertlab.interop.hf_electra import load_state, save_electra
from bertlab.interop.load import load_model
from bertlab.models import BertConfig
from bertlab.models.electra import Electra, replace_tokens, replaced_labels
from bertlab.pretraining.shards import PretrainingData
from engine_checks import kill_9_then_resume
from pretraining_data import TINY, make_folders, train_records

transformers = pytest.importorskip("transformers")

DISC = BertConfig(vocab_size=60, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
                  embedding_size=16, max_position_embeddings=24)
GEN = BertConfig(vocab_size=60, hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=20,
                 embedding_size=16, max_position_embeddings=24)


pytestmark = pytest.mark.usefixtures("one_thread")  # conftest's: one torch thread per test


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("shards")
    train, dev, tokenizer = make_folders(root, max_seq_length=32, masked=4, limit=1200)
    config = root / "config.json"
    BertConfig(**{**TINY, "vocab_size": len(tokenizer.vocab)}).to_json_file(config)
    return {"train": train, "dev": dev, "tokenizer": tokenizer, "config": str(config)}


def random_pair(seed=0) -> Electra:
    torch.manual_seed(seed)
    model = Electra(DISC, GEN).eval()
    with torch.no_grad():  # far from the init, so a swapped or missed tensor shows
        for p in model.parameters():
            p.normal_(0, 0.2)
    return model


def inputs():
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(5, 60, (3, 11), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 7:] = 0
    segments = torch.zeros_like(ids)
    segments[:, 6:] = 1
    return ids, segments, mask


@pytest.mark.parametrize("part,hf_class", [("discriminator", "ElectraForPreTraining"),
                                           ("generator", "ElectraForMaskedLM")])
def test_random_weights_equal_hf_through_export_and_import(part, hf_class, tmp_path):
    ours = getattr(random_pair(), part)
    ids, segments, mask = inputs()
    real = mask.bool()
    save_electra(ours, tmp_path / "ours")
    theirs, info = getattr(transformers, hf_class).from_pretrained(tmp_path / "ours", output_loading_info=True)
    assert not any(info[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys")), info
    theirs.eval()
    with torch.no_grad():
        want = theirs(input_ids=ids, token_type_ids=segments, attention_mask=mask).logits
        got = ours(ids, segments, mask)
    assert got.shape == want.shape
    torch.testing.assert_close(got[real], want[real], atol=1e-5, rtol=1e-5)
    # HF's own folder back into ours (strict: every tensor used, none missing), then through load_model
    theirs.save_pretrained(tmp_path / "theirs")
    back = type(ours)(ours.config, init_weights=False)
    load_state(back, read_state_dict(tmp_path / "theirs"), tmp_path / "theirs")
    with torch.no_grad():
        torch.testing.assert_close(back.eval()(ids, segments, mask)[real], want[real], atol=1e-5, rtol=1e-5)
    write_vocab(tmp_path / "theirs", ours.config.vocab_size)
    loaded = load_model(tmp_path / "theirs")
    assert loaded.kind == "electra" and type(loaded.model) is type(ours)
    with torch.no_grad():
        torch.testing.assert_close(loaded.model(ids, segments, mask)[real], want[real], atol=1e-5, rtol=1e-5)


def write_vocab(folder, size):
    """A vocab.txt of the model's size, which load_model checks the config against."""
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(size - 5)]
    (folder / "vocab.txt").write_text("\n".join(tokens) + "\n", encoding="utf-8")


def test_the_pair_shares_its_embeddings_and_the_generator_decodes_with_them():
    model = random_pair()
    d, g = model.discriminator.electra, model.generator.electra
    assert d.embeddings is g.embeddings
    assert model.generator.generator.embedding_table is d.embeddings.word_embeddings.weight
    names = {id(p) for p in model.parameters()}
    assert len(names) == len(list(model.parameters()))  # each shared tensor once, for the optimizer
    assert (d.embedding_projection.in_features, d.embedding_projection.out_features) == (16, 32)
    assert not hasattr(g, "embedding_projection")  # the generator is E = 16 wide: no projection


def test_replaced_labels_are_exactly_token_differs_from_the_original():
    # [CLS] a b c [SEP] d e [SEP]: positions 2, 3, 5 masked (3 kept as itself, BERT's 10%), slot 4 unused
    original_ids = torch.tensor([[2, 10, 11, 12, 3, 13, 14, 3]])
    masked_input = torch.tensor([[2, 10, 4, 12, 3, 4, 14, 3]])
    positions, labels = torch.tensor([[2, 3, 5, 0]]), torch.tensor([[11, 12, 13, 0]])
    weights = torch.tensor([[1.0, 1.0, 1.0, 0.0]])
    sampled = torch.tensor([[11, 40, 41, 42]])  # 2: the original drawn again; 3, 5: replaced; slot 4: ignored
    original, corrupted = replace_tokens(masked_input, positions, labels, weights, sampled)
    assert original.tolist() == original_ids.tolist()
    assert corrupted.tolist() == [[2, 10, 11, 40, 3, 41, 14, 3]]
    assert replaced_labels(original, corrupted).tolist() == [[0, 0, 0, 1, 0, 1, 0, 0]]
    # and through the joint forward: labels equal (input != original) position by position
    model = random_pair()
    ids, segments, mask = inputs()
    positions = torch.tensor([[1, 2, 3], [2, 4, 0], [5, 6, 9]])
    weights = torch.tensor([[1.0, 1, 1], [1, 1, 0], [1, 1, 1]])
    seen = {}
    original_forward = model.discriminator.electra.forward

    def spy(corrupted, *args, **kw):
        seen["corrupted"] = corrupted
        return original_forward(corrupted, *args, **kw)

    model.discriminator.electra.forward = spy
    with torch.no_grad():
        _, disc_logits, replaced = model(ids, segments, mask, positions, ids.gather(1, positions), weights,
                                         torch.Generator().manual_seed(0))
    assert replaced.tolist() == (seen["corrupted"] != ids)[mask.bool()].long().tolist()
    assert disc_logits.shape == replaced.shape == (int(mask.sum()),)
    changed = (seen["corrupted"] != ids).nonzero().tolist()
    assert all(c in [[r, int(p)] for r in range(3) for p, w in zip(positions[r], weights[r]) if w] for c in changed)


def pretrain_args(folders, out, steps=40, *extra):
    return ["pretrain", "--objective", "electra", "--data", folders["train"], "--out", str(out), "--config",
            folders["config"], "--embedding-size", "16", "--batch-size", "16", "--lr", "2e-3", "--warmup", "4",
            "--max-steps", str(steps), "--seed", "3", "--quiet", *extra]


def test_trains_through_fit_and_exports_what_finetune_and_hf_read(folders, tmp_path):
    from bertlab.cli import main
    from bertlab.finetune.classification import SequenceClassificationTask
    from bertlab.finetune.setup import load_base_model
    out = tmp_path / "run"
    assert main(pretrain_args(folders, out, 40, "--eval-data", folders["dev"], "--eval-every", "40")) == 0
    records = train_records(out)
    first, last = records[0], {k: np.mean([r[k] for r in records[-8:]]) for k in ("mlm_loss", "disc_loss")}
    assert first["disc_loss"] == pytest.approx(np.log(2), abs=0.05)  # an untrained head says 1/2 everywhere
    assert last["disc_loss"] < first["disc_loss"] - 0.15 and last["mlm_loss"] < first["mlm_loss"] - 0.3, (first, last)
    assert 0.05 < np.mean([r["replaced"] for r in records]) < 0.2  # most masked tokens get replaced
    summary = json.loads((out / "summary.json").read_text())
    assert summary["held_out"]["disc_accuracy"] > 0.8 and summary["train_flops"] > 0
    for folder, hf_class in (("model", "ElectraForPreTraining"), ("generator", "ElectraForMaskedLM")):
        config = json.loads((out / folder / "config.json").read_text())
        assert config["model_type"] == "electra" and config["architectures"] == [hf_class]
        _, info = getattr(transformers, hf_class).from_pretrained(out / folder, output_loading_info=True)
        assert not any(info[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys")), info
    assert json.loads((out / "generator" / "config.json").read_text())["hidden_size"] == 8  # a quarter of 32
    # fine-tuning reads the discriminator's encoder: every encoder tensor, the projection included
    disc = load_model(out / "model").model
    task_model = load_base_model(SequenceClassificationTask(["a", "b"]), str(out / "model"), quiet=True).model
    batch = PretrainingData(folders["dev"]).batch(np.arange(4))
    with torch.no_grad():
        want = disc.electra(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"]).sequence_output
        got = task_model.bert.eval()(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"])
    torch.testing.assert_close(got.sequence_output, want)


def test_kill_9_then_resume_gives_the_uninterrupted_trajectory(folders, tmp_path):
    kill_9_then_resume(lambda out: pretrain_args(folders, out, 16, "--save-every", "3" if "killed" in str(out)
                                                 else "1000"),
                       tmp_path / "whole", tmp_path / "killed", 16)


def test_clear_errors(folders, tmp_path, capsys):
    from bertlab.cli import main
    out = tmp_path / "run"
    assert main(pretrain_args(folders, out, 2)) == 0
    # the generator where the discriminator is expected
    assert main(["pretrain", "--objective", "electra", "--data", folders["train"], "--out", str(tmp_path / "again"),
                 "--init-from", str(out / "generator"), "--max-steps", "2", "--quiet"]) == 2
    assert "holds the ELECTRA generator (ElectraForMaskedLM), but a discriminator is expected" in capsys.readouterr().err
    with pytest.raises(ValueError, match="holds the ELECTRA discriminator"):
        from bertlab.interop.hf_electra import load_electra
        load_electra(out / "model", expect="generator")
    # ELECTRA's flags without ELECTRA
    args = pretrain_args(folders, tmp_path / "bert", 2)
    args[args.index("electra")] = "bert"
    assert main(args) == 2 and "ELECTRA's settings" in capsys.readouterr().err
    # an Electra class bertlab does not read
    config = json.loads((out / "model" / "config.json").read_text())
    (out / "model" / "config.json").write_text(json.dumps({**config, "architectures": ["ElectraForSequenceClassification"]}))
    with pytest.raises(ValueError, match="ElectraForSequenceClassification"):
        load_model(out / "model")
    # mixed tables cannot be shared
    with pytest.raises(ValueError, match="vocab_size is 61 in the generator"):
        Electra(DISC, dataclasses.replace(GEN, vocab_size=61))


def test_samples_follow_the_generators_softmax():
    from bertlab.models.electra import sample
    logits = torch.tensor([[[2.0, 0.5, -1e9, 0.0, 1.0]]])
    draws = sample(logits.expand(40000, 1, 5).contiguous(), torch.Generator().manual_seed(0)).view(-1)
    freq = torch.bincount(draws, minlength=5).float() / len(draws)
    torch.testing.assert_close(freq, torch.softmax(logits[0, 0], -1), atol=0.01, rtol=0)
    assert freq[2] == 0  # a token the generator rules out is never drawn
