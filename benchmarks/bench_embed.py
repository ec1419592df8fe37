"""Text -> normalised mean-pooled embedding with the real all-MiniLM-L6-v2, end to end (tokenizing
included): bertlab vs sentence-transformers `encode` vs plain HF BertModel batches.

    python benchmarks/bench_embed.py [--corpus english|mixed] [--sentences 5000] [--repeat 2] [--bf16]

Corpora: "english" = the shipped stdlib docstring summaries + English documentation lines;
"mixed" = this machine's gettext catalogs in ~190 languages + documentation (the tokenizer tests'
corpus), where sorting by characters predicts token counts badly.

All three start from the same raw sentences and must agree within 1e-5 (checked and printed).
sentence-transformers sorts by character length and pads each batch of 32 to its longest member;
plain HF batches 32 sentences in input order. bertlab sorts by token count and cuts batches by a
token budget, so it computes almost only real tokens.
"""
from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from harness import Row, measure, print_table  # noqa: E402

from bertlab import embed_texts, load_pretrained  # noqa: E402
from bertlab.data.local_text import doc_lines  # noqa: E402
from bertlab.io import read_lines  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def real_sentences(n: int, extra_file: str | None = None) -> list[str]:
    """The shipped stdlib docstring summaries, then English documentation lines of this machine
    (or of `extra_file`)."""
    lines = read_lines(os.path.join(REPO, "data", "python-docs", "summaries.txt"))
    seen = set(lines)
    for line in (read_lines(extra_file) if extra_file else doc_lines(4 * n)):
        if len(lines) >= n:
            break
        line = line.strip()
        if len(line) >= 20 and line not in seen:
            seen.add(line)
            lines.append(line)
    if len(lines) < n:
        raise SystemExit(f"only {len(lines)} real sentences found, {n} asked for")
    return lines[:n]


@torch.inference_mode()
def hf_plain(model, tokenizer, sentences, batch_size=32):
    out = []
    for i in range(0, len(sentences), batch_size):
        batch = tokenizer(sentences[i : i + batch_size], padding=True, truncation=True, max_length=256,
                          return_tensors="pt").to(model.device)
        hidden = model(**batch).last_hidden_state
        m = batch["attention_mask"].unsqueeze(-1).float()
        out.append(torch.nn.functional.normalize((hidden * m).sum(1) / m.sum(1), dim=-1).cpu().numpy())
    return np.concatenate(out)


def padding_ratio(lengths, batches):
    """Positions computed per real token."""
    return sum(len(b) * max(lengths[i] for i in b) for b in batches) / sum(lengths)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sentences", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--bf16", action="store_true", help="also time bertlab under bf16 autocast")
    parser.add_argument("--model", default="minilm",
                        help="BERT folder with sentence-transformers files (default: the packaged MiniLM)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    parser.add_argument("--lines-file", help="English lines to use after the summaries (default: /usr/share/doc)")
    parser.add_argument("--corpus", choices=["english", "mixed"], default="english")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    import transformers
    from sentence_transformers import SentenceTransformer

    from bertlab.inference.embed import length_sorted_batches

    from bertlab.interop import resolve
    if args.corpus == "mixed":
        from bertlab.data.local_text import local_lines
        sentences = [line for line in local_lines(4 * args.sentences) if line.strip()][: args.sentences]
    else:
        sentences = real_sentences(args.sentences, args.lines_file)
    folder = resolve(args.model)
    loaded = load_pretrained(folder)
    model, tokenizer = loaded.model, loaded.tokenizer
    from bertlab.models.accelerate import accelerate
    accelerate(model).to(args.device)
    st = SentenceTransformer(folder, device=args.device)
    hf_tok = transformers.AutoTokenizer.from_pretrained(folder)
    hf_model = transformers.BertModel.from_pretrained(folder).eval().to(args.device)

    def ours(dtype=None):
        return embed_texts(model, tokenizer, sentences, normalize=True, max_length=256, dtype=dtype)

    def theirs():
        return st.encode(sentences, batch_size=32, normalize_embeddings=True)

    ref, got, plain = theirs(), ours(), hf_plain(hf_model, hf_tok, sentences)
    lengths = [len(s) for s in tokenizer.tokenize_ids_batch(sentences)]
    st_order = np.argsort([-len(s) for s in sentences], kind="stable")
    st_batches = [st_order[i : i + 32] for i in range(0, len(st_order), 32)]
    print(f"{len(sentences)} real sentences, {sum(lengths):,} tokens (mean {np.mean(lengths):.1f}); "
          f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(f"max |bertlab - sentence-transformers| = {np.abs(got - ref).max():.2e}; "
          f"max |HF plain - sentence-transformers| = {np.abs(plain - ref).max():.2e}")
    print(f"positions computed per real token: bertlab "
          f"{padding_ratio(lengths, list(length_sorted_batches(lengths, 64, 2048))):.3f}, "
          f"sentence-transformers {padding_ratio(lengths, st_batches):.3f}")

    work, unit, name = len(sentences), "sentences/s", f"MiniLM embed {len(sentences)} {args.corpus} lines (fp32)"
    rows = [Row(name, "bertlab", work, unit, measure(ours, repeat=args.repeat, warmup=0)),
            Row(name, "sentence-transformers encode", work, unit, measure(theirs, repeat=args.repeat, warmup=0)),
            Row(name, "HF BertModel, batches of 32", work, unit,
                measure(lambda: hf_plain(hf_model, hf_tok, sentences), repeat=args.repeat, warmup=0))]
    if args.bf16:
        low = ours(torch.bfloat16)
        print(f"bf16 autocast: max |bf16 - fp32| = {np.abs(low - got).max():.2e}")
        rows.append(Row(name.replace("fp32", "bf16"), "bertlab", work, unit,
                        measure(lambda: ours(torch.bfloat16), repeat=args.repeat, warmup=0)))
    print_table(rows)


if __name__ == "__main__":
    main()
