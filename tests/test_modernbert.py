"""ModernBERT: the core ideas one by one (rotary positions, sliding windows, unpadded attention),
then every model class against HF's ModernBERT on tiny random configurations, both ways: HF's
folder read by us, our folder read by HF with no missing or unexpected keys, the same hidden states
and logits within 1e-5 for padded batches longer than the local window."""
import pytest
import torch

from bertlab.core.rotary import RotaryEmbedding, apply_rotary
from bertlab.core.attention import scaled_dot_product_attention
from bertlab.core.sliding_window import banded_pays, local_attention, sliding_window_mask
from bertlab.core.unpadded_attention import PackedBatch, PaddedBatch
from bertlab.interop.hf_modernbert import load_modernbert, save_modernbert
from bertlab.interop.load import load_model
from bertlab.models.accelerate import plain_class
from bertlab.models import ModernBertConfig, ModernBertForMaskedLM
from modernbert_fixtures import batch, make_folder

transformers = pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

HEADS = ["ModernBertModel", "ModernBertForMaskedLM", "ModernBertForSequenceClassification",
         "ModernBertForTokenClassification"]


pytestmark = pytest.mark.usefixtures("one_thread")  # conftest's: one torch thread per test


def test_rotary_scores_depend_on_the_distance_alone():
    rotary = RotaryEmbedding(8, base=100.0)
    q, k = torch.randn(8), torch.randn(8)
    cos, sin = rotary(torch.arange(12))
    qs, ks = apply_rotary(q.expand(12, 8), cos, sin), apply_rotary(k.expand(12, 8), cos, sin)
    scores = qs @ ks.T
    torch.testing.assert_close(torch.diagonal(scores, 3)[:-1], torch.diagonal(scores, 3)[1:])


def test_sliding_window_sees_half_a_window_each_side():
    mask = sliding_window_mask(torch.arange(6), torch.arange(6), window=4)
    assert mask[3].tolist() == [False, True, True, True, True, True]
    assert mask[0].tolist() == [True, True, True, False, False, False]


@pytest.mark.parametrize("length,window", [(13, 6), (15, 6), (16, 6), (40, 7), (300, 128)])
def test_local_attention_computes_the_band_alone_with_the_masks_outputs_and_gradients(length, window):
    assert banded_pays(length, window)
    q, k, v = (torch.randn(2, 3, length, 8, requires_grad=True) for _ in range(3))
    positions = torch.arange(length)
    want, _ = scaled_dot_product_attention(q, k, v, sliding_window_mask(positions, positions, window))
    got = local_attention(q, k, v, window)
    torch.testing.assert_close(got, want)
    for a, b in zip(torch.autograd.grad(got.square().sum(), (q, k, v)),
                    torch.autograd.grad(want.square().sum(), (q, k, v))):
        torch.testing.assert_close(a, b)


def test_unpadded_attention_equals_padded():
    ids, mask = batch(lengths=(9, 4, 7), left_padded=(2,))
    q, k, v = (torch.randn(3, 2, 9, 4) for _ in range(3))
    padded, packed = PaddedBatch(mask, 9), PackedBatch(mask)
    for window in (None, 2, 4, 7):  # the local layers' band crosses members' boundaries
        want, _ = padded.attend(q, k, v, window)
        flat = [packed.pack(t.transpose(1, 2)).transpose(0, 1) for t in (q, k, v)]  # (heads, tokens, d)
        got, _ = packed.attend(*flat, window)
        got = packed.unpack(got.transpose(0, 1)).transpose(1, 2)
        torch.testing.assert_close(got[mask.bool()[:, None].expand_as(got[..., 0])],
                                   want[mask.bool()[:, None].expand_as(want[..., 0])])


def _outputs(model, ids, mask):
    out = model(ids, attention_mask=mask)
    return out.last_hidden_state if hasattr(out, "last_hidden_state") else out.logits


def _ours(model, ids, mask, unpadded):
    if hasattr(model, "layout"):  # the bare encoder
        return model(ids, mask, unpadded=unpadded).sequence_output
    if isinstance(model, ModernBertForMaskedLM):
        return model(ids, mask, unpadded=unpadded)
    return model(ids, attention_mask=mask)


