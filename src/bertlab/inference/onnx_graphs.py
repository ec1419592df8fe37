"""The graphs an ONNX export holds: each wraps a bertlab model so that it takes and returns plain
tensors (ONNX has no KVCache or BertOutput), and names its inputs and outputs.

    kind          file                graph
    bert          model.onnx          input_ids, attention_mask, token_type_ids -> sequence_output, pooled_output
    modernbert    model.onnx          input_ids, attention_mask -> sequence_output (no segments, no pooler)
    finetuned     model.onnx          the inputs of its encoder -> logits (classification, regression, NER) or
                                      start_logits, end_logits (QA); multiple choice: (batch, choices, len) inputs
    gpt           model.onnx          input_ids, attention_mask (batch, past + len), position_ids,
                                      past_key_i, past_value_i -> logits, present_key_i, present_value_i
    translation   encoder.onnx        src -> cross_kv, src_mask
                  decoder_step.onnx   tokens (batch, 1), cross_kv, src_mask, past_key_i, past_value_i
                                      -> logits (batch, vocab), present_key_i, present_value_i

GPT's one graph serves the prompt (no past: past_key_i of 0 positions) and every later step.
The translation encoder projects its output once into every decoder layer's encoder-decoder keys
and values (cross_kv, (batch, src_len, 2 * layers * d_model)): what the decoder's cache keeps from
the first step on in bertlab (core.kv_cache.KVCache.memory), here computed once with the encoder.
"""
import torch
from torch import nn

from ..core import KVCache


def _cache(layers, past):
    """A KVCache holding the past keys and values given as graph inputs (key_0, value_0, key_1, ...)."""
    cache = KVCache(layers, None)  # grows by concatenation: present = [past; new]
    cache.keys, cache.values = list(past[0::2]), list(past[1::2])
    return cache


def _presents(cache):
    return [t for pair in zip(cache.keys, cache.values) for t in pair]


def cache_names(prefix: str, layers: int) -> list[str]:
    return [f"{prefix}_{what}_{i}" for i in range(layers) for what in ("key", "value")]


def encoder_inputs(config) -> list[str]:
    """The inputs of a BERT-family graph: token_type_ids only where the model has segments
    (BERT's config has type_vocab_size; ModernBERT has none)."""
    names = ["input_ids", "attention_mask"]
    return names + ["token_type_ids"] if hasattr(config, "type_vocab_size") else names


class EncoderGraph(nn.Module):
    """A BertModel (sequence_output, pooled_output) or a ModernBertModel (sequence_output: it has
    no pooler); the inputs as encoder_inputs says."""

    def __init__(self, encoder):
        super().__init__()
        self.encoder = encoder
        self.inputs = encoder_inputs(encoder.config)
        self.outputs = ["sequence_output"] + (["pooled_output"] if hasattr(encoder, "pooler") else [])

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        out = self.encoder(input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
        return (out.sequence_output, out.pooled_output)[:len(self.outputs)]


class HeadGraph(nn.Module):
    """A fine-tuned BertFor* or ModernBertFor* model: its head's logits (QA: start and end)."""

    def __init__(self, model):
        super().__init__()
        self.model = model
        self.inputs = encoder_inputs(model.config)
        self.outputs = ["start_logits", "end_logits"] if type(model).__name__.endswith("ForQuestionAnswering") \
            else ["logits"]

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        return self.model(input_ids, token_type_ids=token_type_ids, attention_mask=attention_mask)


class GPTStepGraph(nn.Module):
    """GPT over new tokens after `past` cached positions: all new positions' logits and the cache."""

    def __init__(self, gpt):
        super().__init__()
        self.gpt, layers = gpt, gpt.config.n_layer
        self.inputs = ["input_ids", "attention_mask", "position_ids"] + cache_names("past", layers)
        self.outputs = ["logits"] + cache_names("present", layers)

    def forward(self, input_ids, attention_mask, position_ids, past):
        cache = _cache(self.gpt.config.n_layer, past)
        logits, _ = self.gpt(input_ids, cache=cache, attention_mask=attention_mask, positions=position_ids)
        return (logits, *_presents(cache))


class TranslationEncoderGraph(nn.Module):
    """The Transformer's encoder, its output projected to every decoder layer's cross keys/values."""
    inputs = ["src"]
    outputs = ["cross_kv", "src_mask"]

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, src):
        memory, src_mask = self.model.encode(src)
        parts = []
        for block in self.model.decoder:
            parts += [block.cross_attention.key(memory), block.cross_attention.value(memory)]
        return torch.cat(parts, -1), src_mask


class TranslationStepGraph(nn.Module):
    """One decoding step: the newest target token after `past` cached ones -> next-token logits."""

    def __init__(self, model):
        super().__init__()
        self.model, layers = model, len(model.decoder)
        self.inputs = ["tokens", "cross_kv", "src_mask"] + cache_names("past", layers)
        self.outputs = ["logits"] + cache_names("present", layers)

    def forward(self, tokens, cross_kv, src_mask, past):
        layers, d = len(self.model.decoder), self.model.config.d_model
        cache = _cache(layers, past)
        for i, block in enumerate(self.model.decoder):
            attention = block.cross_attention
            key, value = cross_kv[..., 2 * i * d:(2 * i + 1) * d], cross_kv[..., (2 * i + 1) * d:(2 * i + 2) * d]
            cache.memory[i] = attention.split_heads(key), attention.split_heads(value)
        # memory is read from the cache; cross_kv stands in for it only so the decoder takes the
        # encoder-decoder path
        logits = self.model.decode(tokens, cross_kv, src_mask, cache, last_only=True)[:, -1]
        return (logits, *_presents(cache))
