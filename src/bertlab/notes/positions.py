"""The sinusoidal positional encoding (file 000, "Positional Embedding" / "具体"; file 002,
"1 positional encoding 位置嵌入"): PE(pos, 2i) = sin(pos / 10000^(2i/d_model)),
PE(pos, 2i+1) = cos(pos / 10000^(2i/d_model)), a few positions printed and the table drawn."""
import math
import os

from ..core import sinusoidal_positions
from ..io import atomic_write, check_output_file
from . import Shown, rounded

PICTURE = "positional_encoding.png"
POSITIONS, D_MODEL = 50, 128  # the table drawn
SHOWN_POSITIONS, SHOWN_DIMS = (0, 1, 2, 10), 6


def formula(pos: int, dim: int, d_model: int) -> float:
    """The notes' formula for one entry, in plain Python."""
    angle = pos / 10000 ** ((dim - dim % 2) / d_model)
    return math.sin(angle) if dim % 2 == 0 else math.cos(angle)


def positional_encoding(out_dir: str, overwrite: bool = False) -> Shown:
    shown = Shown("sinusoidal positional encoding",
                  "000, Positional Embedding; 002, 1 positional encoding 位置嵌入")
    pe = sinusoidal_positions(POSITIONS, D_MODEL)
    shown.say(f"core.sinusoidal_positions({POSITIONS}, d_model={D_MODEL}); the first {SHOWN_DIMS} dimensions "
              "(sin, cos, sin, ...), against the notes' formula")
    for pos in SHOWN_POSITIONS:
        shown.compare(f"position {pos} (formula)", rounded([formula(pos, d, D_MODEL) for d in range(SHOWN_DIMS)]),
                      rounded(pe[pos, :SHOWN_DIMS]))
    path = os.path.join(out_dir, PICTURE)
    check_output_file(path, overwrite, flag="-o")
    draw(pe, path)
    shown.say(f"wrote {path}: the {POSITIONS} x {D_MODEL} table (even dimensions sin, odd cos)")
    shown.values.update(table=pe)
    shown.files.append(path)
    return shown


def draw(pe, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (table, curves) = plt.subplots(1, 2, figsize=(12, 4.5), layout="constrained")
    image = table.imshow(pe.numpy(), cmap="RdBu", vmin=-1, vmax=1, aspect="auto")
    table.set_xlabel("dimension (even: sin, odd: cos)")
    table.set_ylabel("position")
    fig.colorbar(image, ax=table)
    for dim in (6, 7, 20, 40):  # slower waves as the dimension grows
        curves.plot(pe[:, dim].numpy(), label=f"dim {dim} ({'sin' if dim % 2 == 0 else 'cos'})")
    curves.set_xlabel("position")
    curves.legend(fontsize=8)
    fig.suptitle(f"sinusoidal positional encoding, d_model {pe.size(1)}")
    atomic_write(path, lambda f: fig.savefig(f, format="png", dpi=100), mode="wb")
    plt.close(fig)