@pytest.mark.parametrize("head", HEADS)
def test_hf_folder_reads_as_ours(tmp_path, head):
    hf = make_folder(tmp_path / "m", head, classifier_pooling="mean" if "Sequence" in head else "cls")
    loaded = load_model(tmp_path / "m")
    assert loaded.kind == "modernbert" and plain_class(type(loaded.model)).__name__ == head
    ids, mask = batch(pad_id=loaded.tokenizer.pad_token_id, left_padded=(3,))
    with torch.no_grad():
        want = _outputs(hf, ids, mask)
        for unpadded in (False, True):
            got = _ours(loaded.model, ids, mask, unpadded)
            real = mask.bool() if got.dim() == 3 else slice(None)
            assert (got[real] - want[real]).abs().max() < 1e-5, (head, unpadded)


def test_cls_pooling_and_every_layer_kind(tmp_path):
    hf = make_folder(tmp_path / "m", "ModernBertForSequenceClassification", classifier_pooling="cls",
                     global_attn_every_n_layers=3, num_hidden_layers=5)
    ours = load_model(tmp_path / "m").model
    assert [ours.modernbert.layers[i].attention.window for i in range(5)] == [None, 6, 6, None, 6]
    ids, mask = batch(lengths=(30, 8))
    with torch.no_grad():
        assert (ours(ids, attention_mask=mask) - hf(ids, attention_mask=mask).logits).abs().max() < 1e-5


def test_an_input_without_padding_takes_the_band_and_equals_hf(tmp_path):
    hf = make_folder(tmp_path / "m", "ModernBertModel", global_attn_every_n_layers=3, num_hidden_layers=4)
    ours = load_model(tmp_path / "m").model
    ids, mask = batch(lengths=(50, 50))  # 50 tokens > 2 windows of 6: the local layers compute their band alone
    with torch.no_grad():
        want = hf(ids, attention_mask=mask).last_hidden_state
        for given in (mask, None):
            assert (ours(ids, given).sequence_output - want).abs().max() < 1e-5


@pytest.mark.parametrize("head", HEADS)
def test_our_folder_reads_in_hf(tmp_path, head):
    make_folder(tmp_path / "hf", head)
    ours = load_modernbert(tmp_path / "hf")
    save_modernbert(ours.model, tmp_path / "ours", ours.tokenizer)
    hf, info = getattr(transformers, head).from_pretrained(tmp_path / "ours", output_loading_info=True,
                                                           attn_implementation="eager")
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"]
    ids, mask = batch(pad_id=ours.tokenizer.pad_token_id)
    with torch.no_grad():
        got, want = _ours(ours.model, ids, mask, None), _outputs(hf.eval(), ids, mask)
    real = mask.bool() if got.dim() == 3 else slice(None)
    assert (got[real] - want[real]).abs().max() < 1e-5
    again = load_modernbert(tmp_path / "ours")
    assert all(torch.equal(a, b) for a, b in zip(again.model.state_dict().values(), ours.model.state_dict().values()))


def test_a_model_we_build_saves_for_hf(tmp_path):
    config = ModernBertConfig(vocab_size=50, hidden_size=16, intermediate_size=24, num_hidden_layers=3,
                              num_attention_heads=2, local_attention=4, pad_token_id=0)
    model = ModernBertForMaskedLM(config).eval()
    save_modernbert(model, tmp_path / "ours")
    hf, info = transformers.ModernBertForMaskedLM.from_pretrained(tmp_path / "ours", output_loading_info=True,
                                                                  attn_implementation="eager")
    assert not info["missing_keys"] and not info["unexpected_keys"]
    ids, mask = batch(lengths=(11, 6), vocab=50)
    with torch.no_grad():
        diff = (model(ids, mask) - hf.eval()(ids, attention_mask=mask).logits)[mask.bool()].abs().max()
    assert diff < 1e-5


def test_encoder_of_a_head_model(tmp_path):
    make_folder(tmp_path / "m", "ModernBertForTokenClassification")
    loaded = load_model(tmp_path / "m")
    assert loaded.encoder is loaded.model.modernbert
