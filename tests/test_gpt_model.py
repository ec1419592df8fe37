"""GPT against HF GPT2LMHeadModel: equal logits through export and import, both ways."""
import json

import pytest
import torch

from bertlab.interop.hf_gpt2 import hf_state_dict, load_gpt2, our_state_dict, save_pretrained
from bertlab.models import GPT, GPTConfig

transformers = pytest.importorskip("transformers")


def hf_config(config: GPTConfig):
    return transformers.GPT2Config(**{k: v for k, v in config.to_dict().items() if k != "architectures"})


@pytest.fixture(scope="module")
def ids():
    return torch.randint(0, 50257, (2, 24), generator=torch.Generator().manual_seed(0))


def test_export_to_hf_equal_logits_124m(tmp_path, ids):
    torch.manual_seed(0)
    ours = GPT(GPTConfig.preset("gpt2")).eval()
    assert ours.num_parameters() == 124_439_808
    save_pretrained(ours, tmp_path)
    hf, info = transformers.GPT2LMHeadModel.from_pretrained(tmp_path, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"]
    with torch.no_grad():
        torch.testing.assert_close(ours(ids)[0], hf.eval()(ids).logits, atol=1e-5, rtol=0)


def test_import_from_hf_equal_logits_124m(tmp_path, ids):
    torch.manual_seed(1)
    hf = transformers.GPT2LMHeadModel(hf_config(GPTConfig.preset("gpt2"))).eval()
    hf.save_pretrained(tmp_path)
    loaded = load_gpt2(tmp_path)
    ours, report = loaded.model, loaded.extra["report"]
    assert not report.new and not report.mismatched and not report.unused
    with torch.no_grad():
        torch.testing.assert_close(ours(ids)[0], hf(ids).logits, atol=1e-5, rtol=0)


def test_state_dict_round_trip_and_conv1d_layout():
    torch.manual_seed(2)
    model = GPT(GPTConfig.preset("test"))
    hf = hf_state_dict(model)
    c = model.config.n_embd
    assert hf["transformer.h.0.attn.c_attn.weight"].shape == (c, 3 * c)  # Conv1D: (in, out)
    assert hf["transformer.h.0.mlp.c_fc.weight"].shape == (c, 4 * c)
    torch.testing.assert_close(hf["transformer.h.1.attn.c_attn.weight"][:, c:2 * c],
                               model.h[1].self_attention.key.weight.t())
    back, unused = our_state_dict(hf)
    assert not unused
    own = model.state_dict()
    assert back.keys() == own.keys()
    for k in own:
        assert torch.equal(back[k], own[k]), k


def test_old_checkpoint_names_without_prefix_load(tmp_path):
    """The original GPT-2 files have no `transformer.` prefix and carry attn.bias mask buffers."""
    torch.manual_seed(3)
    model = GPT(GPTConfig.preset("test")).eval()
    state = {k.removeprefix("transformer."): v for k, v in hf_state_dict(model).items()}
    state["h.0.attn.bias"] = torch.ones(1, 1, 64, 64)
    fresh = GPT(model.config)
    from bertlab.interop.hf_gpt2 import load_state_dict_strict
    load_state_dict_strict(fresh, state)
    x = torch.randint(0, 97, (1, 8))
    assert torch.equal(fresh.eval()(x)[0], model(x)[0])


def test_strict_load_names_missing_and_misshaped(tmp_path):
    model = GPT(GPTConfig.preset("test"))
    save_pretrained(model, tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    config["n_embd"], config["n_head"] = 64, 2
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=r"transformer|wte.weight has shape"):
        load_gpt2(tmp_path)


def test_missing_folder_and_config_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such model folder"):
        load_gpt2(tmp_path / "nope")
    with pytest.raises(FileNotFoundError, match="no config.json"):
        load_gpt2(tmp_path)


def test_config_round_trips_hf_names():
    c = GPTConfig.preset("gpt2-medium")
    assert (c.n_layer, c.n_head, c.n_embd) == (24, 16, 1024)
    d = c.to_dict()
    assert d["model_type"] == "gpt2" and d["n_ctx"] == 1024
    assert GPTConfig.from_dict(d) == c
    assert GPTConfig.from_dict(hf_config(c).to_dict()) == c
    with pytest.raises(ValueError, match="unknown GPT preset"):
        GPTConfig.preset("gpt5")


def test_loss_is_next_token_cross_entropy():
    torch.manual_seed(4)
    model = GPT(GPTConfig.preset("test")).eval()
    x = torch.randint(0, 97, (2, 10))
    logits, loss = model(x[:, :-1], x[:, 1:])
    expected = torch.nn.functional.cross_entropy(logits.reshape(-1, 97), x[:, 1:].reshape(-1))
    torch.testing.assert_close(loss, expected)
    assert model(x)[1] is None
