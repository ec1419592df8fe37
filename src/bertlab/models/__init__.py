"""The model families. Names are imported on first use, so a command that needs only a config or
the preset names (to build its parser) does not import torch."""
import importlib

_EXPORTS = {
    ".albert": ["AlbertForPreTraining", "AlbertModel", "SentenceOrderHead"],
    ".albert_config": ["AlbertConfig", "albert_preset"],
    ".bert": ["BertEmbeddings", "BertForPreTraining", "BertModel", "BertOutput", "MaskedLMHead", "NextSentenceHead",
              "Pooler"],
    ".bert_config": ["BertConfig"],
    ".bert_tasks": ["BertForMultipleChoice", "BertForQuestionAnswering", "BertForSequenceClassification",
                    "BertForTokenClassification"],
    ".electra": ["Electra", "ElectraForMaskedLM", "ElectraForPreTraining"],
    ".gpt": ["GPT"],
    ".gpt_config": ["GPTConfig"],
    ".modernbert": ["ModernBertForMaskedLM", "ModernBertForPreTraining", "ModernBertForQuestionAnswering",
                    "ModernBertForSequenceClassification", "ModernBertForTokenClassification", "ModernBertModel"],
    ".modernbert_config": ["ModernBertConfig", "modernbert_preset"],
}
_MODULE = {name: module for module, names in _EXPORTS.items() for name in names}
__all__ = sorted(_MODULE)


def __getattr__(name):
    if name in _MODULE:
        return getattr(importlib.import_module(_MODULE[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
