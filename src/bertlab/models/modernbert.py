"""ModernBERT (Warner et al., 2024) assembled from the shared core: BERT's encoder with rotary
positions (core.rotary), GeGLU feed-forward (core.geglu), pre-LayerNorm without biases
(core.pre_norm), local attention with a global layer every N (core.sliding_window), and the
padding packed away (core.unpadded_attention). docs/models/modernbert.md says what each answers."""
import dataclasses

import torch
import torch.nn.functional as F
from torch import nn

from ..core import activation
from ..core.geglu import GeGLU
from ..core.pre_norm import PreNormResidual, bias_free_layer_norm
from ..core.rotary import RotaryEmbedding, apply_rotary
from ..core.unpadded_attention import PackedBatch, PaddedBatch
from .bert import BertOutput
from .modernbert_config import ModernBertConfig


class ModernBertEmbeddings(nn.Module):
    """Token embeddings alone (positions are rotations inside attention), then LayerNorm and dropout."""

    def __init__(self, config: ModernBertConfig):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
        self.norm = bias_free_layer_norm(config.hidden_size, config.norm_eps, config.norm_bias)
        self.dropout = nn.Dropout(config.embedding_dropout)

    def forward(self, input_ids):
        return self.dropout(self.norm(self.word_embeddings(input_ids)))


class RotarySelfAttention(nn.Module):
    """Multi-head self-attention whose queries and keys are rotated by their positions; global
    (window None) or local (`window` tokens around each query)."""

    def __init__(self, config: ModernBertConfig, is_global: bool):
        super().__init__()
        self.heads = config.num_attention_heads
        self.d_head = config.hidden_size // self.heads
        self.qkv = nn.Linear(config.hidden_size, 3 * config.hidden_size, bias=config.attention_bias)
        self.output = nn.Linear(config.hidden_size, config.hidden_size, bias=config.attention_bias)
        self.rotary = RotaryEmbedding(self.d_head, config.rope_theta(is_global))
        self.window = None if is_global else config.local_attention
        self.dropout_p = config.attention_dropout
        self.dropout = nn.Dropout(config.attention_dropout)

    def forward(self, x, batch, need_weights=False):
        """x (batch, len, hidden) under a PaddedBatch or (tokens, hidden) under a PackedBatch."""
        q, k, v = self.qkv(x).view(*x.shape[:-1], 3, self.heads, self.d_head).unbind(-3)
        q, k, v = (t.transpose(-3, -2) for t in (q, k, v))  # (..., heads, len, d_head)
        cos, sin = self.rotary(batch.positions)
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        out, weights = batch.attend(q, k, v, self.window, self.dropout_p if self.training else 0.0, need_weights)
        out = out.transpose(-3, -2).reshape(*x.shape)
        return self.dropout(self.output(out)), weights


class ModernBertLayer(nn.Module):
    """Pre-LN: x + Attention(LN(x)), then x + GeGLU(LN(x)); the first layer reads the embeddings'
    LayerNorm directly."""

    def __init__(self, config: ModernBertConfig, layer: int):
        super().__init__()
        h, eps, bias = config.hidden_size, config.norm_eps, config.norm_bias
        self.attention_sublayer = PreNormResidual(h, eps, bias, norm=layer > 0)
        self.attention = RotarySelfAttention(config, config.is_global(layer))
        self.feed_forward_sublayer = PreNormResidual(h, eps, bias)
        self.feed_forward = GeGLU(h, config.intermediate_size, config.hidden_activation, config.mlp_bias,
                                  config.mlp_dropout)

    def forward(self, x, batch, need_weights=False):
        out, weights = self.attention(self.attention_sublayer.before(x), batch, need_weights)
        x = self.attention_sublayer.after(x, out)
        x = self.feed_forward_sublayer.after(x, self.feed_forward(self.feed_forward_sublayer.before(x)))
        return x, weights


