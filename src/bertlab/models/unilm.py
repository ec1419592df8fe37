"""UniLM (Dong et al. 2019, "Unified Language Model Pre-training for Natural Language Understanding
and Generation"; the notes' improvement list, 001 "BERT 的不足"): one BERT, three self-attention
masks. Bidirectional (core.masks.padding_mask), left-to-right (left_to_right_mask) and
sequence-to-sequence (seq2seq_mask) language modelling all train the same BertForPreTraining; only
the mask passed to BertModel differs. Nothing here adds a parameter.

For generation the input is ``[CLS] source [SEP] target [SEP]`` with segment 0 on the source and 1
on the target. Fine-tuning masks target tokens and predicts them (unilm.objective); decoding
appends a [MASK] after the target so far and reads the next token from its output, left to right.

`UniLMSeq2Seq` gives the model the shape the shared greedy decoding and beam search of
inference.translate drive (`config`, `encode`, `decode`, `new_cache`), so UniLM decodes with the
same search as the encoder-decoder Transformer:

* encode: BERT over the source alone, and every layer's keys and values of it. Under the
  seq2seq mask the source never sees the target, so these never change while the target grows.
* decode: the target tokens not yet cached and a [MASK] go through the layers, attending to the
  source's keys and values, the cached target's, and their own under the causal mask. With a
  cache (core.kv_cache.KVCache) a step costs two positions: the newest token, whose keys and values
  are appended, and the [MASK], whose are not (the next step puts the real token in its place).
  Without one every step recomputes the whole target (the reference the tests compare against,
  with a third path: BertModel over the whole sequence under seq2seq_mask).
"""
from dataclasses import dataclass

import torch
from torch import nn

from ..core import KVCache, causal_mask, padding_mask, scaled_dot_product_attention
from .bert import BertForPreTraining

SOURCE, TARGET = 0, 1  # segment (token type) ids


@dataclass(frozen=True)
class UniLMDecodingConfig:
    """What the shared search reads from a model's config."""
    pad_token_id: int
    bos_token_id: int  # the search starts every target with it; a placeholder, never fed to BERT
    eos_token_id: int  # [SEP] ends the target
    max_position_embeddings: int  # positions left to the target: BERT's, less the source budget


class UniLMSeq2Seq(nn.Module):
    """A BertForPreTraining (its encoder and masked-LM head) as a sequence-to-sequence model.

    max_source_tokens: the source budget, [CLS] and [SEP] included; the target gets the rest of
    BERT's positions, so a sentence's length limit never depends on the other sources of its batch."""

    def __init__(self, model: BertForPreTraining, cls_id: int, sep_id: int, mask_id: int, max_source_tokens: int):
        super().__init__()
        positions = model.config.max_position_embeddings
        if not 3 <= max_source_tokens <= positions - 2:
            raise ValueError(f"max_source_tokens {max_source_tokens}: needs 3 to {positions - 2} (BERT has "
                             f"{positions} positions; the target needs a token and its [SEP])")
        kind = getattr(model.config, "position_embedding_type", "absolute")
        if kind != "absolute":  # decode() adds learned absolute positions, per row, itself
            raise ValueError(f"UniLM decoding needs absolute position embeddings; this model has {kind!r}")
        self.model, self.cls_id, self.sep_id, self.mask_id = model, cls_id, sep_id, mask_id
        self.max_source_tokens = max_source_tokens
        self.config = UniLMDecodingConfig(model.config.pad_token_id, mask_id, sep_id, positions - max_source_tokens)
        self.training = model.training  # the search restores this mode after decoding: the model's own

    @property
    def layers(self):
        return self.model.bert.layers

    def new_cache(self, max_len: int | None = None) -> KVCache:
        return KVCache(len(self.layers), max_len)

    def encode(self, src):
        """src (batch, S): [CLS] source [SEP], right-padded -> (memory, src_mask): memory is every
        layer's source keys and values, (batch, layers, 2, heads, S, d_head); src_mask (batch, S)."""
        src_mask = (src != self.config.pad_token_id).long()
        out = self.model.bert(src, torch.full_like(src, SOURCE), src_mask, output_hidden_states=True)
        kv = [torch.stack([block.attention.split_heads(block.attention.key(h)),
                           block.attention.split_heads(block.attention.value(h))], 1)
              for block, h in zip(self.layers, out.hidden_states)]  # hidden_states[l] is layer l's input
        return torch.stack(kv, 1), src_mask

    def decode(self, tokens, memory, src_mask, cache: KVCache | None = None, last_only: bool = True):
        """Next-token logits (rows, 1, vocab) after `tokens`: (rows, len) the search's placeholder
        and the target so far, or with a cache past its first step the newest token only."""
        first = cache is None or cache.keys[0] is None
        real = tokens[:, 1:] if first else tokens  # the placeholder is never fed
        past = 0 if first else cache.keys[0].size(-2)
        ids = torch.cat([real, torch.full_like(tokens[:, :1], self.mask_id)], 1)
        steps = torch.arange(past, past + ids.size(1), device=ids.device)
        x = self._embed(ids, src_mask.sum(1, keepdim=True) + steps)
        rows, n = ids.shape
        mask = torch.cat([padding_mask(src_mask).expand(rows, 1, n, -1),
                          causal_mask(n, past + n, device=ids.device).expand(rows, 1, n, past + n)], -1)
        for layer, block in enumerate(self.layers):
            x = _block_step(block, x, memory[:, layer], mask, cache, layer, real.size(1))
        return self.model.mlm(x[:, -1:])

    def _embed(self, ids, positions):
        """BERT's embedding sum with per-row positions (the target starts after each row's source)."""
        e = self.model.bert.embeddings
        x = e.word_embeddings(ids) + e.position_embeddings(positions) + e.token_type_embeddings.weight[TARGET]
        return e.dropout(e.norm(x))


def _block_step(block, x, source_kv, mask, cache, layer: int, n_real: int):
    """One EncoderBlock over the target positions x, their keys and values after the source's and
    the cached target's; the first n_real positions are real tokens (cached), the last a [MASK]."""
    attention, sub = block.attention, block.attention_sublayer
    q, k, v = attention.heads_qkv(sub.before(x))
    if cache is not None:
        past_k, past_v = cache.append(layer, k[:, :, :n_real], v[:, :, :n_real])
        k, v = torch.cat([past_k, k[:, :, n_real:]], 2), torch.cat([past_v, v[:, :, n_real:]], 2)
    k, v = torch.cat([source_kv[:, 0], k], 2), torch.cat([source_kv[:, 1], v], 2)
    out, _ = scaled_dot_product_attention(q, k, v, mask)
    x = sub.after(x, attention.output(out.transpose(1, 2).reshape(x.size(0), x.size(1), -1)))
    ff = block.feed_forward_sublayer
    return ff.after(x, block.feed_forward(ff.before(x)))


def seq2seq_example(source: list[int], target: list[int], cls_id: int, sep_id: int) -> tuple[list[int], list[int]]:
    """(input ids, segment ids) of one pair: [CLS] source [SEP] target [SEP], segments 0 then 1."""
    ids = [cls_id, *source, sep_id, *target, sep_id]
    return ids, [SOURCE] * (len(source) + 2) + [TARGET] * (len(target) + 1)
