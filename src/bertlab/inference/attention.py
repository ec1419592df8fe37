"""Where each token looks: one layer's attention weights, as numbers and as a heatmap.

Row i of a head's (len, len) matrix is the softmax over keys for query token i, so every row
sums to 1; reading down a column shows which tokens attend to that token. numpy, torch and
matplotlib are imported where they are used, so the command line's parser (which reads
DEFAULT_SENTENCE) loads none of them.
"""
import math
import os
from dataclasses import dataclass

from ..io import atomic_write
from ..validate import positive_int

DEFAULT_SENTENCE = "The animal didn't cross the street because it was too tired"
# A picture larger than this would take gigabytes to draw (12 heads of 512 tokens: 2.8 gigapixels).
MAX_PIXELS = 100_000_000
DPI = 100
# Fonts with CJK glyphs, which matplotlib's default (DejaVu Sans) lacks: the one a Python package
# ships (pip install 'bertlab[cjk]'), then the usual system ones.
CJK_FONT_PACKAGE = "noto_cjk_sans_otc"
CJK_FAMILIES = ("Noto Sans CJK SC", "Noto Sans CJK JP", "Noto Sans SC", "Source Han Sans SC", "Source Han Sans CN",
                "WenQuanYi Zen Hei", "WenQuanYi Micro Hei", "Droid Sans Fallback", "SimHei", "Microsoft YaHei",
                "PingFang SC", "Hiragino Sans GB", "AR PL UMing CN")
FONT_HINT = ("pip install 'bertlab[cjk]' (the Noto Sans CJK font) or install a CJK font for matplotlib "
             "(e.g. apt install fonts-noto-cjk)")


def layer_number(layer: int, num_layers: int) -> int:
    """google's layer number (negative counts from the top) -> 0..num_layers-1, validated."""
    from .features import hidden_state_indices
    hidden_state_indices([layer], num_layers)
    return layer % num_layers


def attention_weights(model, tokenizer, text: str, layer: int):
    """(tokens, float32 (heads, len, len) weights of `layer`) for one text ("A ||| B" is a pair).
    A blank text, or one longer than the model's positions, is an error."""
    import torch

    from .embed import check_finite
    from .features import convert_example, read_examples
    if not text.strip():
        raise ValueError("the sentence is blank; give text to look at")
    limit = model.config.max_position_embeddings
    features = convert_example(read_examples([text])[0], tokenizer, limit)
    if features.truncated:
        raise ValueError(f"{text[:40]!r}...: longer than the model's max_position_embeddings ({limit} tokens "
                         f"with [CLS] and [SEP]); give a shorter sentence")
    model.eval()
    device = next(model.parameters()).device
    with torch.inference_mode():
        ids = torch.tensor([features.input_ids], device=device)
        types = torch.tensor([features.input_type_ids], device=device)
        out = model(ids, token_type_ids=types, output_attentions=True)
        weights = out.attentions[layer_number(layer, len(out.attentions))][0].float().cpu().numpy()
    check_finite(weights, "head")
    return features.tokens, weights


def most_attended(tokens, weights, query: str, k: int = 5):
    """[(position, [(token, weight), ...]), ...]: for every occurrence of the token `query`
    (compared case-insensitively), the k tokens its (len, len) attention row weighs most."""
    import numpy as np
    positive_int("k", k)
    positions = [i for i, t in enumerate(tokens) if t.lower() == query.lower()]
    if not positions:
        raise ValueError(f"--print-top {query}: no such token; the tokens are {' '.join(tokens)}")
    out = []
    for i in positions:
        order = np.argsort(-weights[i], kind="stable")[:k]
        out.append((i, [(tokens[j], float(weights[i, j])) for j in order]))
    return out


def missing_glyphs(font_path: str, text: str) -> list[str]:
    """The characters of `text` (spaces aside) that the font has no glyph for."""
    from matplotlib.ft2font import FT2Font
    charmap = FT2Font(font_path).get_charmap()
    return sorted({c for c in text if not c.isspace() and ord(c) not in charmap})


def cjk_fonts():
    """Paths of the CJK fonts matplotlib can use: the packaged one first, then the system's."""
    from matplotlib import font_manager
    try:
        package = __import__(CJK_FONT_PACKAGE)
        yield str(package.FONT_PATH)
    except ImportError:
        pass
    for font in font_manager.fontManager.ttflist:
        if font.name in CJK_FAMILIES:
            yield font.fname


def font_families(text: str) -> tuple[list[str], list[str]]:
    """(matplotlib font families, characters no font has): the default font, followed by a CJK
    font when the default lacks glyphs of `text` (Chinese, Japanese, Korean) and one has them."""
    from matplotlib import font_manager
    default = font_manager.findfont(font_manager.FontProperties())
    families = [font_manager.FontProperties(fname=default).get_name()]
    missing = missing_glyphs(default, text)
    for path in cjk_fonts() if missing else ():
        still = missing_glyphs(path, "".join(missing))
        if len(still) < len(missing):
            font_manager.fontManager.addfont(path)  # a no-op for a system font it already knows
            families.append(font_manager.FontProperties(fname=path).get_name())
            missing = still
        if not missing:
            break
    return families, missing


