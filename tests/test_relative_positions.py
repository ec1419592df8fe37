"""Relative positions in self-attention (core/relative_positions.py): HF parity for relative_key /
relative_key_query (and NEZHA) both ways through save/load, shift invariance of the relative term,
NEZHA beyond every trained length, the routing away from the fused kernel, config round-trips."""
import os
import subprocess
import sys

import pytest
import torch

from bertlab.core import MultiHeadAttention, make_relative_positions
from bertlab.core.relative_positions import LearnedRelativePositions, SinusoidalRelativePositions
from bertlab.interop.hf_bert import save_pretrained
from bertlab.interop.pretrained import load_pretrained
from bertlab.models import BertConfig, BertForPreTraining
from bertlab.models.accelerate import accelerate
from bertlab.tokenization import BertTokenizer, Vocab

HERE = os.path.dirname(os.path.abspath(__file__))
SIZES = dict(vocab_size=40, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
             max_position_embeddings=16, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def legacy_transformers_env():
    """The environment for tests/hf_legacy_bert.py: transformers 4.x, the last with relative_key and
    NEZHA. BERTLAB_HF_LEGACY names a folder it was installed into (pip install --target DIR
    'transformers==4.57.3' 'huggingface_hub<1' 'tokenizers<0.23' requests); else the installed
    transformers if it is a 4.x."""
    folder = os.environ.get("BERTLAB_HF_LEGACY")
    env = dict(os.environ)
    if folder:
        env["PYTHONPATH"] = folder
        return env
    transformers = pytest.importorskip("transformers")
    if int(transformers.__version__.split(".")[0]) >= 5:
        pytest.skip("transformers 5 has no relative_key: set BERTLAB_HF_LEGACY to a transformers 4.x --target folder")
    return env


def hf(*args):
    subprocess.run([sys.executable, os.path.join(HERE, "hf_legacy_bert.py"), *args], check=True,
                   env=legacy_transformers_env(), capture_output=True)


def write_inputs(folder):
    g = torch.Generator().manual_seed(1)
    input_ids = torch.randint(5, 40, (2, 12), generator=g)
    mask = torch.ones_like(input_ids)
    mask[1, 7:] = 0  # a padded row: our CPU path packs it away
    inputs = {"input_ids": input_ids, "attention_mask": mask, "token_type_ids": (torch.arange(12) >= 6).long()[None].repeat(2, 1)}
    torch.save(inputs, os.path.join(folder, "inputs.pt"))
    return inputs


def tiny_tokenizer():
    return BertTokenizer(Vocab(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(35)]))


def assert_same_logits(model, folder, inputs):
    theirs = torch.load(os.path.join(folder, "hf_logits.pt"))
    with torch.no_grad():
        mlm, nsp = model.eval()(inputs["input_ids"], inputs["token_type_ids"], inputs["attention_mask"])
    real = inputs["attention_mask"].bool()
    torch.testing.assert_close(mlm[real], theirs["mlm"][real], atol=1e-5, rtol=0)
    torch.testing.assert_close(nsp, theirs["nsp"], atol=1e-5, rtol=0)


@pytest.mark.parametrize("kind", ["relative_key", "relative_key_query"])
def test_hf_model_loads_with_equal_logits(kind, tmp_path):
    write_inputs(tmp_path)
    hf("make", kind, str(tmp_path))
    tiny_tokenizer().save_pretrained(str(tmp_path))
    loaded = load_pretrained(str(tmp_path), BertForPreTraining)
    model, report = loaded.model, loaded.extra["report"]
    assert model.config.position_embedding_type == kind
    assert any("relative_positions.distance_embedding" in n for n in report.initialized)
    assert_same_logits(model, tmp_path, torch.load(tmp_path / "inputs.pt"))


def save_random_model(kind, folder):
    torch.manual_seed(0)
    model = BertForPreTraining(BertConfig(position_embedding_type=kind, max_relative_position=5, **SIZES))
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.5)
    save_pretrained(model, str(folder), tiny_tokenizer())
    return model