class ModernBertModel(nn.Module):
    """The encoder: embeddings, the layers, a final LayerNorm. No pooler (pooled_output is None):
    its heads pool [CLS] or the mean themselves."""
    # whether forward(unpadded=None) packs a CPU batch's real tokens together: off in the plain
    # model, so it computes the padded batch as written; models.accelerate turns it on
    unpads_by_default = False

    def __init__(self, config: ModernBertConfig, init_weights: bool = True):
        super().__init__()
        self.config = config
        self.embeddings = ModernBertEmbeddings(config)
        self.layers = nn.ModuleList(ModernBertLayer(config, i) for i in range(config.num_hidden_layers))
        self.final_norm = bias_free_layer_norm(config.hidden_size, config.norm_eps, config.norm_bias)
        if init_weights:
            self.apply(self._init_weights)

    def _init_weights(self, module):
        # truncated normal within initializer_cutoff_factor standard deviations, zero biases
        std = self.config.initializer_range
        cutoff = self.config.initializer_cutoff_factor * std
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.trunc_normal_(module.weight, std=std, a=-cutoff, b=cutoff)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, input_ids, attention_mask=None, output_hidden_states=False, output_attentions=False,
                unpadded: bool | None = None, token_type_ids=None) -> BertOutput:
        """Every position's last-layer output (zeros at the padding when unpadded). `unpadded`
        packs the batch's real tokens into one sequence (core.unpadded_attention); None packs
        in an accelerated model (models.accelerate) when there is padding to skip and the
        computation allows it (a CPU, no attention pictures, not a compiled graph). The outputs at real positions are the same either way.
        hidden_states are the embeddings' output and each layer's, the last one after the final
        LayerNorm (so it is the sequence output, as BERT's is and transformers 5 gives it).
        token_type_ids is accepted by name and ignored (ModernBERT has no segments), so code
        written for BERT's encoder calls this one the same way."""
        batch = self.layout(input_ids, attention_mask, output_attentions, unpadded)
        x = batch.pack(self.embeddings(input_ids))
        hidden_states = [batch.unpack(x)] if output_hidden_states else None
        attentions = [] if output_attentions else None
        for layer in self.layers:
            x, weights = layer(x, batch, output_attentions)
            if output_hidden_states:
                hidden_states.append(batch.unpack(x))
            if output_attentions:
                attentions.append(weights)
        sequence_output = batch.unpack(self.final_norm(x))
        if output_hidden_states:
            hidden_states[-1] = sequence_output
        return BertOutput(sequence_output, None, hidden_states, attentions)

    def layout(self, input_ids, attention_mask, output_attentions, unpadded):
        if attention_mask is not None and attention_mask.dim() != 2:
            raise ValueError(f"attention_mask must be (batch, length), got {tuple(attention_mask.shape)}")
        # the CPU may look at the mask (a GPU would wait for it; a compiled graph must keep it)
        may_look = (self.unpads_by_default and attention_mask is not None and attention_mask.device.type == "cpu"
                    and not torch.compiler.is_compiling())
        whole = may_look and bool(attention_mask.all())  # no padding: no mask, so local layers compute their band alone
        if unpadded is None:
            unpadded = may_look and not output_attentions and not whole
        if unpadded:
            if attention_mask is None:
                attention_mask = torch.ones_like(input_ids)
            return PackedBatch(attention_mask)
        return PaddedBatch(None if whole else attention_mask, input_ids.size(1), input_ids.device)

    def get_embedding_table(self):
        return self.embeddings.word_embeddings.weight


class ModernBertHead(nn.Module):
    """dense + activation + LayerNorm: what the masked-LM decoder and the classifiers read."""

    def __init__(self, config: ModernBertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size, bias=config.classifier_bias)
        self.act = activation(config.classifier_activation)
        self.norm = bias_free_layer_norm(config.hidden_size, config.norm_eps, config.norm_bias)

    def forward(self, x):
        return self.norm(self.act(self.dense(x)))


class ModernBertForMaskedLM(nn.Module):
    """The encoder, the head, and the decoder tied to the word embeddings (with an output bias)."""

    def __init__(self, config: ModernBertConfig, init_weights: bool = True):
        super().__init__()
        self.config = config
        self.modernbert = ModernBertModel(config, init_weights)
        self.head = ModernBertHead(config)
        self.embedding_table = self.modernbert.get_embedding_table()  # shared Parameter, not a copy
        self.decoder_bias = nn.Parameter(torch.zeros(config.vocab_size)) if config.decoder_bias else None
        if init_weights:
            self.head.apply(self.modernbert._init_weights)

    def forward(self, input_ids, attention_mask=None, positions=None, **kwargs):
        """MLM logits at every position, or at `positions` (batch, n) only."""
        x = self.modernbert(input_ids, attention_mask, **kwargs).sequence_output
        if positions is not None:
            x = x.gather(1, positions[..., None].expand(-1, -1, x.size(-1)))
        return self.mlm(x)

    def mlm(self, sequence_output):
        """Vocabulary logits of encoder outputs (..., hidden): the head, then the tied decoder."""
        return F.linear(self.head(sequence_output), self.embedding_table, self.decoder_bias)


class ModernBertForPreTraining(ModernBertForMaskedLM):
    """ModernBertForMaskedLM called the way pretraining calls BertForPreTraining: (input_ids,
    token_type_ids, attention_mask, masked_lm_positions) -> (MLM logits at the masked positions,
    None). ModernBERT trains with no next-sentence task, so there are no pair logits; the weights
    are ModernBertForMaskedLM's, and `as_masked_lm` hands them out as that class."""

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, masked_lm_positions=None):
        return super().forward(input_ids, attention_mask, masked_lm_positions), None

    def as_masked_lm(self) -> ModernBertForMaskedLM:
        model = ModernBertForMaskedLM(self.config, init_weights=False)
        model.load_state_dict(self.state_dict())
        return model.to(self.embedding_table.device)


