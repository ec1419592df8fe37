"""bertlab create-pretraining-data: text files -> masked, paired instances in the shard format.

The main process reads the files (the only place that sees bytes, so errors can name file, line
and offset) and hands chunks of ``--chunk-docs`` documents to worker processes, which tokenize,
build and mask the instances of a chunk with a generator seeded from (seed, chunk index); the main
process writes the results in chunk order. Memory is bounded by the chunks in flight, and the
output is the same for any number of workers.
"""
import json
import os
import shutil
from collections import Counter, deque

from ..io import atomic_write_text, make_folder
from ..tokenization import BertTokenizer, Vocab
from ..tokenization.bert_tokenizer import tokenizer_config
from .args import fraction, nonnegative_int, positive_fraction, positive_int


def add_parser(subparsers):
    p = subparsers.add_parser(
        "create-pretraining-data", help="make BERT pretraining instances (masked LM + next sentence)",
        description="google-research/bert's create_pretraining_data.py: FILEs hold one sentence per line "
                    "and a blank line between documents. Worker processes make the instances of chunks of "
                    "--chunk-docs documents, each chunk seeded from --random-seed and its index, so the "
                    "output is the same for any number of workers. A random next sentence comes from the "
                    "same chunk (google draws from the whole corpus, held in memory): a corpus that fits "
                    "one chunk gets google's instances exactly. Output: OUT_DIR with memory-mapped shards, "
                    "vocab.txt, tokenizer_config.json and meta.json (written last; settings and counts inside).")
    p.add_argument("files", nargs="+", metavar="FILE", help="UTF-8 text files")
    p.add_argument("--vocab", required=True, help="vocab.txt, or a folder holding it (bertlab vocab's output); "
                   "a tokenizer_config.json beside it gives the casing")
    casing = p.add_mutually_exclusive_group()
    casing.add_argument("--uncased", dest="do_lower_case", action="store_true", default=None,
                        help="lower-case and strip accents (default unless tokenizer_config.json says cased)")
    casing.add_argument("--cased", dest="do_lower_case", action="store_false", help="keep case and accents")
    p.add_argument("-o", "--output-dir", required=True, metavar="OUT_DIR")
    p.add_argument("--mode", choices=("nsp", "full-sentences"), default="nsp",
                   help="nsp: sentence pairs with next-sentence labels (BERT); full-sentences: RoBERTa's "
                        "packing of whole sentences across documents, masked LM only (default nsp)")
    p.add_argument("--max-seq-length", type=positive_int, default=128,
                   help="pieces per instance, [CLS] and [SEP] included (default 128; at least 5, 3 for full-sentences)")
    p.add_argument("--max-predictions-per-seq", type=positive_int, default=20, help="1 to 255 (default 20)")
    p.add_argument("--masked-lm-prob", type=positive_fraction, default=0.15, help="more than 0, at most 1 (default 0.15)")
    p.add_argument("--short-seq-prob", type=fraction, default=0.1, help="nsp mode only (default 0.1)")
    p.add_argument("--dupe-factor", type=positive_int, default=None,
                   help="times each document is used, with different masks (default 10; 1 with --dynamic-masking)")
    p.add_argument("--random-seed", type=nonnegative_int, default=12345)
    p.add_argument("--do-whole-word-mask", action="store_true",
                   help="mask all pieces of a word together (a word = a piece and the ## pieces after it)")
    chinese = p.add_mutually_exclusive_group()
    chinese.add_argument("--chinese-ref", action="append", metavar="REF",
                         help="whole-word masking for Chinese: once per FILE, in order; one JSON list per "
                              "non-blank line of FILE, the positions in [CLS] + its pieces of the pieces that "
                              "continue a word (what HF's run_chinese_ref.py writes)")
    chinese.add_argument("--jieba", action="store_true",
                         help="whole-word masking for Chinese by jieba's word segmentation (pip install "
                              "'bertlab[chinese]')")
    p.add_argument("--dynamic-masking", action="store_true",
                   help="store unmasked instances; training draws a fresh mask every time (RoBERTa)")
    p.add_argument("--workers", type=positive_int, default=len(os.sched_getaffinity(0))
                   if hasattr(os, "sched_getaffinity") else os.cpu_count(), help="worker processes (default: the CPUs available)")
    p.add_argument("--chunk-docs", type=positive_int, default=2000,
                   help="documents per chunk: random next sentences come from the same chunk; memory per "
                        "worker grows with it (default 2000)")
    p.add_argument("--shard-size", type=positive_int, default=50_000, help="instances per shard (default 50000)")
    p.add_argument("--encoding-errors", choices=("strict", "replace"), default="strict",
                   help="non-UTF-8 bytes: an error naming file, line and offset (strict), or U+FFFD, counted")
    p.add_argument("--overwrite", action="store_true", help="replace pretraining data already in OUT_DIR")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(run=run)


