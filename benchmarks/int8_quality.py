"""What int8 (inference.int8.quantize_int8) costs in quality, on real data with trained models:
the same metric computed with the fp32 model and with its int8 copy.

    python benchmarks/int8_quality.py --cls RUNS/manpages/model --ner RUNS/ner/model \\
        --translation RUNS/translate/model --gpt RUNS/gpt/model --gpt-val RUNS/gpt/data/val.bin

RUNS is what scripts/main_job.sh writes (its `runs/` folder): a MiniLM fine-tuned on
data/manpages (man-page section from the description), one on data/manpages-ner, a translate-train
small Transformer on data/gettext-gnu-de (de -> en), and a gpt-train tiny GPT on
data/python-docs/summaries.txt whose held-out split is gpt-train's data/val.bin. Any flag may be
left out; the MiniLM embedding figure needs nothing.

    classification  accuracy on data/manpages dev + test (108 descriptions), or --cls-data's
    NER             entity F1 on data/manpages-ner/test.txt
    embeddings      MiniLM, cosine of int8 to fp32 vectors of 1,000 real docstring summaries
    translation     sacreBLEU of beam-4 translations of data/gettext-gnu-de/test.de against test.en
    GPT             perplexity over the held-out tokens, in windows of the model's block
"""
import argparse
import copy
import math
import os
import sys
import tempfile
import time

import numpy as np
import torch

from bertlab.inference.int8 import quantize_int8

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
DATA = os.path.join(ROOT, "data")


def report(what, metric, fp32, int8, fmt="{:.4f}"):
    print(f"{what}: {metric} fp32 {fmt.format(fp32)}, int8 {fmt.format(int8)}, "
          f"difference {fmt.format(int8 - fp32)}", flush=True)


def predict_metric(folder, files, metric):
    """The metric over `files` (weighted by examples) with the fp32 and the int8 model."""
    from bertlab.finetune.predict import predict_file
    scores = {}
    for int8 in (False, True):
        total, count = 0.0, 0
        for path in files:
            with tempfile.TemporaryDirectory() as tmp:
                result = predict_file(folder, path, os.path.join(tmp, "p.jsonl"), progress=False, int8=int8)
                n = sum(1 for _ in open(os.path.join(tmp, "p.jsonl"), encoding="utf-8"))
            total, count = total + result[metric] * n, count + n
        scores[int8] = total / count
    return scores[False], scores[True]


def embeddings():
    from bertlab.inference.embed import embed_texts
    from bertlab.interop.load import load_model
    with open(os.path.join(DATA, "python-docs", "summaries.txt"), encoding="utf-8") as f:
        texts = [line.strip() for line in f if line.strip()][:1000]
    loaded = load_model("minilm")
    fp32 = embed_texts(loaded.model, loaded.tokenizer, texts, normalize=True)
    int8 = embed_texts(quantize_int8(loaded.model), loaded.tokenizer, texts, normalize=True)
    cosine = (fp32 * int8).sum(1)
    print(f"embeddings (MiniLM, {len(texts)} docstring summaries): cosine int8 to fp32 mean {cosine.mean():.4f}, "
          f"min {cosine.min():.4f}", flush=True)


def translation(folder):
    import sacrebleu

    from bertlab.inference.translate import translate_ids
    from bertlab.interop.translation_folder import load_translation_model
    from bertlab.io import read_lines
    loaded = load_translation_model(folder)
    from bertlab.models.accelerate import accelerate
    accelerate(loaded.model)
    model, source, target = loaded.model, loaded.tokenizer, loaded.extra["target_tokenizer"]
    lines = read_lines(os.path.join(DATA, "gettext-gnu-de", "test.de"))
    refs = read_lines(os.path.join(DATA, "gettext-gnu-de", "test.en"))
    ids = [source.encode(line)[:model.config.max_position_embeddings - 1] for line in lines]
    bleu = {}
    for name, m in (("fp32", model), ("int8", quantize_int8(copy.deepcopy(model)))):
        start = time.perf_counter()
        with torch.inference_mode():
            hyps = [target.decode(h[0].tokens) for h in translate_ids(m, ids, beam_size=4)]
        bleu[name] = sacrebleu.corpus_bleu(hyps, [refs]).score
        print(f"  translation {name}: {time.perf_counter() - start:.1f} s", flush=True)
    report(f"translation ({len(lines)} test sentences, beam 4)", "BLEU", bleu["fp32"], bleu["int8"], "{:.2f}")


def gpt(folder, val_path):
    from bertlab.interop.load import load_model
    model = load_model(folder).model
    tokens = torch.from_numpy(np.fromfile(val_path, dtype=np.uint16).astype(np.int64))
    block = model.config.n_positions
    windows = tokens[:(len(tokens) - 1) // block * block + 1]
    x = windows[:-1].view(-1, block)
    y = windows[1:].view(-1, block)
    ppl = {}
    for name, m in (("fp32", model), ("int8", quantize_int8(copy.deepcopy(model)))):
        with torch.inference_mode():
            _, loss = m.eval()(x, y)
        ppl[name] = math.exp(float(loss))
    report(f"GPT ({y.numel()} held-out tokens, windows of {block})", "perplexity", ppl["fp32"], ppl["int8"], "{:.2f}")
    print(f"  relative change {100 * (ppl['int8'] / ppl['fp32'] - 1):+.2f}%")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cls")
    p.add_argument("--cls-data", default=os.path.join(DATA, "manpages"), metavar="DIR",
                   help="dev.tsv and test.tsv the --cls model is scored on (default data/manpages; the "
                        "six-section set of data/manpages/make_manpages.py is larger: 301 + 289)")
    p.add_argument("--ner")
    p.add_argument("--translation")
    p.add_argument("--gpt")
    p.add_argument("--gpt-val")
    args = p.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, load {os.getloadavg()}", flush=True)
    embeddings()
    if args.cls:
        files = [os.path.join(args.cls_data, f"{s}.tsv") for s in ("dev", "test")]
        report(f"classification ({args.cls_data} dev + test)", "accuracy", *predict_metric(args.cls, files, "accuracy"))
        report(f"classification ({args.cls_data} train, what the model was trained on)", "accuracy",
               *predict_metric(args.cls, [os.path.join(args.cls_data, "train.tsv")], "accuracy"))
    if args.ner:
        report("NER (data/manpages-ner/test.txt)", "entity F1",
               *predict_metric(args.ner, [os.path.join(DATA, "manpages-ner", "test.txt")], "f1"))
    if args.gpt:
        gpt(args.gpt, args.gpt_val)
    if args.translation:
        translation(args.translation)


if __name__ == "__main__":
    sys.exit(main())
