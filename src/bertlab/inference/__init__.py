"""Using a trained model: embeddings, token features, fill-mask, attention, decoding.

The names below are imported on first use, so the command line's parser can read a module's
constants (POOLINGS, DEFAULT_SENTENCE) without importing numpy and torch."""
import importlib

_EXPORTS = {"embed_ids": ".embed", "embed_texts": ".embed", "length_sorted_batches": ".embed", "top_k": ".embed",
            "pool": ".pooling"}
__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name], __name__), name)
    raise AttributeError(f"module 'bertlab.inference' has no attribute {name!r}")