def load_vocab_tokenizer(path, do_lower_case=None) -> BertTokenizer:
    """The tokenizer of a vocab.txt (or a folder with one); casing from tokenizer_config.json beside
    it unless given, and a given casing that contradicts that file is an error."""
    folder, vocab_file = (path, os.path.join(path, "vocab.txt")) if os.path.isdir(path) \
        else (os.path.dirname(path) or ".", path)
    if not os.path.exists(vocab_file):
        raise FileNotFoundError(f"{vocab_file}: no such vocabulary file")
    settings = tokenizer_config(folder)
    saved = settings.get("do_lower_case")
    if do_lower_case is not None and saved is not None and do_lower_case != saved:
        raise ValueError(f"{folder}/tokenizer_config.json says do_lower_case={saved}, but "
                         f"{'--uncased' if do_lower_case else '--cased'} was given")
    do_lower_case = do_lower_case if do_lower_case is not None else saved if saved is not None else True
    return BertTokenizer(Vocab.load(vocab_file), do_lower_case, never_split=settings.get("never_split") or [])


def run(args):
    from ..pretraining.instances import InstanceOptions, Vocabulary, check_text_files
    tokenizer = load_vocab_tokenizer(args.vocab, args.do_lower_case)
    Vocabulary.of(tokenizer.vocab)  # a vocab without [CLS]/[SEP]/[MASK] fails here, named
    tokenizer.unk_token_id  # noqa: B018 (and one without [UNK] too, not in a worker at the first unknown word)
    chinese = "ref" if args.chinese_ref else "jieba" if args.jieba else None
    if chinese and args.dynamic_masking:
        raise ValueError("Chinese whole-word masking needs static masking: the shards do not store word "
                         "boundaries, so a dynamic mask could not honour them")
    if args.jieba:
        from ..pretraining.masking import _jieba
        _jieba()  # fail now, not in a worker
    options = InstanceOptions(args.max_seq_length, args.max_predictions_per_seq, args.masked_lm_prob,
                              args.short_seq_prob, args.dupe_factor or (1 if args.dynamic_masking else 10),
                              args.do_whole_word_mask or chinese is not None, args.mode, args.dynamic_masking)
    check_text_files(args.files + (args.chinese_ref or []))
    _prepare_output(args.output_dir, args.overwrite)
    counts = create_pretraining_data(args.files, args.output_dir, tokenizer, options, seed=args.random_seed,
                                     workers=args.workers, chunk_docs=args.chunk_docs, shard_size=args.shard_size,
                                     encoding_errors=args.encoding_errors, chinese_ref=args.chinese_ref,
                                     chinese_words=chinese, progress_bar=not args.quiet)
    print(report(counts, args.output_dir))


def create_pretraining_data(files, folder, tokenizer: BertTokenizer, options, *, seed=12345,
                            workers=1, chunk_docs=2000, shard_size=50_000, encoding_errors="strict",
                            chinese_ref=None, chinese_words=None, progress_bar=True) -> Counter:
    """Write the instances of ``files`` to ``folder`` (shards, vocab.txt, tokenizer_config.json,
    meta.json last) with ``options`` (an InstanceOptions); returns the counts saved in meta.json's
    settings."""
    from .. import progress
    from ..pretraining.instances import array_rows, read_documents
    from ..pretraining.shards import ShardWriter, write_meta
    make_folder(folder)
    counts = Counter()
    total = sum(os.path.getsize(f) for f in files)
    bar = progress.progress_bar(total=total, unit="B", unit_scale=True, desc="create-pretraining-data",
                                enabled=progress_bar)
    documents = read_documents(files, encoding_errors, chinese_ref, counts, progress.write)
    writer = ShardWriter(folder, "shard", options.max_seq_length, options.max_predictions_per_seq,
                         len(tokenizer.vocab), options.dynamic_masking, shard_size)
    state = (tokenizer, options, seed, chinese_words)
    try:
        for arrays, chunk_counts in _map_chunks(_chunks(documents, chunk_docs), workers, state):
            for row in array_rows(arrays):
                writer.add(row)
            counts.update(chunk_counts)
            bar.set_postfix(instances=counts["instances"], refresh=False)
            bar.update(counts["bytes_read"] - bar.n)
    finally:
        bar.close()
    shards = writer.close()
    if not shards:
        raise ValueError(f"no instances: {', '.join(map(str, files))} hold no text")
    _save_tokenizer(tokenizer, folder)
    stats = {k: v for k, v in sorted(counts.items()) if k != "bytes_read"}
    settings = {"mode": options.mode, "masked_lm_prob": options.masked_lm_prob,
                "short_seq_prob": options.short_seq_prob, "dupe_factor": options.dupe_factor,
                "random_seed": seed, "do_whole_word_mask": options.do_whole_word_mask,
                "chinese_words": chinese_words, "do_lower_case": tokenizer.do_lower_case, "chunk_docs": chunk_docs,
                "files": [os.path.abspath(f) for f in files], "stats": stats}
    write_meta(folder, shards, max_seq_length=options.max_seq_length,
               max_predictions_per_seq=options.max_predictions_per_seq, vocab_size=len(tokenizer.vocab),
               dynamic_masking=options.dynamic_masking, nsp=options.mode == "nsp", settings=settings)
    return counts


