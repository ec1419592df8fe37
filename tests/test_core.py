"""The shared core against the notes' worked examples and the properties the paper relies on."""
import torch
import torch.nn.functional as F

from bertlab.core import (DecoderBlock, EncoderBlock, KVCache, MultiHeadAttention, PositionalEncoding,
                          causal_mask, padding_mask, scaled_dot_product_attention, sinusoidal_positions)
from bertlab.core.masks import CAUSAL
from bertlab.models import BertConfig
from bertlab.models.bert import BertEmbeddings

# The notes' self-attention example: three 4-d inputs and 4x3 key/query/value weights.
X = torch.tensor([[1, 0, 1, 0], [0, 2, 0, 2], [1, 1, 1, 1]], dtype=torch.float64)
W_KEY = torch.tensor([[0, 0, 1], [1, 1, 0], [0, 1, 0], [1, 1, 0]], dtype=torch.float64)
W_QUERY = torch.tensor([[1, 0, 1], [1, 0, 0], [0, 0, 1], [0, 1, 1]], dtype=torch.float64)
W_VALUE = torch.tensor([[0, 2, 0], [0, 3, 0], [1, 0, 3], [1, 1, 0]], dtype=torch.float64)


def test_notes_self_attention_example():
    keys, queries, values = X @ W_KEY, X @ W_QUERY, X @ W_VALUE
    assert keys.tolist() == [[0, 1, 1], [4, 4, 0], [2, 3, 1]]
    assert values.tolist() == [[1, 2, 3], [2, 8, 0], [2, 6, 3]]
    assert queries.tolist() == [[1, 0, 2], [2, 2, 2], [2, 1, 3]]
    assert (queries @ keys.T).tolist() == [[2, 4, 4], [4, 16, 12], [4, 12, 10]]
    # The notes skip the 1/sqrt(d_k) scaling, so scale the queries by sqrt(3) to undo ours.
    out, weights = scaled_dot_product_attention(queries * 3 ** 0.5, keys, values, need_weights=True)
    torch.testing.assert_close(weights[0], torch.tensor([0.0634, 0.4683, 0.4683], dtype=torch.float64),
                               atol=1e-4, rtol=0)
    torch.testing.assert_close(out[0], torch.tensor([1.9366, 6.6831, 1.5951], dtype=torch.float64),
                               atol=1e-4, rtol=0)
    fused, _ = scaled_dot_product_attention(queries * 3 ** 0.5, keys, values)
    torch.testing.assert_close(fused, out)


def test_notes_embedding_sum_equals_one_hot_matmul():
    # The notes' tables stacked as one 10x4 matrix numbered 1..40: rows 0-4 are the token table
    # (vocab 5), rows 5-7 the positions (3), rows 8-9 the segments (2).
    table = torch.arange(1, 41, dtype=torch.float32).view(10, 4)
    emb = BertEmbeddings(BertConfig(vocab_size=5, hidden_size=4, num_attention_heads=1, max_position_embeddings=3))
    with torch.no_grad():
        emb.word_embeddings.weight.copy_(table[0:5])
        emb.position_embeddings.weight.copy_(table[5:8])
        emb.token_type_embeddings.weight.copy_(table[8:10])
    summed = emb.sum_embeddings(torch.tensor([[2]]), torch.tensor([[0]]))[0, 0]
    assert summed.tolist() == [63, 66, 69, 72]
    one_hot = torch.cat([F.one_hot(torch.tensor(2), 5), F.one_hot(torch.tensor(0), 3),
                         F.one_hot(torch.tensor(0), 2)]).float()
    assert (one_hot @ table).tolist() == summed.tolist()


def test_sinusoidal_positions_match_the_paper_formula():
    pe = sinusoidal_positions(50, 16)
    for pos in (0, 7, 49):
        for i in range(8):
            angle = torch.tensor(pos / 10000 ** (2 * i / 16), dtype=torch.float64)
            assert abs(pe[pos, 2 * i] - torch.sin(angle)) < 1e-5
            assert abs(pe[pos, 2 * i + 1] - torch.cos(angle)) < 1e-5
    x = torch.zeros(1, 5, 16)
    torch.testing.assert_close(PositionalEncoding(16, 50)(x, start=3)[0], pe[3:8])


def test_masks():
    assert causal_mask(3).tolist() == [[True, False, False], [True, True, False], [True, True, True]]
    # two new queries at the end of five cached positions
    assert causal_mask(2, 5).tolist() == [[True] * 4 + [False], [True] * 5]
    assert padding_mask(torch.tensor([[1, 1, 0]])).shape == (1, 1, 1, 3)


def test_attention_weights_path_equals_fused_path_with_mask():
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 4).eval()
    x = torch.randn(2, 5, 16)
    mask = padding_mask(torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]]))
    fast, none = mha(x, mask=mask)
    slow, weights = mha(x, mask=mask, need_weights=True)
    assert none is None and weights.shape == (2, 4, 5, 5)
    torch.testing.assert_close(fast, slow, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 4, 5))
    assert weights[1, :, :, 3:].abs().max() == 0  # padding keys get no attention


