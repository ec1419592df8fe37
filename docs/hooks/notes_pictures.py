"""MkDocs hook: the notes' pictures, drawn by bertlab's own code when the site is built.

`bertlab notes positions` and `bertlab notes it` draw the sinusoidal table and where "it" looks in
MiniLM; the masks example prints its masks, so they are drawn here from the tensors it returns.
Nothing is stored in the repository: a picture is always what the code computes now. Each build
process draws them once (`mkdocs serve` rebuilds reuse them)."""
import atexit
import os
import shutil
import tempfile

from mkdocs.structure.files import File

SITE_FOLDER = "pictures/notes"  # beside notes.md, which shows them
_drawn: dict[str, str] = {}  # site path -> file on disk


def on_files(files, config):
    if not _drawn:
        folder = tempfile.mkdtemp(prefix="bertlab-docs-pictures-")
        atexit.register(shutil.rmtree, folder, True)  # the site holds copies; `serve` keeps reading these
        for name in draw(folder):
            _drawn[f"{SITE_FOLDER}/{name}"] = os.path.join(folder, name)
    for uri, path in _drawn.items():
        files.append(File.generated(config, uri, abs_src_path=path))
    return files


def draw(folder: str) -> list[str]:
    """Write the three pictures into `folder`; return their file names."""
    import torch

    from bertlab.notes import run_examples
    torch.set_num_threads(1)  # one small forward pass: more threads only wait on each other
    drawn = [os.path.basename(path) for shown in run_examples(["positions", "it"], folder) for path in shown.files]
    return drawn + [draw_masks(os.path.join(folder, "masks.png"))]


def draw_masks(path: str) -> str:
    """The notes' padding mask (two sentences, one padded) and sequence mask, as grids."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from bertlab.inference.attention import font_families
    from bertlab.notes import masks as masks_example
    shown = masks_example.masks()
    padding = shown.values["padding"][:, 0, 0].int().tolist()  # (batch, len): 1 where a key may be seen
    sequence = shown.values["sequence"].int().tolist()
    width = max(map(len, masks_example.SOURCES))
    batch = [s + [masks_example.PAD] * (width - len(s)) for s in masks_example.SOURCES]
    families, _ = font_families("".join(w for s in batch for w in s))  # 我爱中国 needs a CJK font
    plt.rcParams["font.family"] = families
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.6), gridspec_kw={"width_ratios": [4, 5]})
    for ax, grid, rows, cols, title in (
            (left, padding, [f"sentence {i + 1}" for i in range(len(batch))], None, "padding mask (keys)"),
            (right, sequence, masks_example.TARGET, masks_example.TARGET, "sequence mask (query × key)")):
        ax.imshow(grid, cmap="Blues", vmin=0, vmax=1.4)
        for i, row in enumerate(grid):
            for j, value in enumerate(row):
                text = batch[i][j] if cols is None else str(value)
                ax.text(j, i, text, ha="center", va="center", fontsize=9, color="white" if value else "black")
        ax.set_yticks(range(len(rows)), rows)
        ax.set_xticks(range(len(cols)), cols, rotation=30) if cols else ax.set_xticks([])
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return os.path.basename(path)