def _save_tokenizer(tokenizer: BertTokenizer, folder):
    """vocab.txt and a fresh tokenizer_config.json (not merged into one a previous run left)."""
    tokenizer.vocab.save(os.path.join(folder, "vocab.txt"))
    config = {"do_lower_case": tokenizer.do_lower_case}
    if tokenizer.special_tokens:
        config["never_split"] = tokenizer.special_tokens
    atomic_write_text(os.path.join(folder, "tokenizer_config.json"), json.dumps(config, indent=2) + "\n")


def report(counts: Counter, folder) -> str:
    c = counts
    lines = [f"wrote {c['instances']} instances ({c['tokens']} tokens) to {folder}",
             f"  documents {c['documents']} (empty, skipped: {c['empty_documents']}), sentences {c['sentences']}, "
             f"lines {c['lines']}",
             f"  random next sentence {c['random_next']}, masked LM predictions {c['masked_lm_predictions']}",
             f"  sentences longer than an instance {c['long_sentences']}, instances trimmed {c['truncated_instances']}"]
    if c["encoding_replacements"]:
        lines.append(f"  non-UTF-8 byte sequences replaced by U+FFFD: {c['encoding_replacements']}")
    return "\n".join(lines)


def _prepare_output(folder, overwrite: bool):
    make_folder(folder)
    old = [n for n in os.listdir(folder) if n == "meta.json" or n.endswith(".npy")]
    if old and not overwrite:
        raise ValueError(f"{folder}: already holds pretraining data; pass --overwrite to replace it")
    for name in sorted(old, key=lambda n: n != "meta.json"):  # meta.json first: the folder reads unfinished
        path = os.path.join(folder, name)
        shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)


def _chunks(documents, chunk_docs: int):
    """The documents in groups of chunk_docs, in reading order."""
    chunk = []
    for document in documents:
        chunk.append(document)
        if len(chunk) == chunk_docs:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


_STATE = None  # the worker's (tokenizer, options, seed, chinese_words)


def _init(state):
    from ..pretraining.instances import Vocabulary
    global _STATE
    _STATE = state + (Vocabulary.of(state[0].vocab),)


def _process(task):
    from ..pretraining.instances import chunk_rng, create_training_instances, instances_to_arrays, tokenize_documents
    index, raw_documents = task
    tokenizer, options, seed, chinese_words, vocabulary = _STATE
    counts = Counter()
    documents = tokenize_documents(raw_documents, tokenizer, options, vocabulary, chinese_words, counts)
    instances = create_training_instances(documents, options, vocabulary, chunk_rng(seed, index), counts)
    return instances_to_arrays(instances, options, vocabulary.size), counts


def _map_chunks(chunks, workers: int, state):
    """_process over the chunks, results in chunk order; at most 2 chunks per worker in flight."""
    numbered = enumerate(chunks)
    if workers == 1:
        _init(state)
        yield from map(_process, numbered)
        return
    import multiprocessing
    context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    with context.Pool(workers, _init, (state,)) as pool:
        pending = deque()
        for task in numbered:
            pending.append(pool.apply_async(_process, (task,)))
            if len(pending) >= 2 * workers:
                yield pending.popleft().get()
        while pending:
            yield pending.popleft().get()
