"""accelerate(model): the CPU speed paths, swapped into a plain model in place.

Every model of models/ is written as the notes draw it: one padded forward, nn.Linear, nn.Dropout,
the attention formula. accelerate() turns its modules into subclasses of their classes that
compute the same outputs faster (tests/test_accelerate.py checks outputs and gradients for every
model kind), the way inference.int8 swaps its linears: the parameters, their names and the
state dict stay as they are.

| plain | accelerated | what changes |
|---|---|---|
| nn.Linear of attention, feed-forward, the translation output | PrepackableLinear | oneDNN while training, an MKL-prepacked weight while decoding |
| nn.Dropout | NumpyDropout | numpy draws the CPU mask (half the cost; same distribution, torch's seeds) |
| MultiHeadAttention | FastMultiHeadAttention | Q, K, V as one matmul; packed and bucketed batches; chosen rows |
| SublayerConnection | FastSublayerConnection | dropout and the residual sum in one pass |
| EncoderBlock | FastEncoderBlock | packed tokens; some query or output rows only |
| BertEmbeddings, BertModel | FastBertEmbeddings, FastBertModel | the padding packed away on a CPU, self-attention by length buckets; a head's positions (pretraining, relation, [CLS]) or selected tokens (NER) computed alone in the last layer |
| GPT | FastGPT | output layer and loss in one step while training; MKL-prepacked weights for decoding; PyTorch's causal kernel |
| ModernBertModel | FastModernBertModel | the padding packed away (core.unpadded_attention) |

The jobs (training.engine.fit), load_model, serve and the benchmarks accelerate; the notes' worked
examples, ONNX export (a graph for every batch) and the formula tests use the plain model.
`plain(model)` undoes accelerate(), in place.
"""
import contextlib

import torch
from torch import nn

from ..core import EncoderBlock, MultiHeadAttention, SublayerConnection, padding_mask
from ..core.fast_paths import Packing, PrepackedWeight, can_prepack, drop_prepacked, linear_cross_entropy
from ..core.fast_paths import prepack_for_rows, prepacked_linear, weight_stamp
from ..core.fast_paths.blocks import (FastEncoderBlock, FastMultiHeadAttention, FastSublayerConnection,
                                      accelerate_dropout, accelerate_linear)
from ..core.fast_paths.mkl_prepacking import PrepackableLinear
from ..core.fast_paths.numpy_dropout import NumpyDropout
from ..core.masks import CAUSAL
from ..core.feed_forward import PositionwiseFeedForward
from .bert import BertEmbeddings, BertModel, BertOutput, full_mask
from .gpt import GPT
from .modernbert import ModernBertModel
from .transformer import Seq2SeqTransformer


class FastBertEmbeddings(BertEmbeddings):
    def forward(self, input_ids, token_type_ids=None, packing: Packing | None = None):
        """(batch, len, hidden); with `packing`, the real tokens only, (tokens, hidden)."""
        x = self.sum_embeddings(input_ids, token_type_ids)
        if packing is not None:
            x = packing.pack(x)
        return self.dropout(self.norm(x))


