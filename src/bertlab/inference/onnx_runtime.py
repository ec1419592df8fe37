"""An ONNX export (onnx_export) run by onnxruntime behind the interface of the bertlab model it
came from, so bertlab's own decoding and pooling code runs on it unchanged: embed_ids on an
OnnxBert, generate (greedy and sampling) on an OnnxGPT, greedy_decode and beam_search on an
OnnxTranslator. The key/value cache is bertlab's KVCache; each step hands its tensors to the graph
and keeps the graph's presents.

    model = load_onnx("minilm.onnx")              # the folder `bertlab export` wrote
    vectors = embed_ids(model, sequences)         # as with the PyTorch model
"""
import os

import numpy as np
import torch
from torch import nn

from ..core import KVCache
from ..io import read_json

FORMAT = "bertlab-onnx-1"


def require_onnx():
    """onnx, onnxruntime and onnxscript (the exporter's) or a clear error saying how to get them."""
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
        import onnxscript  # noqa: F401
    except ImportError as e:
        raise ValueError(f"ONNX export and onnxruntime need the optional packages onnx, onnxruntime and onnxscript "
                         f"({e.name} is missing): pip install 'bertlab[export]'") from None


def session(path, threads: int | None = None):
    """An onnxruntime CPU session for the graph at `path`, with torch's thread count by default."""
    require_onnx()
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads or torch.get_num_threads()
    options.inter_op_num_threads = 1
    return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])


class _Graph:
    """One graph: named numpy inputs in, torch tensors out."""

    def __init__(self, path, names: dict, threads=None):
        self.session, self.inputs, self.outputs = session(path, threads), names["inputs"], names["outputs"]

    def __call__(self, *tensors):
        feed = {name: np.ascontiguousarray(t.numpy()) for name, t in zip(self.inputs, tensors)}
        return [torch.from_numpy(o) for o in self.session.run(None, feed)]


class _OnnxModel(nn.Module):
    """nn.Module so that the decoding code's model.eval(), .training and next(model.parameters())
    (the device: always the CPU) work; the one parameter is an empty marker."""

    def __init__(self, folder, meta, threads=None):
        super().__init__()
        self.meta, self.config = meta, _config(meta)
        self.graphs = {name: _Graph(os.path.join(folder, name), names, threads)
                       for name, names in meta["graphs"].items()}
        self.device_marker = nn.Parameter(torch.empty(0), requires_grad=False)


class OnnxBert(_OnnxModel):
    """A BERT or ModernBERT encoder or a fine-tuned model: forward as the PyTorch model's (BertOutput
    for an encoder, pooled_output None where it has no pooler). The graph is fed the inputs it
    names (ModernBERT's takes no token_type_ids: they are dropped)."""

    def forward(self, input_ids, token_type_ids=None, attention_mask=None):
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        given = {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}
        graph = self.graphs["model.onnx"]
        out = graph(*(given[name] for name in graph.inputs))
        if self.meta["kind"] in ("bert", "modernbert"):
            from ..models.bert import BertOutput
            return BertOutput(out[0], out[1] if len(out) > 1 else None)
        return tuple(out) if len(out) > 1 else out[0]


class OnnxGPT(_OnnxModel):
    """GPT's forward(idx, cache=..., attention_mask=..., positions=..., last_only=...) -> (logits, None)."""

    def new_cache(self, max_len=None) -> KVCache:
        return KVCache(self.config.n_layer, None)

    def forward(self, idx, targets=None, cache=None, attention_mask=None, positions=None, last_only=False):
        c = self.config
        past = cache.length() if cache is not None else 0
        if past + idx.size(1) > c.n_positions:
            raise ValueError(f"{past + idx.size(1)} positions exceed n_positions {c.n_positions}")
        if attention_mask is None:
            attention_mask = torch.ones(idx.size(0), past + idx.size(1), dtype=torch.long)
        if positions is None:
            positions = torch.arange(past, past + idx.size(1))
        positions = positions.expand(idx.size(0), idx.size(1))
        logits, *presents = self.graphs["model.onnx"](idx, attention_mask.long(), positions, *_past(cache, idx.size(0),
                                                      c.n_layer, c.n_head, c.n_embd // c.n_head))
        if cache is not None:
            cache.keys, cache.values = presents[0::2], presents[1::2]
        if last_only:
            logits = logits[:, -1:]
        loss = None
        if targets is not None:
            loss = nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1), ignore_index=-100)
        return logits, loss


class OnnxTranslator(_OnnxModel):
    """The Transformer's encode(src) and decode(tokens, memory, src_mask, cache) for translate.py.
    `memory` is the encoder graph's cross_kv: every decoder layer's encoder-decoder keys and values."""

    def new_cache(self, max_len=None) -> KVCache:
        return KVCache(self.config.decoder_layers, None)

    def encode(self, src):
        cross_kv, src_mask = self.graphs["encoder.onnx"](src)
        return cross_kv, src_mask

    def decode(self, tgt, memory, src_mask, cache=None, last_only=False, keep=None):
        """Logits (batch, 1, vocab) of the position after `tgt`'s last token. Without a cache the
        whole prefix is fed one token at a time (the graph is a single step)."""
        c = self.config
        if cache is None:
            cache = self.new_cache()
            for t in range(tgt.size(1) - 1):
                self.decode(tgt[:, t:t + 1], memory, src_mask, cache)
            tgt = tgt[:, -1:]
        heads = c.attention_heads
        logits, *presents = self.graphs["decoder_step.onnx"](
            tgt[:, -1:], memory, src_mask, *_past(cache, tgt.size(0), c.decoder_layers, heads, c.d_model // heads))
        cache.keys, cache.values = presents[0::2], presents[1::2]
        return logits[:, None]


def _past(cache, batch, layers, heads, d_head):
    """The cache's keys and values as graph inputs; none cached yet: tensors of 0 positions."""
    if cache is None or cache.keys[0] is None:
        empty = torch.zeros(batch, heads, 0, d_head)
        return [empty] * (2 * layers)
    return [t for pair in zip(cache.keys, cache.values) for t in pair]


def _config(meta):
    """The model's config, of the class onnx.json names (an export from before config_class was
    written: the class of its kind)."""
    from ..models.bert_config import BertConfig
    from ..models.gpt_config import GPTConfig
    from ..models.modernbert_config import ModernBertConfig
    from ..models.transformer_config import TransformerConfig
    classes = {c.__name__: c for c in (BertConfig, ModernBertConfig, GPTConfig, TransformerConfig)}
    by_kind = {"bert": BertConfig, "modernbert": ModernBertConfig, "finetuned": BertConfig, "gpt": GPTConfig,
               "translation": TransformerConfig}
    config_class = classes.get(meta.get("config_class")) or by_kind[meta["kind"]]
    return config_class(**meta["config"])


def load_onnx(folder, threads: int | None = None) -> _OnnxModel:
    """The export in `folder` as an OnnxBert (bert, modernbert, finetuned), OnnxGPT or OnnxTranslator."""
    path = os.path.join(folder, "onnx.json")
    if not os.path.isfile(path):
        raise ValueError(f"{folder}: no onnx.json; not a folder written by `bertlab export --onnx`")
    meta = read_json(path)
    if meta.get("format") != FORMAT:
        raise ValueError(f"{path}: format {meta.get('format')!r}, not {FORMAT!r}")
    adapter = {"bert": OnnxBert, "modernbert": OnnxBert, "finetuned": OnnxBert, "gpt": OnnxGPT,
               "translation": OnnxTranslator}[meta["kind"]]
    return adapter(folder, meta, threads).eval()
