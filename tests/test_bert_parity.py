"""bertlab's BERT on the real all-MiniLM-L6-v2 weights, from raw text through our tokenizer, against
HF transformers' BertModel and sentence-transformers."""
import numpy as np
import pytest
import torch

from bertlab.inference import embed_texts
from bertlab.inference.embed import padded_tensors

transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def hf_model(minilm_dir):
    return transformers.BertModel.from_pretrained(minilm_dir).eval()


def test_sentences_are_real_and_varied(real_sentences, minilm):
    _, tokenizer = minilm
    lengths = [len(ids) for ids in tokenizer.tokenize_ids_batch(real_sentences)]
    assert len(real_sentences) >= 200
    assert min(lengths) <= 8 and max(lengths) >= 200


@torch.inference_mode()
def test_sequence_and_pooled_output_equal_hf(real_sentences, minilm, hf_model):
    model, tokenizer = minilm
    ids = sorted((s[:512] for s in tokenizer.tokenize_ids_batch(real_sentences)), key=len)
    worst_seq = worst_pool = 0.0
    for start in range(0, len(ids), 16):  # padded batches: 1 to 15 padding positions per row
        input_ids, mask = padded_tensors(ids[start : start + 16])
        ours = model(input_ids, attention_mask=mask)
        theirs = hf_model(input_ids=input_ids, attention_mask=mask, token_type_ids=torch.zeros_like(input_ids))
        real = mask.bool()
        worst_seq = max(worst_seq, (ours.sequence_output - theirs.last_hidden_state)[real].abs().max().item())
        worst_pool = max(worst_pool, (ours.pooled_output - theirs.pooler_output).abs().max().item())
    assert worst_seq < 1e-5 and worst_pool < 1e-5, (worst_seq, worst_pool)


@torch.inference_mode()
def test_hidden_states_and_attentions_equal_hf(real_sentences, minilm, hf_model):
    model, tokenizer = minilm
    input_ids, mask = padded_tensors(tokenizer.tokenize_ids_batch(real_sentences[100:104]))
    ours = model(input_ids, attention_mask=mask, output_hidden_states=True, output_attentions=True)
    hf_eager = transformers.BertModel.from_pretrained(hf_model.name_or_path, attn_implementation="eager").eval()
    theirs = hf_eager(input_ids=input_ids, attention_mask=mask, output_hidden_states=True, output_attentions=True)
    assert len(ours.hidden_states) == len(theirs.hidden_states) == 7
    real = mask.bool()
    for a, b in zip(ours.hidden_states, theirs.hidden_states):
        assert (a - b)[real].abs().max() < 1e-5
    for a, b in zip(ours.attentions, theirs.attentions):
        assert (a - b).transpose(1, 2)[real].abs().max() < 1e-5  # rows of real query positions


def test_mean_pooled_embeddings_equal_sentence_transformers(real_sentences, minilm, minilm_dir):
    st = pytest.importorskip("sentence_transformers")
    model, tokenizer = minilm
    theirs = st.SentenceTransformer(minilm_dir, device="cpu").encode(real_sentences, normalize_embeddings=True)
    # sentence-transformers truncates at 256 tokens for this model
    ours = embed_texts(model, tokenizer, real_sentences, normalize=True, max_length=256)
    assert np.abs(ours - theirs).max() < 1e-5


@torch.inference_mode()
def test_padding_invariance(real_sentences, minilm):
    model, tokenizer = minilm
    short, long = tokenizer.tokenize_ids_batch([real_sentences[3], real_sentences[-1]])
    alone = model(torch.tensor([short]))
    input_ids, mask = padded_tensors([short, long])
    batched = model(input_ids, attention_mask=mask)
    torch.testing.assert_close(batched.sequence_output[0, : len(short)], alone.sequence_output[0], atol=1e-5, rtol=0)
    torch.testing.assert_close(batched.pooled_output[0], alone.pooled_output[0], atol=1e-5, rtol=0)


def test_embedding_rows_come_back_in_input_order(real_sentences, minilm):
    model, tokenizer = minilm
    texts = real_sentences[::7]
    together = embed_texts(model, tokenizer, texts, batch_size=8)
    one_by_one = np.stack([embed_texts(model, tokenizer, [t])[0] for t in texts[:6]])
    np.testing.assert_allclose(together[:6], one_by_one, atol=1e-5, rtol=0)