@pytest.mark.parametrize("kind", ["relative_key", "relative_key_query", "nezha"])
def test_golden_hf_logits(kind):
    """Folders and logits transformers 4.57.3 made (data/hf_relative_positions/make_golden.py): no
    transformers 4.x needed to check them."""
    folder = os.path.join(os.path.dirname(HERE), "data", "hf_relative_positions", kind)
    loaded = load_pretrained(folder, BertForPreTraining)
    model = loaded.model
    assert model.config.position_embedding_type == kind
    assert_same_logits(model, folder, torch.load(os.path.join(folder, "inputs.pt")))


@pytest.mark.parametrize("kind", ["relative_key", "relative_key_query", "nezha"])
def test_our_model_gives_hf_equal_logits(kind, tmp_path):
    model = save_random_model(kind, tmp_path)
    inputs = write_inputs(tmp_path)
    hf("nezha" if kind == "nezha" else "run", str(tmp_path))  # NEZHA: HF's NezhaForPreTraining
    assert_same_logits(model, tmp_path, inputs)


def test_config_round_trips_through_config_json(tmp_path):
    for kind in ("absolute", "relative_key", "relative_key_query", "nezha"):
        config = BertConfig(position_embedding_type=kind, max_relative_position=7 if kind == "nezha" else 64, **SIZES)
        config.to_json_file(tmp_path / "config.json")
        assert BertConfig.from_json_file(tmp_path / "config.json") == config
        assert ("max_relative_position" in config.to_dict()) == (kind == "nezha")
    with pytest.raises(ValueError, match="position_embedding_type 'rotary'"):
        BertConfig(position_embedding_type="rotary")


def random_qk(length, d_head=8):
    g = torch.Generator().manual_seed(2)
    return torch.randn(1, 2, length, d_head, generator=g), torch.randn(1, 2, length, d_head, generator=g)


@pytest.mark.parametrize("kind", ["relative_key", "relative_key_query", "nezha"])
def test_relative_term_depends_on_distance_only(kind):
    """a_(i+k, j+k) == a_ij, so for tokens that shift along with their positions the relative
    scores of the window [k, k+n) equal those of [0, n)."""
    torch.manual_seed(0)
    module = make_relative_positions(kind, 8, max_position_embeddings=16, max_relative_position=5)
    terms = module(16, 16)
    for k in (1, 3, 6):
        torch.testing.assert_close(terms.key[k:, k:], terms.key[:16 - k, :16 - k], atol=0, rtol=0)
    # attention scores of a sequence and of the same tokens shifted right by k inside a longer one
    q, key = random_qk(10)
    from bertlab.core.relative_positions import relative_scores
    base = relative_scores(q, key, module(10, 10), 1.0)
    shifted = torch.cat([torch.randn(1, 2, 4, 8), q], 2), torch.cat([torch.randn(1, 2, 4, 8), key], 2)
    moved = relative_scores(shifted[0], shifted[1], module(14, 14), 1.0)
    torch.testing.assert_close(moved[..., 4:, 4:], base, atol=1e-6, rtol=0)


def test_learned_distances_are_hfs_index():
    """Row i - j + max_len - 1 of distance_embedding, HF's index: the diagonal is the middle row."""
    module = LearnedRelativePositions(6, 4)
    terms = module(6, 6)
    torch.testing.assert_close(terms.key[2, 2], module.distance_embedding.weight[5])
    torch.testing.assert_close(terms.key[5, 0], module.distance_embedding.weight[10])
    torch.testing.assert_close(terms.key[0, 5], module.distance_embedding.weight[0])
    with pytest.raises(ValueError, match="exceeds max_position_embeddings 6"):
        module(7, 7)


def test_nezha_clips_distances_and_has_no_parameters():
    module = SinusoidalRelativePositions(8, max_relative_position=3)
    terms = module(10, 10)
    assert list(module.parameters()) == []
    torch.testing.assert_close(terms.key[0, 9], terms.key[0, 3])  # j - i = 9 clipped to 3
    torch.testing.assert_close(terms.key[9, 0], terms.key[3, 0])  # -9 clipped to -3
    assert not torch.equal(terms.key[0, 2], terms.key[0, 3])
    assert terms.value is terms.key  # NEZHA applies the same encoding to the values


