"""New special tokens for fine-tuning (the notes' entity markers such as [S-PER] ... [E-PER] for
relation extraction): the vocabulary gains them, the embedding table grows by as many rows, and
the new rows start near the mean of the trained embeddings instead of at random, so a new token
begins as an "average word" and the first updates do not blow up the attention logits."""
import torch


def grow_embeddings(old: torch.Tensor, new_rows: int, std: float = 0.02, seed: int = 0) -> torch.Tensor:
    """`old` plus `new_rows` rows: the mean of the old rows plus a little noise (so two new tokens
    are not identical)."""
    g = torch.Generator().manual_seed(seed)
    extra = old.mean(0, keepdim=True) + std * torch.randn(new_rows, old.shape[1], generator=g, dtype=old.dtype)
    return torch.cat([old, extra])


def grow_word_embeddings(state: dict, new_rows: int) -> dict:
    """A checkpoint's tensors with `new_rows` more rows in the word-embedding table."""
    return {k: grow_embeddings(v.float(), new_rows) if k.endswith("embeddings.word_embeddings.weight") else v
            for k, v in state.items()}
