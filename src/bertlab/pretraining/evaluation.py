"""Held-out pretraining metrics (masked-LM and next-sentence loss and accuracy) and their curves."""
import contextlib

import numpy as np
import torch

from ..models.losses import pretraining_loss
from ..training.distributed import DistInfo, sum_across


@torch.no_grad()
def evaluate(model, data, batch_size: int, device, autocast=None, info: DistInfo = DistInfo(),
             limit: int | None = None, mask_fn_for=None, parts_of=None, second=None,
             second_weight: float = 1.0) -> dict:
    """mlm_loss (per masked token), mlm_accuracy, and with NSP data nsp_loss and nsp_accuracy,
    over the first `limit` instances of `data` (all by default); each rank takes every
    world_size-th instance and the counts are summed across ranks.

    `mask_fn_for(i)` gives the mask function for the i-th batch of dynamically masked data; it is
    seeded by i, so every evaluation sees the same masks. Another objective passes `parts_of(batch)`
    (its loss parts with accuracy counts) and the name of its second head (ELECTRA: "disc", weighted
    `second_weight` in the total loss)."""
    was_training = model.training
    model.eval()
    if parts_of is None:
        nsp = data.meta["nsp"]
        second = "nsp" if nsp else None
        parts_of = lambda batch: pretraining_loss(model, batch, nsp, accuracy=True)[1]  # noqa: E731
    n = len(data) if limit is None else min(limit, len(data))
    mine = np.arange(n)[info.rank::info.world_size]
    # masked-LM loss x count, hits, count; the second head's loss x count, hits, count
    sums = torch.zeros(6, dtype=torch.float64)
    for i, start in enumerate(range(0, len(mine), batch_size)):
        batch = data.batch(mine[start:start + batch_size], mask_fn_for(i) if data.dynamic else None)
        batch = {k: v.to(device) for k, v in batch.items()}
        with autocast or contextlib.nullcontext():
            parts = parts_of(batch)
        row = [parts["mlm_loss"] * parts["mlm_total"], parts["mlm_correct"], parts["mlm_total"]]
        if second:
            row += [parts[f"{second}_loss"] * parts[f"{second}_total"], parts[f"{second}_correct"],
                    parts[f"{second}_total"]]
        sums[:len(row)] += torch.stack([torch.as_tensor(x, dtype=torch.float64).cpu() for x in row])
    model.train(was_training)
    s = sum_across(sums, info).tolist()
    out = {"mlm_loss": s[0] / max(s[2], 1), "mlm_accuracy": s[1] / max(s[2], 1), "instances": n}
    if second:
        out.update({f"{second}_loss": s[3] / max(s[5], 1), f"{second}_accuracy": s[4] / max(s[5], 1)})
    out["loss"] = out["mlm_loss"] + second_weight * out.get(f"{second}_loss", 0.0)
    return out


def masked_label_counts(data, limit: int | None = None) -> np.ndarray | None:
    """How often each vocabulary id is a masked-LM label in the first `limit` instances (all by
    default); None for dynamically masked data, whose labels are drawn at training time."""
    if data.dynamic:
        return None
    counts = np.zeros(data.meta["vocab_size"], np.int64)
    n = len(data) if limit is None else min(limit, len(data))
    for start in range(0, n, 65536):  # a block at a time: the shards are memory-mapped
        r = data.rows(np.arange(start, min(n, start + 65536)))
        real = np.arange(r["masked_lm_ids"].shape[1])[None, :] < r["masked_lm_counts"][:, None]
        counts += np.bincount(r["masked_lm_ids"][real].astype(np.int64), minlength=len(counts))
    return counts


def most_frequent_token_baseline(train, held_out, limit: int | None = None) -> dict | None:
    """The masked-LM accuracy a model reaches by always predicting the token most often masked in
    the training instances: its share of the held-out labels (the first `limit` instances, as
    `evaluate` reads them). The floor a held-out mlm_accuracy should be read against; None when
    either side is dynamically masked."""
    train_counts, held_counts = masked_label_counts(train), masked_label_counts(held_out, limit)
    if train_counts is None or held_counts is None:
        return None
    token = int(train_counts.argmax())
    return {"token": held_out.vocab.id_to_token[token],
            "mlm_accuracy": float(held_counts[token] / max(held_counts.sum(), 1))}


def plot_pretraining_curves(records: list[dict], path, title: str = ""):
    """Three panels: train and held-out losses, held-out accuracies, learning rate (PNG, atomic)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..io import atomic_write
    train = [r for r in records if r["kind"] == "train"]
    held = [r for r in records if r["kind"] == "eval"]
    fig, (ax_loss, ax_acc, ax_lr) = plt.subplots(1, 3, figsize=(15, 4))
    for key, label in (("mlm_loss", "train MLM"), ("nsp_loss", "train NSP")):
        points = [(r["step"], r[key]) for r in train if key in r]
        if points:
            ax_loss.plot(*zip(*points), lw=1, label=label)
    for key, label in (("mlm_loss", "held-out MLM"), ("nsp_loss", "held-out NSP")):
        points = [(r["step"], r[key]) for r in held if key in r]
        if points:
            ax_loss.plot(*zip(*points), "o-", label=label)
    ax_loss.set_xlabel("step"), ax_loss.set_ylabel("cross-entropy (nats)"), ax_loss.legend()
    for key, label in (("mlm_accuracy", "masked LM"), ("nsp_accuracy", "next sentence")):
        points = [(r["step"], r[key]) for r in held if key in r]
        if points:
            ax_acc.plot(*zip(*points), "o-", label=label)
    ax_acc.set_xlabel("step"), ax_acc.set_ylabel("held-out accuracy"), ax_acc.set_ylim(0, 1)
    if held:
        ax_acc.legend()
    ax_lr.plot([r["step"] for r in train], [r["lr"] for r in train])
    ax_lr.set_xlabel("step"), ax_lr.set_ylabel("learning rate")
    fig.suptitle(title)
    fig.tight_layout()
    atomic_write(path, lambda f: fig.savefig(f, format="png", dpi=100), mode="wb")
    plt.close(fig)
