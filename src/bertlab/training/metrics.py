"""A JSONL metrics log (one object per line, flushed as written) and its PNG curves."""
import json
import os

from ..io import disk_errors, make_folder


class MetricsLog:
    """Append {"step": ..., "kind": ..., values...} records to a JSONL file; read them back."""

    def __init__(self, path, enabled: bool = True):
        self.path, self.enabled = path, enabled

    def write(self, step: int, kind: str, **values):
        if not self.enabled:
            return
        make_folder(os.path.dirname(os.path.abspath(self.path)))
        with disk_errors(self.path), open(self.path, "a", encoding="utf-8") as f:  # a full disk names the log
            f.write(json.dumps({"step": step, "kind": kind, **values}) + "\n")

    def read(self) -> list[dict]:
        """The records; a torn last line (a kill in the middle of a write) is dropped, a bad line
        before it is an error naming the file and line."""
        if not os.path.exists(self.path):
            return []
        with open(self.path, "rb") as f:
            lines = f.read().decode("utf-8", errors="replace").split("\n")
        records = []
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                if number == len(lines):  # no newline after it: the write never finished
                    break
                raise ValueError(f"{self.path}:{number}: not a JSON record; the metrics log is corrupt") from None
        return records

    def truncate_after(self, step: int):
        """Drop records past `step` (written after the checkpoint a resumed run restarts from)."""
        if self.enabled and os.path.exists(self.path):
            from ..io import atomic_write_text
            kept = [r for r in self.read() if r["step"] <= step]
            atomic_write_text(self.path, "".join(json.dumps(r) + "\n" for r in kept))


def plot_curves(records: list[dict], path, title: str = ""):
    """Train loss, held-out loss and learning rate against step, as one PNG (written atomically)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..io import atomic_write
    train = [r for r in records if r["kind"] == "train"]
    val = [r for r in records if r["kind"] == "eval"]
    fig, (ax_loss, ax_lr) = plt.subplots(1, 2, figsize=(11, 4))
    ax_loss.plot([r["step"] for r in train], [r["loss"] for r in train], label="train loss", lw=1)
    if val:
        ax_loss.plot([r["step"] for r in val], [r["loss"] for r in val], "o-", label="held-out loss")
    ax_loss.set_xlabel("step"), ax_loss.set_ylabel("cross-entropy (nats/token)"), ax_loss.legend()
    ax_lr.plot([r["step"] for r in train], [r["lr"] for r in train])
    ax_lr.set_xlabel("step"), ax_lr.set_ylabel("learning rate")
    fig.suptitle(title)
    fig.tight_layout()
    atomic_write(path, lambda f: fig.savefig(f, format="png", dpi=100), mode="wb")
    plt.close(fig)


def plot_learning_curve(records: list[dict], path, metric: str, title: str = ""):
    """Fine-tuning: training loss per step and the dev metric at each evaluation, as one PNG."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..io import atomic_write
    train = [r for r in records if r["kind"] == "train"]
    dev = [r for r in records if r["kind"] == "eval" and metric in r]
    fig, (ax_loss, ax_dev) = plt.subplots(1, 2, figsize=(11, 4))
    ax_loss.plot([r["step"] for r in train], [r["loss"] for r in train], lw=1)
    ax_loss.set_xlabel("step"), ax_loss.set_ylabel("training loss")
    ax_dev.plot([r["step"] for r in dev], [r[metric] for r in dev], "o-")
    ax_dev.set_xlabel("step"), ax_dev.set_ylabel(f"dev {metric}")
    fig.suptitle(title)
    fig.tight_layout()
    atomic_write(path, lambda f: fig.savefig(f, format="png", dpi=100), mode="wb")
    plt.close(fig)