def test_whole_sequence_causal_equals_the_built_causal_mask():
    """core.masks.CAUSAL (the fused kernel's is_causal) computes what causal_mask(len) does, on the
    fused path and on the plain formula, which builds the mask (need_weights, relative positions)."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 6, 8) for _ in range(3))
    built, _ = scaled_dot_product_attention(q, k, v, causal_mask(6))
    fused, none = scaled_dot_product_attention(q, k, v, CAUSAL)
    plain, weights = scaled_dot_product_attention(q, k, v, CAUSAL, need_weights=True)
    assert none is None
    torch.testing.assert_close(fused, built, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(plain, built, atol=1e-6, rtol=1e-5)
    assert weights[..., 2, 3:].abs().max() == 0  # query 2 sees keys 0..2 only
    changed = v.clone()
    changed[:, :, 4] += 10.0  # a later value changes no earlier output
    later, _ = scaled_dot_product_attention(q, k, changed, CAUSAL)
    torch.testing.assert_close(later[:, :, :4], fused[:, :, :4])
    assert (later[:, :, 4:] - fused[:, :, 4:]).abs().min() > 1e-3


def test_encoder_block_padding_invariance_and_layer_norm_placement():
    torch.manual_seed(0)
    for norm_first in (False, True):
        block = EncoderBlock(16, 4, 32, dropout=0.0, norm_first=norm_first).eval()
        x = torch.randn(1, 4, 16)
        alone, _ = block(x)
        padded = torch.cat([x, torch.randn(1, 3, 16)], dim=1)
        batched, _ = block(padded, mask=padding_mask(torch.tensor([[1, 1, 1, 1, 0, 0, 0]])))
        torch.testing.assert_close(batched[:, :4], alone, atol=1e-5, rtol=1e-5)
        # post-LN ends in LayerNorm: every output row has mean 0 and unit variance
        row_means = alone.mean(-1).abs().max()
        assert (row_means < 1e-5) == (not norm_first)


def _decoder(cross_attention=True, norm_first=False):
    torch.manual_seed(0)
    return DecoderBlock(16, 4, 32, dropout=0.0, cross_attention=cross_attention, norm_first=norm_first).eval()


def test_decoder_causal_mask_blocks_the_future():
    block = _decoder()
    memory, y = torch.randn(1, 6, 16), torch.randn(1, 5, 16)
    out, _ = block(y, memory, self_mask=causal_mask(5))
    changed = y.clone()
    changed[0, 3] += 10.0  # change position t+1 = 3
    out2, _ = block(changed, memory, self_mask=causal_mask(5))
    torch.testing.assert_close(out2[:, :3], out[:, :3])
    assert (out2[:, 3:] - out[:, 3:]).abs().max() > 1e-3


def test_decoder_cache_equals_full_recomputation():
    for cross, norm_first in ((True, False), (False, True)):
        block = _decoder(cross, norm_first)
        memory = torch.randn(2, 6, 16) if cross else None
        memory_mask = padding_mask(torch.tensor([[1] * 6, [1] * 4 + [0] * 2])) if cross else None
        y = torch.randn(2, 5, 16)
        full, _ = block(y, memory, self_mask=causal_mask(5), memory_mask=memory_mask)
        cache = KVCache(1)
        # a 2-position prefill, then one position per step
        first, _ = block(y[:, :2], memory, self_mask=causal_mask(2), memory_mask=memory_mask, cache=cache)
        steps = [first] + [block(y[:, t:t + 1], memory, memory_mask=memory_mask, cache=cache)[0] for t in range(2, 5)]
        torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)
        assert len(cache) == 5


def test_kv_cache_reorder_for_beam_search():
    block = _decoder(cross_attention=False)
    y = torch.randn(3, 2, 16)
    cache = KVCache(1)
    block(y, self_mask=causal_mask(2), cache=cache)
    cache.reorder(torch.tensor([2, 2, 0]))
    step, _ = block(y[[2, 2, 0], 1:2] * 0 + 1, cache=cache)
    ref = KVCache(1)
    block(y[[2, 2, 0]], self_mask=causal_mask(2), cache=ref)
    torch.testing.assert_close(step, block(y[[2, 2, 0], 1:2] * 0 + 1, cache=ref)[0])


@torch.no_grad()  # decoding; reorder writes into its spare buffers (out=), which autograd refuses
def test_preallocated_cache_reorders_and_drops_rows_like_a_growing_cache():
    # beam search reorders every step and drops the rows of finished sentences
    torch.manual_seed(0)
    block = _decoder(cross_attention=False)
    grown, preallocated = KVCache(1), KVCache(1, max_len=6)
    y = torch.randn(4, 1, 16)
    for index in ([3, 3, 0, 1], [1, 0, 2], [2, 2]):  # reorder, then fewer rows each step
        outs = [block(y, cache=cache)[0] for cache in (grown, preallocated)]
        torch.testing.assert_close(outs[1], outs[0])
        for cache in (grown, preallocated):
            cache.reorder(torch.tensor(index))
        y = torch.randn(len(index), 1, 16)
    torch.testing.assert_close(block(y, cache=preallocated)[0], block(y, cache=grown)[0])
    assert len(preallocated) == 4 and preallocated.keys[0].shape == grown.keys[0].shape


def test_fused_qkv_equals_separate_projections_and_follows_weight_changes():
    torch.manual_seed(0)
    from bertlab.models.accelerate import accelerate
    mha = accelerate(MultiHeadAttention(16, 4)).eval()  # the speed path: Q, K, V as one matmul
    x = torch.randn(2, 5, 16)
    separate = [mha.split_heads(proj(x)) for proj in (mha.query, mha.key, mha.value)]
    with torch.inference_mode():
        for fused, ref in zip(mha.heads_qkv(x), separate):
            torch.testing.assert_close(fused, ref)
        before = mha(x)[0]
    with torch.no_grad():
        mha.value.weight.mul_(2)  # an optimizer step or a checkpoint load
    with torch.inference_mode():
        after = mha(x)[0]
    assert (after - before).abs().max() > 1e-3
    torch.testing.assert_close(after, mha(x)[0].detach())  # the autograd path agrees
