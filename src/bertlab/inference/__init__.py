from .embed import embed_ids, embed_texts, length_sorted_batches, pool, top_k

__all__ = ["embed_ids", "embed_texts", "length_sorted_batches", "pool", "top_k"]
