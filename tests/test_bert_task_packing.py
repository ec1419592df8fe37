"""The per-token heads on packed batches: on a CPU, BertModel.forward computes only the real tokens
of a padded batch, so token classification and span extraction must give at every real position
what the unpadded computation gives (each row alone) and what HF's BertFor* heads give, on the
real all-MiniLM-L6-v2 encoder with new heads. Gradients too: a batch's loss has the sum of its
rows' gradients."""
import pytest
import torch

from bertlab import save_pretrained
from bertlab.finetune.squad import QuestionAnsweringTask
from bertlab.inference.embed import padded_tensors
from bertlab.interop import init_from_state_dict, read_config, read_state_dict
from bertlab.models import BertForQuestionAnswering, BertForTokenClassification
from bertlab.models.accelerate import accelerate

transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def batch(real_sentences, minilm):
    """Six real sentences of 5 to 60 tokens, right-padded; segment 1 from each row's middle on."""
    _, tokenizer = minilm
    ids = [s for s in tokenizer.tokenize_ids_batch(real_sentences) if 5 <= len(s) <= 60][::20][:6]
    input_ids, mask = padded_tensors(ids)
    types = torch.zeros_like(input_ids)
    for row, s in enumerate(ids):
        types[row, len(s) // 2:len(s)] = 1
    assert not bool(mask.all()) and len(ids) == 6
    return input_ids, types, mask


def _model(cls, minilm_dir, **kwargs):
    torch.manual_seed(0)  # the new head
    model = cls(read_config(minilm_dir), init_weights=False, **kwargs)
    init_from_state_dict(model, read_state_dict(minilm_dir))
    return accelerate(model).eval()  # the speed paths under test


def _alone(model, input_ids, types, mask, row):
    n = int(mask[row].sum())
    return model(input_ids[row:row + 1, :n], types[row:row + 1, :n], mask[row:row + 1, :n])


@pytest.mark.parametrize("cls", [BertForTokenClassification, BertForQuestionAnswering])
def test_packed_batch_equals_rows_alone_and_hf(tmp_path, minilm_dir, batch, cls):
    model = _model(cls, minilm_dir, **({"num_labels": 5} if cls is BertForTokenClassification else {}))
    save_pretrained(model, tmp_path)
    theirs = getattr(transformers, cls.__name__).from_pretrained(tmp_path).eval()
    input_ids, types, mask = batch
    with torch.inference_mode():
        ours = model(input_ids, types, mask)
        hf = theirs(input_ids=input_ids, token_type_ids=types, attention_mask=mask)
        hf = (hf.logits,) if cls is BertForTokenClassification else (hf.start_logits, hf.end_logits)
        ours = ours if isinstance(ours, tuple) else (ours,)
        real = mask.bool()
        for got, want in zip(ours, hf):
            assert (got - want)[real].abs().max() < 1e-5
        for row in range(len(input_ids)):
            alone = _alone(model, input_ids, types, mask, row)
            alone = alone if isinstance(alone, tuple) else (alone,)
            n = int(mask[row].sum())
            for got, want in zip(ours, alone):
                torch.testing.assert_close(got[row, :n], want[0], atol=1e-5, rtol=0)


def test_span_loss_ignores_padding(minilm_dir, batch):
    """Padding is no candidate boundary: each window's loss is its loss alone, however much padding
    the batch gives it."""
    model = _model(BertForQuestionAnswering, minilm_dir)
    task = QuestionAnsweringTask(max_seq_length=128)
    input_ids, types, mask = batch
    targets = {"start_position": torch.tensor([1, 2, 3, 1, 2, 3]), "end_position": torch.tensor([2, 3, 4, 4, 3, 3])}
    with torch.inference_mode():
        start, end = model(input_ids, types, mask)
        assert (start[~mask.bool()] == torch.finfo(start.dtype).min).all()
        batched = task.loss((start, end), targets)
        alone = [task.loss(_alone(model, input_ids, types, mask, row),
                           {k: v[row:row + 1] for k, v in targets.items()}) for row in range(len(input_ids))]
    torch.testing.assert_close(batched, torch.stack(alone).mean(), atol=1e-5, rtol=0)


def test_packed_gradients_equal_the_rows_summed(minilm_dir, batch, one_thread):
    model = _model(BertForTokenClassification, minilm_dir, num_labels=5)  # eval: no dropout
    input_ids, types, mask = batch
    weights = [model.bert.layers[0].attention.query.weight, model.bert.embeddings.word_embeddings.weight,
               model.bert.layers[-1].feed_forward.output.weight, model.classifier.weight]
    model(input_ids, types, mask)[mask.bool()].square().sum().backward()
    batched = [w.grad.clone() for w in weights]
    model.zero_grad()
    for row in range(len(input_ids)):
        _alone(model, input_ids, types, mask, row).square().sum().backward()
    for got, want in zip(batched, weights):
        torch.testing.assert_close(got, want.grad, atol=1e-4, rtol=1e-4)


def test_token_loss_at_the_labelled_pieces_equals_the_whole_computation(minilm_dir, batch, one_thread):
    """Training's token-classification loss runs the last layer's projections and feed-forward
    network at the labelled pieces alone (BertModel.forward's `selected`, accelerated): the same loss and gradients as
    the logits at every position with the rest ignored."""
    from bertlab.finetune.ner import IGNORE, TokenClassificationTask
    model = _model(BertForTokenClassification, minilm_dir, num_labels=5)  # eval: no dropout
    task = TokenClassificationTask(labels=["O", "B-A", "I-A", "B-B", "I-B"])
    input_ids, types, mask = batch
    labels = torch.randint(0, 5, input_ids.shape, generator=torch.Generator().manual_seed(0))
    labels[torch.rand(input_ids.shape, generator=torch.Generator().manual_seed(1)) < 0.4] = IGNORE
    labels[~mask.bool()] = IGNORE
    labels[:, 0] = IGNORE  # [CLS]
    batch_dict = {"input_ids": input_ids, "token_type_ids": types, "attention_mask": mask, "label_ids": labels}
    weights = [model.bert.layers[0].attention.query.weight, model.bert.embeddings.word_embeddings.weight,
               model.bert.layers[-1].attention.output.weight, model.bert.layers[-1].feed_forward.output.weight,
               model.bert.layers[-1].attention.query.weight, model.classifier.weight]
    whole = task.loss(task.forward(model, batch_dict), batch_dict)
    whole.backward()
    want = [w.grad.clone() for w in weights]
    model.zero_grad()
    picked = task.training_loss(model, batch_dict)
    picked.backward()
    torch.testing.assert_close(picked, whole, atol=1e-6, rtol=1e-6)
    for w, expected in zip(weights, want):
        torch.testing.assert_close(w.grad, expected, atol=1e-5, rtol=1e-4)
    # the last layer really ran on fewer rows: a position asked for must be a real token
    selected = labels != IGNORE
    out = model.bert(input_ids, types, mask, selected=selected).sequence_output
    assert out.shape == (int(selected.sum()), model.config.hidden_size)
    with pytest.raises(ValueError, match="padding"):
        model.bert(input_ids, types, mask, selected=~mask.bool())