class FastBertModel(BertModel):
    """BertModel.forward, with the padding packed away and the last layer where the heads read."""

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, output_hidden_states=False,
                output_attentions=False, positions=None, selected=None) -> BertOutput:
        whole = output_hidden_states or output_attentions
        if positions is not None and not whole and self.config.position_embedding_type == "absolute":
            return self.last_layer_at(positions, input_ids, token_type_ids, attention_mask)
        if selected is not None and not whole:
            return BertOutput(self.last_layer_where(selected, input_ids, token_type_ids, attention_mask), None)
        out = self.packed_forward(input_ids, token_type_ids, attention_mask, output_hidden_states, output_attentions)
        if positions is not None:  # relative positions: queries need positions 0..len-1, so the whole layer
            x = out.sequence_output
            out.sequence_output = x.gather(1, positions[..., None].expand(-1, -1, x.size(-1)))
        elif selected is not None:
            out.sequence_output, out.pooled_output = out.sequence_output[selected], None
        return out

    def packed_forward(self, input_ids, token_type_ids, attention_mask, output_hidden_states, output_attentions):
        """Every position's last-layer output. On a CPU the padding is packed away first
        (core.fast_paths.unpadding: the position-wise layers skip it), and the outputs are unpacked
        at the end with zeros at the padding; outputs at real positions are those of the padded
        computation."""
        mask, packing = self.packed_padding(attention_mask, buckets=not output_attentions)
        x = self.embed(input_ids, token_type_ids, packing)
        unpack = packing.unpack if packing is not None else lambda t: t
        hidden_states, attentions = [unpack(x)] if output_hidden_states else None, [] if output_attentions else None
        for layer in self.layer_stack():
            x, weights = layer(x, mask, need_weights=output_attentions, packing=packing)
            if output_hidden_states:
                hidden_states.append(unpack(x))
            if output_attentions:
                attentions.append(weights)
        x = unpack(x)
        return BertOutput(x, self.pooler(x), hidden_states, attentions)

    def last_layer_at(self, positions, input_ids, token_type_ids=None, attention_mask=None) -> BertOutput:
        """The last layer's output at `positions` (batch, n) only, (batch, n, hidden), and the pooled
        [CLS]: the padding packed away, and the last layer computes only the n positions and [CLS]
        (its keys and values still see every token)."""
        mask, packing = self.packed_padding(attention_mask, buckets=True)
        x = self.below_last_layer(input_ids, token_type_ids, mask, packing)
        rows = torch.cat([positions.new_zeros(positions.size(0), 1), positions], 1)  # [CLS] first, for the pooler
        if packing is not None:
            queries = x.index_select(0, packing.rows(rows).reshape(-1)).view(*rows.shape, -1)
        else:
            queries = x.gather(1, rows[..., None].expand(-1, -1, x.size(-1)))
        if mask is not None and mask.size(-2) > 1:  # a full mask: the rows of the queries computed
            mask = mask[torch.arange(len(rows), device=rows.device)[:, None], 0, rows][:, None]
        x, _ = self.layer_stack()[-1](x, mask, queries=queries, packing=packing)
        return BertOutput(x[:, 1:], self.pooler(x))

    def last_layer_where(self, selected, input_ids, token_type_ids=None, attention_mask=None) -> torch.Tensor:
        """The last layer's output where `selected` (batch, len) is True, (n, hidden) in row-major
        order, with the last layer's output projection and feed-forward network run for the
        selected positions alone (its attention still reads every token)."""
        mask, packing = self.packed_padding(attention_mask, buckets=True)
        if packing is None:  # nothing to pack (no padding, a GPU, a compiled graph): the whole computation
            return self.packed_forward(input_ids, token_type_ids, attention_mask, False, False).sequence_output[selected]
        x = self.below_last_layer(input_ids, token_type_ids, mask, packing)
        x, _ = self.layer_stack()[-1](x, mask, packing=packing, rows=packing.rows_where(selected))
        return x

    def below_last_layer(self, input_ids, token_type_ids, mask, packing):
        """The embeddings through every layer but the last."""
        x = self.embed(input_ids, token_type_ids, packing)
        for layer in self.layer_stack()[:-1]:
            x, _ = layer(x, mask, packing=packing)
        return x

    def embed(self, input_ids, token_type_ids=None, packing=None):
        x = self.embeddings(input_ids, token_type_ids, packing)
        projection = getattr(self, "embedding_projection", None)
        return x if projection is None else projection(x)

    def packed_padding(self, attention_mask, buckets=False):
        """(boolean attention mask, Packing) of a batch; (None, None) when nothing is padding (the
        fused attention kernel then runs unmasked). Packing is for CPUs: on a GPU its index
        bookkeeping (a host sync, extra small kernels) cost more than the padding it skips (H100,
        bf16 BERT-base batch 64: 39.8 ms a step packed, 26.9 padded). With `buckets`, self-attention
        runs over rows of similar length together, each bucket padded to its own longest row
        (fast_paths.unpadding): a shuffled batch of man-page sentences then took 19% less CPU time a
        fine-tuning step (token classification, MiniLM, batch 32); attention pictures
        (output_attentions) keep the batch's one padded layout. A full mask (UniLM's) goes as it
        is to attention, on the padded path: packing assumes each row sees all its real keys."""
        if attention_mask is not None and attention_mask.dim() > 2:
            return full_mask(attention_mask), None
        if attention_mask is None:
            return None, None
        # torch.compile: one graph, no host sync; a GPU's training step: no host sync (the step
        # launches ahead of the GPU)
        if torch.compiler.is_compiling() or (attention_mask.device.type != "cpu" and torch.is_grad_enabled()):
            return padding_mask(attention_mask), None
        if bool(attention_mask.all()):
            return None, None
        packing = Packing(attention_mask, buckets) if attention_mask.device.type == "cpu" else None
        return padding_mask(attention_mask), packing


