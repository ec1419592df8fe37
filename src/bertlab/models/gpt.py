"""GPT: the decoder-only Transformer of generative pre-training (GPT-2's architecture).

A stack of pre-LN decoder blocks (masked self-attention, no encoder-decoder attention) over learned
token and position embeddings, a final LayerNorm, and an output layer that shares its weights with
the token embeddings. Trained to predict token t+1 from tokens 0..t; sampled one token at a time.
"""
import math

import torch
import torch.nn.functional as F
from torch import nn

from .gpt_config import PRESETS, GPTConfig  # noqa: F401 (GPTConfig and PRESETS are imported from here too)
from ..core import DecoderBlock, KVCache, causal_mask
from ..core.masks import key_positions, query_positions


class GPT(nn.Module):
    """`forward(idx, targets=None) -> (logits, loss)`; with a cache (`new_cache`) each call may pass
    only the new positions, whose keys and values are appended for the next call."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.config = c = config
        self.wte = nn.Embedding(c.vocab_size, c.n_embd)
        self.wpe = nn.Embedding(c.n_positions, c.n_embd)
        self.drop = nn.Dropout(c.embd_pdrop)
        self.h = nn.ModuleList(
            DecoderBlock(c.n_embd, c.n_head, c.d_ff, dropout=c.resid_pdrop, attention_dropout=c.attn_pdrop,
                         act=c.activation_function, norm_first=True, eps=c.layer_norm_epsilon,
                         cross_attention=False)
            for _ in range(c.n_layer))
        self.ln_f = nn.LayerNorm(c.n_embd, eps=c.layer_norm_epsilon)
        self.apply(self._init_weights)
        # GPT-2: residual projections scaled by 1/sqrt(number of residual additions), so the
        # residual stream's variance does not grow with depth.
        for name, p in self.named_parameters():
            if name.endswith(("self_attention.output.weight", "feed_forward.output.weight")):
                nn.init.normal_(p, mean=0.0, std=c.initializer_range / math.sqrt(2 * c.n_layer))

    def _init_weights(self, module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=self.config.initializer_range)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def new_cache(self, max_len: int | None = None) -> KVCache:
        """A key/value cache for every block, preallocated for `max_len` positions (n_positions)."""
        return KVCache(len(self.h), max_len or self.config.n_positions)

    def hidden_states(self, idx, cache=None, attention_mask=None, positions=None):
        """The final LayerNorm's output (batch, len, n_embd) for token ids `idx` (batch, len).

        attention_mask (batch, past + len), 1 for real tokens, 0 for padding, hides padded keys;
        positions (batch, len) default to past .. past + len - 1.
        """
        past = cache.length() if cache is not None else 0
        length = idx.size(1)
        if past + length > self.config.n_positions:
            raise ValueError(f"{past + length} positions exceed n_positions {self.config.n_positions}")
        if positions is None:
            positions = torch.arange(past, past + length, device=idx.device)
        x = self.drop(self.wte(idx) + self.wpe(positions))
        mask = self.self_mask(length, past + length, attention_mask, idx.device)
        for i, block in enumerate(self.h):
            x, _ = block(x, self_mask=mask, cache=cache, layer=i)
        return self.ln_f(x)

    @staticmethod
    def self_mask(length, key_len, attention_mask, device):
        if attention_mask is None:
            if length == 1:  # one new position attends to everything cached: no mask, the cheapest SDPA call
                return None
            return causal_mask(length, key_len, device)
        allowed = causal_mask(length, key_len, device) & attention_mask.bool()[:, None, None, :]
        # a padding query would see no key at all (a softmax of -inf: NaN); let it see itself
        return allowed | _diagonal(length, key_len, device)

    def forward(self, idx, targets=None, cache=None, attention_mask=None, positions=None, last_only=False):
        """Logits (batch, len, vocab) — or (batch, 1, vocab) with `last_only`, as sampling needs —
        and, given `targets` (batch, len; -100 is ignored), the mean next-token cross-entropy.
        (The accelerated model, models.accelerate, returns no logits from a training step with
        targets: its output layer and loss run as one step that never keeps them.)"""
        x = self.hidden_states(idx, cache, attention_mask, positions)
        if last_only:
            x = x[:, -1:]
        logits = self.output_logits(x)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1), ignore_index=-100)
        return logits, loss

    def output_logits(self, x):
        """The output layer, tied to the token embeddings."""
        return F.linear(x, self.wte.weight)


def _diagonal(length, key_len, device):
    """(length, key_len) bool: each query sees its own key (bottom-right aligned like causal_mask)."""
    return key_positions(key_len, device)[None, :] == query_positions(length, key_len, device)[:, None]