def render_heatmaps(path, tokens, weights, titles, suptitle: str) -> list[str]:
    """One heatmap per (len, len) matrix in `weights`, in a near-square grid, saved as a PNG:
    query tokens down the side, key tokens along the bottom. Returns the characters of the tokens
    that no installed font could draw (they come out as empty boxes), [] when every one could."""
    import warnings

    import matplotlib
    matplotlib.use("Agg")  # no display needed; the file is the product
    import matplotlib.pyplot as plt
    n, length = len(weights), len(tokens)
    cols = math.ceil(math.sqrt(n))
    rows = math.ceil(n / cols)
    cell = max(3.0, 0.3 * length) if n > 1 else max(5.0, 0.4 * length)
    size = (cols * cell, rows * cell + 0.6)
    if size[0] * size[1] * DPI**2 > MAX_PIXELS:
        raise ValueError(f"a heatmap of {n} head(s) x {length} tokens would be {size[0] * DPI:.0f} x "
                         f"{size[1] * DPI:.0f} pixels, too large to draw; pick one head (--head) or a shorter sentence")
    families, missing = font_families("".join(tokens) + suptitle)
    with plt.rc_context({"font.family": families}), warnings.catch_warnings():
        # missing glyphs are reported once, to the caller, not as one warning per character
        warnings.filterwarnings("ignore", message="Glyph .* missing from font")
        fig, axes = plt.subplots(rows, cols, figsize=size, squeeze=False, layout="constrained")
        font = 9 if n == 1 else 6
        for ax, matrix, title in zip(axes.flat, weights, titles):
            image = ax.imshow(matrix, cmap="viridis", vmin=0.0, vmax=1.0)
            ax.set_xticks(range(length), tokens, rotation=90, fontsize=font)
            ax.set_yticks(range(length), tokens, fontsize=font)
            ax.set_title(title, fontsize=font + 2)
        for ax in list(axes.flat)[n:]:
            ax.axis("off")
        fig.colorbar(image, ax=axes.ravel().tolist(), shrink=0.6, label="attention weight")
        fig.suptitle(suptitle)
        atomic_write(path, lambda f: fig.savefig(f, format="png", dpi=DPI), mode="wb")
    plt.close(fig)
    return missing


@dataclass
class AttentionReport:
    """One layer's attention for a sentence: the tokens, the (heads, len, len) weights of the chosen
    heads, where they are (layer, heads) in words, the most attended tokens for a query token
    (most_attended's list), and the characters no installed font could draw in the heatmap."""
    tokens: list
    weights: object
    layer: int
    heads: list
    where: str
    top: list
    missing: list


def attention_map(model_dir: str, sentence: str = DEFAULT_SENTENCE, layer: int = -1, head: int | None = None,
                  output: str | None = None, query: str | None = None, top_k: int = 5, device: str = "auto",
                  overwrite: bool = False) -> AttentionReport:
    """One layer's attention weights for `sentence` ('A ||| B' is a pair): head `head`, or every head
    of the layer (None). With `output` (a .png) draws the heatmaps; with `query` (a token of the
    sentence) finds the top_k tokens it attends to (the mean over the heads when several)."""
    from ..device import pick_device
    from ..interop.load import load_model_of
    from ..io import check_output_file
    if output:
        if not output.endswith(".png"):
            raise ValueError(f"--output {output}: must end in .png")
        check_output_file(output, overwrite)
    loaded = load_model_of(model_dir, ("bert", "finetuned", "modernbert"), "attention")
    model, tokenizer = loaded.encoder, loaded.tokenizer
    config = model.config
    layer = layer_number(layer, config.num_hidden_layers)
    num_heads = config.num_attention_heads
    if head is not None and not 0 <= head < num_heads:
        raise ValueError(f"--head {head}: the model has {num_heads} heads per layer, numbered 0 to {num_heads - 1}")
    heads = list(range(num_heads)) if head is None else [head]
    tokens, weights = attention_weights(model.to(pick_device(device)), tokenizer, sentence, layer)
    weights = weights[heads]
    where = f"layer {layer}, " + (f"head {heads[0]}" if len(heads) == 1 else f"mean of {len(heads)} heads")
    top = most_attended(tokens, weights.mean(axis=0), query, top_k) if query else []
    missing = []
    if output:
        missing = render_heatmaps(output, tokens, weights, [f"head {h}" for h in heads],
                                  f"{os.path.basename(os.path.normpath(model_dir))}: layer {layer} of "
                                  f"{config.num_hidden_layers} (counting from 0)")
    return AttentionReport(tokens, weights, layer, heads, where, top, missing)