@pytest.mark.parametrize("kind", ["relative_key", "relative_key_query", "nezha"])
def test_attention_of_a_shifted_window_is_unchanged(kind):
    """Self-attention over a window alone, and over the same window moved k positions right (k
    tokens prepended, hidden from it by the mask): equal probabilities and outputs, content and
    relative terms together, for every kind."""
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 2, relative_positions=make_relative_positions(kind, 8, 16, 5)).eval()
    window = torch.randn(1, 7, 16)
    out, weights = mha(window, need_weights=True)
    for k in (1, 4):
        shifted = torch.cat([torch.randn(1, k, 16), window], 1)
        keys = (torch.arange(7 + k) >= k)[None, None, None, :]  # the prefix is no key of anyone
        out_k, weights_k = mha(shifted, mask=keys, need_weights=True)
        torch.testing.assert_close(weights_k[..., k:, k:], weights, atol=1e-6, rtol=0)
        torch.testing.assert_close(out_k[:, k:], out, atol=1e-6, rtol=0)


def test_nezha_runs_beyond_max_position_embeddings_and_absolute_refuses():
    torch.manual_seed(0)
    nezha = BertForPreTraining(BertConfig(position_embedding_type="nezha", **SIZES)).eval()
    ids = torch.randint(5, 40, (2, 40))  # 2.5 times max_position_embeddings
    mlm, nsp = nezha(ids)
    assert mlm.shape == (2, 40, 40) and torch.isfinite(mlm).all()
    absolute = BertForPreTraining(BertConfig(**SIZES)).eval()
    with pytest.raises(ValueError, match="sequence of 40 tokens exceeds max_position_embeddings 16"):
        absolute(ids)
    assert not hasattr(nezha.bert.embeddings, "position_embeddings")


@pytest.mark.parametrize("kind", ["relative_key_query", "nezha"])
def test_masked_positions_path_and_padding_match_full_forward(kind):
    """The masked positions (pretraining's path) and the packed padding of the accelerated model give
    the outputs of the plain padded computation: relative models never take a path that drops their term."""
    torch.manual_seed(0)
    model = accelerate(BertForPreTraining(BertConfig(position_embedding_type=kind, **SIZES))).eval()
    ids = torch.randint(5, 40, (3, 12))
    mask = torch.ones_like(ids)
    mask[1, 8:], mask[2, 5:] = 0, 0
    positions = torch.tensor([[1, 4, 9], [0, 2, 7], [1, 3, 4]])
    full, nsp_full = model(ids, attention_mask=mask)
    at, nsp_at = model(ids, attention_mask=mask, masked_lm_positions=positions)
    torch.testing.assert_close(at, full.gather(1, positions[..., None].expand(-1, -1, 40)), atol=1e-5, rtol=0)
    torch.testing.assert_close(nsp_at, nsp_full, atol=1e-5, rtol=0)
    for row in range(3):  # each row alone, unpadded
        n = int(mask[row].sum())
        alone, _ = model(ids[row:row + 1, :n])
        torch.testing.assert_close(full[row, :n], alone[0], atol=1e-5, rtol=0)


def test_relative_attention_takes_the_plain_formula_and_refuses_cross_attention():
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 2, relative_positions=LearnedRelativePositions(8, 8)).eval()
    x = torch.randn(2, 6, 16)
    out, weights = mha(x, need_weights=True)
    fast, _ = mha(x)  # without need_weights: must still include the relative term
    torch.testing.assert_close(fast, out)
    with torch.no_grad():
        mha.relative_positions.distance_embedding.weight.zero_()
    plain, _ = mha(x)
    assert (plain - out).abs().max() > 1e-3  # the relative term was there
    with pytest.raises(ValueError, match="relative positions are for self-attention"):
        mha(x, memory=torch.randn(2, 3, 16))
