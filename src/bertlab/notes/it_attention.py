"""Where "it" looks (file 004, "词义随上下文变化的问题"): in "The animal didn't cross the street
because it was too tired" "it" is the animal, with "too wide" it is the street. Shown on the
packaged all-MiniLM-L6-v2 through inference.attention, the code of `bertlab attention`."""
import os

from ..io import check_output_file
from . import Shown

SENTENCES = ["The animal didn't cross the street because it was too tired",
             "The animal didn't cross the street because it was too wide"]
PICTURE = "it_attention.png"
TOP_K = 5


def it_attention(out_dir: str, overwrite: bool = False, model_name: str = "minilm", layer: int = -1) -> Shown:
    from ..inference.attention import attention_weights, most_attended, render_heatmaps
    from ..interop import load_model
    shown = Shown("'it' -> animal / street", "004, 词义随上下文变化的问题")
    path = os.path.join(out_dir, PICTURE)
    check_output_file(path, overwrite, flag="-o")
    loaded = load_model(model_name, plain=True)  # the notes' formula, not the speed paths
    model, tokenizer = loaded.encoder, loaded.tokenizer
    num_layers = model.config.num_hidden_layers
    shown.say(f"{model_name}: {num_layers} layers x {model.config.num_attention_heads} heads; weights of 'it' "
              "averaged over the heads of each layer (the notes' figure is one head of a trained Transformer)")
    found = {}
    for sentence in SENTENCES:
        shown.say(f"{sentence!r}")
        for n in range(num_layers):
            tokens, weights = attention_weights(model, tokenizer, sentence, n)
            (_, top), = most_attended(tokens, weights.mean(axis=0), "it", TOP_K)
            f = found[sentence, n] = {"top": top, "animal": _weight(tokens, weights, "animal"),
                                      "street": _weight(tokens, weights, "street"),
                                      "heads": weights, "tokens": tokens}
            shown.say(f"  layer {n}: animal {f['animal']:.3f}  street {f['street']:.3f}   "
                      f"top: {', '.join(f'{t} {w:.2f}' for t, w in top)}")
    last = num_layers - 1
    tired, wide = (found[s, last] for s in SENTENCES)
    shown.say(f"last layer, animal/street weight ratio: 'tired' {tired['animal'] / tired['street']:.2f}, "
              f"'wide' {wide['animal'] / wide['street']:.2f} (above 1: 'it' looks at the animal more); "
              "the notes' picture is one chosen head, the mean of a layer's heads is blunter")
    # the one head that links "it" to "animal" most: the notes' picture shows one head
    n, h = max(((n, h) for n in range(num_layers) for h in range(len(tired["heads"]))),
               key=lambda nh: _head_weight(found[SENTENCES[0], nh[0]], nh[1], "animal"))
    shown.say(f"the head with most weight from 'it' to 'animal' in 'tired': layer {n} head {h}; "
              + "; ".join(f"'{s.split()[-1]}': animal {_head_weight(found[s, n], h, 'animal'):.2f}, "
                          f"street {_head_weight(found[s, n], h, 'street'):.2f}" for s in SENTENCES))
    shown.values.update(best_head=(n, h))
    layer %= num_layers
    tokens, weights = attention_weights(model, tokenizer, SENTENCES[0], layer)
    render_heatmaps(path, tokens, weights, [f"head {h}" for h in range(len(weights))],
                    f"{model_name}: layer {layer}, '{SENTENCES[0]}'")
    shown.say(f"wrote {path}: layer {layer}, every head (same picture as bertlab attention --model {model_name} "
              f"--layer {layer} -o ...)")
    shown.values.update(found=found)
    shown.files.append(path)
    return shown


def _weight(tokens, weights, key: str) -> float:
    """The mean over heads of the weight from 'it' to `key`."""
    return float(weights.mean(axis=0)[tokens.index("it"), tokens.index(key)])


def _head_weight(layer: dict, head: int, key: str) -> float:
    """The weight from 'it' to `key` in one head of a layer's `found` entry."""
    tokens = layer["tokens"]
    return float(layer["heads"][head, tokens.index("it"), tokens.index(key)])