def set_global_rope_theta(model, theta: float):
    """ModernBERT's long-context phase: the global layers' rotary base raised to `theta` (slower
    turns, so positions far past the first phase's length stay apart), the local layers' kept.
    `model` is a ModernBertModel or a head model; its config, and its encoder's, say the new base."""
    encoder = getattr(model, "modernbert", model)
    old = encoder.config
    config = dataclasses.replace(old, global_rope_theta=float(theta), local_rope_theta=old.rope_theta(False),
                                 rope_parameters=None)
    for layer in encoder.layers:
        attention = layer.attention
        if attention.window is None:
            device = attention.qkv.weight.device
            attention.rotary = RotaryEmbedding(attention.d_head, config.rope_theta(True)).to(device)
    encoder.config = model.config = config


def pool(config: ModernBertConfig, sequence_output, attention_mask=None):
    """The vector a sequence classifier reads: [CLS] or the mean over real tokens (classifier_pooling)."""
    if config.classifier_pooling == "cls":
        return sequence_output[:, 0]
    if attention_mask is None:
        return sequence_output.mean(1)
    mask = attention_mask[..., None].to(sequence_output.dtype)
    return (sequence_output * mask).sum(1) / mask.sum(1)


class _ModernBertWithClassifier(nn.Module):
    """The encoder, ModernBERT's prediction head (dense, activation, norm), dropout and a linear
    classifier: what the sequence and token classifiers share; they differ in what they classify."""

    def __init__(self, config: ModernBertConfig, num_labels: int = 2, init_weights: bool = True):
        super().__init__()
        self.config, self.num_labels = config, num_labels
        self.modernbert = ModernBertModel(config, init_weights)
        self.head = ModernBertHead(config)
        self.dropout = nn.Dropout(config.classifier_dropout)
        self.classifier = nn.Linear(config.hidden_size, num_labels)
        if init_weights:
            self.head.apply(self.modernbert._init_weights)
            self.classifier.apply(self.modernbert._init_weights)


class ModernBertForSequenceClassification(_ModernBertWithClassifier):
    def forward(self, input_ids, token_type_ids=None, attention_mask=None):
        """(batch, num_labels) logits. token_type_ids is accepted and ignored (ModernBERT has no
        segments), so code written for BERT's classifier calls this one the same way."""
        x = self.modernbert(input_ids, attention_mask).sequence_output
        return self.classifier(self.dropout(self.head(pool(self.config, x, attention_mask))))


class ModernBertForTokenClassification(_ModernBertWithClassifier):
    def forward(self, input_ids, token_type_ids=None, attention_mask=None, selected=None):
        """(batch, len, num_labels) logits (token_type_ids ignored, as above); with `selected`
        (batch, len) bool, the (n, num_labels) logits where it is True alone, in row-major order
        (fine-tuning scores the labelled pieces only, as BertForTokenClassification does)."""
        x = self.modernbert(input_ids, attention_mask).sequence_output
        if selected is not None:
            x = x[selected]
        return self.classifier(self.dropout(self.head(x)))


class ModernBertForQuestionAnswering(_ModernBertWithClassifier):
    """Every token's vector -> head -> dropout -> linear -> (start, end) logits, each (batch, len),
    as HF's ModernBertForQuestionAnswering; padding is no candidate boundary (its logits are the
    dtype's lowest, as in BertForQuestionAnswering)."""

    def __init__(self, config: ModernBertConfig, num_labels: int = 2, init_weights: bool = True):
        if num_labels != 2:
            raise ValueError(f"a question-answering head has 2 outputs (start, end), not {num_labels}")
        super().__init__(config, 2, init_weights)

    def forward(self, input_ids, token_type_ids=None, attention_mask=None):
        x = self.modernbert(input_ids, attention_mask).sequence_output
        logits = self.classifier(self.dropout(self.head(x)))
        if attention_mask is not None:
            logits = logits.masked_fill(~attention_mask.bool()[..., None], torch.finfo(logits.dtype).min)
        start, end = logits.unbind(-1)
        return start, end


# The head each fine-tuning task trains on ModernBERT (finetune/), as models.bert_tasks.TASK_HEADS
# for BERT: every other task name is sequence classification, those in NO_HEAD have none yet.
TASK_HEADS = {"ner": ModernBertForTokenClassification, "squad": ModernBertForQuestionAnswering}
NO_HEAD = ("multiple_choice", "swag", "relation")


def modernbert_task_class(task: str) -> type:
    name = str(task).lower()
    if name in NO_HEAD:
        raise ValueError(f"task {name!r} has no ModernBERT head in bertlab yet; fine-tuning takes ModernBERT for "
                         "classify, regression, the GLUE tasks, ner and squad")
    return TASK_HEADS.get(name, ModernBertForSequenceClassification)


def modernbert_task_model(task: str, config: ModernBertConfig, num_labels: int, init_weights: bool = True):
    """The ModernBertFor* model fine-tuning task `task` trains (num_labels ignored by squad's)."""
    model_class = modernbert_task_class(task)
    if model_class is ModernBertForQuestionAnswering:
        return model_class(config, init_weights=init_weights)
    return model_class(config, num_labels, init_weights)