class FastGPT(GPT):
    """GPT with its output layer and loss fused while training, and prepacked weights for decoding."""

    _prepacked_head = None

    def prepack_for_decoding(self, batch_size: int):
        """Prepack the weights for `batch_size`-row decoding steps (core.fast_paths.mkl_prepacking:
        ~2x faster steps on MKL CPUs at batch 8, at the cost of a second copy of the weights until
        `drop_prepacked`)."""
        head = self._prepacked_head
        if head is not None and head.rows == batch_size and head.stamp == weight_stamp(self.wte.weight):
            return  # packed for this batch size and still current
        prepack_for_rows(self, batch_size)
        if can_prepack(self.wte.weight) and "int8_head" not in self._modules:
            self._prepacked_head = PrepackedWeight(self.wte.weight, batch_size)

    def drop_prepacked(self):
        drop_prepacked(self)
        self._prepacked_head = None

    @staticmethod
    def self_mask(length, key_len, attention_mask, device):
        if attention_mask is None and length == key_len and length > 1:
            return CAUSAL  # a whole sequence: the fused kernel's own causal mask
        return GPT.self_mask(length, key_len, attention_mask, device)

    def forward(self, idx, targets=None, cache=None, attention_mask=None, positions=None, last_only=False):
        """GPT.forward; in training mode, given targets, the logits are None: a training step needs
        the loss alone, and the output layer and the loss then run as one step that never keeps the
        logits, the largest tensors of the step (core.fast_paths.linear_cross_entropy)."""
        if targets is not None and self.training:
            x = self.hidden_states(idx, cache, attention_mask, positions)
            return None, linear_cross_entropy(x.reshape(-1, x.size(-1)), self.wte.weight, targets.reshape(-1))
        return super().forward(idx, targets, cache, attention_mask, positions, last_only)

    def output_logits(self, x):
        int8_head = self._modules.get("int8_head")  # inference.int8.quantize_int8's int8 copy of wte
        if int8_head is not None:
            return int8_head(x)
        return prepacked_linear(x, self.wte.weight, None, self._prepacked_head)  # tied to the embeddings


class FastModernBertModel(ModernBertModel):
    unpads_by_default = True


# plain class -> its accelerated subclass, most specific first (a subclass of a plain class, such
# as AlbertModel, becomes a class of both: Fast<name>(fast, its own class))
FAST = [(BertEmbeddings, FastBertEmbeddings), (BertModel, FastBertModel), (GPT, FastGPT),
        (ModernBertModel, FastModernBertModel),
        (MultiHeadAttention, FastMultiHeadAttention), (SublayerConnection, FastSublayerConnection),
        (EncoderBlock, FastEncoderBlock)]
_combined: dict = {}
# each accelerated class of the swaps above (and of accelerate()'s own leaf swaps) -> its plain class
_PLAIN_OF = {**{fast: plain for plain, fast in FAST}, PrepackableLinear: nn.Linear, NumpyDropout: nn.Dropout}


def fast_class(cls: type) -> type | None:
    """The accelerated class of `cls`, or None when it has none (or is one already)."""
    if getattr(cls, "_plain_class", None) is not None or any(cls is fast for _, fast in FAST):
        return None
    for plain, fast in FAST:
        if issubclass(cls, plain):
            if cls is plain:
                return fast
            if cls not in _combined:
                _combined[cls] = type(f"Fast{cls.__name__}", (fast, cls), {"_plain_class": cls,
                                                                         "__module__": cls.__module__})
            return _combined[cls]
    return None


def plain_class(cls: type) -> type:
    """The plain class of an accelerated class (what a saved folder names); any other class itself."""
    return cls.__dict__.get("_plain_class") or _PLAIN_OF.get(cls, cls)


def accelerate(model: nn.Module) -> nn.Module:
    """Swap the CPU speed paths into `model` and every module inside it, in place (module
    docstring); returns the model. The parameters and the state dict are unchanged; a model
    accelerated already is returned as it is."""
    for module in model.modules():
        fast = fast_class(type(module))
        if fast is not None:
            module.__class__ = fast
        if isinstance(module, nn.Dropout):
            accelerate_dropout(module)
        if isinstance(module, (MultiHeadAttention, PositionwiseFeedForward)):
            for child in module.children():
                if isinstance(child, nn.Linear):
                    accelerate_linear(child)
        if isinstance(module, Seq2SeqTransformer) and isinstance(module.output, nn.Linear):
            accelerate_linear(module.output)
    return model


def plain(model: nn.Module) -> nn.Module:
    """Undo accelerate(model), in place: every module back to its plain class (prepacked weights
    and kept Q/K/V stacks dropped). Returns the model."""
    for module in model.modules():
        cls = type(module)
        original = cls.__dict__.get("_plain_class") or _PLAIN_OF.get(cls)
        if original is None:
            continue
        for name in ("prepacked", "_stacked", "_prepacked_head"):
            module.__dict__.pop(name, None)
        module.__class__ = original
    return model


def is_accelerated(model: nn.Module) -> bool:
    """Whether accelerate(model) has run (and plain(model) not since)."""
    return any(type(m) in _PLAIN_OF or "_plain_class" in type(m).__dict__ for m in model.modules())


@contextlib.contextmanager
def plain_model(model: nn.Module):
    """Within this block `model` is plain (an ONNX trace must hold the padded computation, valid for
    every batch); accelerated again after it if it was before."""
    was = is_accelerated(model)
    plain(model)
    try:
        yield model
    finally:
        if was:
            accelerate(model)
