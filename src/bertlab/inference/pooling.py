"""One vector per text from the encoder's output: the mean over real tokens, [CLS], or the pooler.
No imports, so the command line reads POOLINGS without loading numpy or torch."""

POOLINGS = ("mean", "cls", "pooled")


def check_pooling(pooling: str) -> str:
    if pooling not in POOLINGS:
        raise ValueError(f"unknown pooling {pooling!r}; choose one of {POOLINGS}")
    return pooling


def pool(out, attention_mask, pooling: str):
    if pooling == "cls":
        return out.sequence_output[:, 0]
    if pooling == "pooled":
        return out.pooled_output
    check_pooling(pooling)
    m = attention_mask.unsqueeze(-1).to(out.sequence_output.dtype)
    return (out.sequence_output * m).sum(1) / m.sum(1).clamp(min=1e-9)
