"""BERT with the small output layers of fine-tuning (the notes' figure of four task shapes).

Each head reads either the pooled [CLS] vector (sentence and pair tasks) or every token's vector
(sequence labelling, span extraction). Parameter names match HF's `BertFor*` classes, so a
fine-tuned folder loads in HF and an HF fine-tuned checkpoint loads here.
"""
import torch
from torch import nn

from .bert import BertModel
from .bert_config import BertConfig


class _BertWithHead(nn.Module):
    """The encoder plus dropout; subclasses add their head under HF's name (`classifier`, `qa_outputs`)."""

    def __init__(self, config: BertConfig, init_weights: bool):
        super().__init__()
        self.config, self.init_weights = config, init_weights
        self.bert = BertModel(config, init_weights)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def _init_head(self, head: nn.Linear) -> nn.Linear:
        if self.init_weights:
            head.apply(self.bert._init_weights)
        return head


class BertForSequenceClassification(_BertWithHead):
    """[CLS] pooled output -> dropout -> linear: one logit per label (one for regression)."""

    def __init__(self, config: BertConfig, num_labels: int = 2, init_weights: bool = True):
        super().__init__(config, init_weights)
        self.num_labels = num_labels
        self.classifier = self._init_head(nn.Linear(config.hidden_size, num_labels))

    def forward(self, input_ids, token_type_ids=None, attention_mask=None):
        # Only [CLS] is read: no other position (the accelerated encoder then runs its last layer
        # for [CLS] alone; its keys and values still see every token)
        no_positions = input_ids.new_zeros(input_ids.size(0), 0)
        out = self.bert(input_ids, token_type_ids, attention_mask, positions=no_positions)
        return self.classifier(self.dropout(out.pooled_output))


class BertForTokenClassification(_BertWithHead):
    """Every token's vector -> dropout -> linear: (batch, len, num_labels) tag logits (NER). The
    accelerated encoder computes real tokens only (it packs the padding away on a CPU)."""

    def __init__(self, config: BertConfig, num_labels: int = 2, init_weights: bool = True):
        super().__init__(config, init_weights)
        self.num_labels = num_labels
        self.classifier = self._init_head(nn.Linear(config.hidden_size, num_labels))

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, selected=None):
        """selected (batch, len) bool: the logits where it is True alone, (n, num_labels) in row-major
        order (training scores the labelled word pieces only; BertModel.forward's `selected`)."""
        out = self.bert(input_ids, token_type_ids, attention_mask, selected=selected)
        return self.classifier(self.dropout(out.sequence_output))


class BertForQuestionAnswering(_BertWithHead):
    """Every token's vector -> linear -> (start, end) logits, each (batch, len): the answer span's
    boundaries (run_squad.py; no dropout on the span head, as there).

    Padding is no candidate boundary: its logits are the dtype's lowest value, so the softmax of the
    loss gives it probability 0 and a window's loss is the same alone as padded in any batch (HF's
    head scores padding positions too, from the encoder's output there)."""

    def __init__(self, config: BertConfig, init_weights: bool = True, head_seed: int | None = None):
        super().__init__(config, init_weights)
        self.qa_outputs = nn.Linear(config.hidden_size, 2)
        if init_weights:
            self.init_span_head(head_seed)

    def init_span_head(self, seed: int | None = None):
        """The new span head: normal(0, initializer_range) weights and a zero bias, as HF's (google's
        run_squad cuts the normal at two standard deviations; on 1,639 long-answer questions the cut
        head's second epoch gained at most 1.5 dev F1 in 11 runs: docs/results/qa-parity.md). With a
        seed, drawn from a generator of its own: the same tensor for the same seed whatever the
        encoder's size, and the tensor HF's from_pretrained draws under torch.manual_seed(seed), so
        a seed starts both from the same weights (the head's draw decides much of a short run)."""
        generator = None if seed is None else torch.Generator().manual_seed(seed)
        with torch.no_grad():
            self.qa_outputs.weight.normal_(0.0, self.config.initializer_range, generator=generator)
            self.qa_outputs.bias.zero_()

    def forward(self, input_ids, token_type_ids=None, attention_mask=None):
        out = self.bert(input_ids, token_type_ids, attention_mask)
        logits = self.qa_outputs(out.sequence_output)
        if attention_mask is not None:
            padding = ~attention_mask.bool()[..., None]
            logits = logits.masked_fill(padding, torch.finfo(logits.dtype).min)
        start, end = logits.unbind(-1)
        return start, end


class BertForMultipleChoice(_BertWithHead):
    """(batch, choices, len) inputs: each choice's pooled output -> one score; (batch, choices) logits
    (SWAG: the context paired with each candidate ending)."""

    def __init__(self, config: BertConfig, init_weights: bool = True):
        super().__init__(config, init_weights)
        self.classifier = self._init_head(nn.Linear(config.hidden_size, 1))

    def forward(self, input_ids, token_type_ids=None, attention_mask=None):
        batch, choices, length = input_ids.shape
        flat = lambda t: None if t is None else t.reshape(batch * choices, length)  # noqa: E731
        # Only [CLS] is read, as in sequence classification: no other position.
        no_positions = input_ids.new_zeros(batch * choices, 0)
        out = self.bert(flat(input_ids), flat(token_type_ids), flat(attention_mask), positions=no_positions)
        return self.classifier(self.dropout(out.pooled_output)).view(batch, choices)


class BertForRelationClassification(_BertWithHead):
    """Relation extraction (finetune/relation.py): the last layer's vectors at the [E1] and [E2]
    start markers, entity_positions (batch, 2), concatenated -> dropout -> linear: (batch, num_labels)."""

    def __init__(self, config: BertConfig, num_labels: int = 2, init_weights: bool = True):
        super().__init__(config, init_weights)
        self.num_labels = num_labels
        self.classifier = self._init_head(nn.Linear(2 * config.hidden_size, num_labels))

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, entity_positions=None):
        # the two marker positions alone (the accelerated encoder's last layer computes only them)
        out = self.bert(input_ids, token_type_ids, attention_mask, positions=entity_positions)
        return self.classifier(self.dropout(out.sequence_output.flatten(1)))


# The head each fine-tuning task (finetune/) trains, by the task's name in task.json; every other
# name (classify, regression and the GLUE tasks) is sequence classification, one output per label.
TASK_HEADS = {"ner": BertForTokenClassification, "squad": BertForQuestionAnswering,
              "multiple_choice": BertForMultipleChoice, "swag": BertForMultipleChoice,
              "relation": BertForRelationClassification}


def task_model(task: str, config: BertConfig, num_labels: int, init_weights: bool = True,
               head_seed: int | None = None) -> nn.Module:
    """The BertFor* model fine-tuning task `task` trains; `num_labels` sizes a labelled head (it is
    ignored by question answering and multiple choice, whose heads have a fixed size). `head_seed`
    seeds question answering's span head alone (BertForQuestionAnswering.init_span_head); the other
    heads draw google's initialiser from torch's generator, after the encoder. A ModernBertConfig
    gives the ModernBertFor* model of the task (modernbert.modernbert_task_model)."""
    from .modernbert_config import ModernBertConfig
    if isinstance(config, ModernBertConfig):
        from .modernbert import modernbert_task_model
        return modernbert_task_model(task, config, num_labels, init_weights)
    head = TASK_HEADS.get(str(task).lower(), BertForSequenceClassification)
    if head is BertForQuestionAnswering:
        return head(config, init_weights, head_seed)
    if head is BertForMultipleChoice:
        return head(config, init_weights)
    return head(config, num_labels, init_weights)
