"""bertlab: the Transformer family end to end — an exact BERT, the seq2seq Transformer and GPT.

The names below are imported on first use, so `import bertlab` (and commands that need no model,
such as `bertlab tokenize`) does not pay for importing torch."""
import importlib

__version__ = "0.1.0"
_EXPORTS = {"embed_texts": ".inference", "top_k": ".inference", "load_model": ".interop", "LoadedModel": ".interop",
            "load_pretrained": ".interop", "save_pretrained": ".interop", "BertConfig": ".models", "BertForPreTraining": ".models",
            "BertForSequenceClassification": ".models", "BertModel": ".models", "BertTokenizer": ".tokenization",
            "accelerate": ".models.accelerate", "plain": ".models.accelerate"}
__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name], __name__), name)
    raise AttributeError(f"module 'bertlab' has no attribute {name!r}")
