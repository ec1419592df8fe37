"""Text files -> masked, paired BERT pretraining instances in the shard format (what
`bertlab create-pretraining-data` runs).

The main process reads the files (the only place that sees bytes, so errors can name file, line
and offset) and hands chunks of ``chunk_docs`` documents to worker processes, which tokenize,
build and mask the instances of a chunk with a generator seeded from (seed, chunk index); the main
process writes the results in chunk order. Memory is bounded by the chunks in flight, and the
output is the same for any number of workers.

    tokenizer = load_vocab_tokenizer("vocab.txt")
    counts = create_pretraining_data(["corpus.txt"], "shards", tokenizer, InstanceOptions(dupe_factor=1))
    print(report(counts, "shards"))
"""
import json
import os
from collections import Counter, deque
from dataclasses import dataclass

from .. import progress
from ..io import atomic_write_text, claim_output_folder, output_entries
from ..tokenization import BertTokenizer, Vocab
from ..tokenization.bert_tokenizer import tokenizer_config
from .instances import (PAIR_MODES, InstanceOptions, Vocabulary, array_rows, check_text_files, chunk_rng,
                        create_training_instances, instances_to_arrays, read_documents, tokenize_documents)
from .masking import _jieba
from .shards import ShardWriter, write_meta


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


def create_pretraining_data(files, folder, tokenizer: BertTokenizer, options: InstanceOptions, *, seed=12345,
                            workers=1, chunk_docs=2000, shard_size=50_000, encoding_errors="strict",
                            chinese_ref=None, chinese_words=None, overwrite=False, progress_bar=True,
                            resume=False) -> Counter:
    """Write the instances of ``files`` to ``folder`` (shards, vocab.txt, tokenizer_config.json,
    meta.json last) with ``options``; returns the counts saved in meta.json's settings.
    ``chinese_words`` ("ref", with one ``chinese_ref`` file per file, or "jieba") masks Chinese
    words whole. Pretraining data already in ``folder`` is replaced only with ``overwrite``.

    Each finished shard is recorded in ``folder``/progress.json with the place in the chunk sequence
    it ends at; ``resume`` continues an interrupted run of the same inputs and settings from there:
    its finished shards are kept, the chunks they hold are read past without being tokenized (the
    chunks are seeded by their index, so the rest come out as an uninterrupted run makes them)."""
    check_inputs(files, tokenizer, options, chinese_ref, chinese_words)
    fingerprint = _fingerprint(files, tokenizer, options, seed, chunk_docs, shard_size, encoding_errors, chinese_ref,
                               chinese_words)
    start = _resume_point(folder, fingerprint) if resume else None
    if start is None:
        _prepare_output(folder, overwrite)
    counts = Counter(start["counts"]) if start else Counter()
    total = sum(os.path.getsize(f) for f in files)
    bar = progress.progress_bar(total=total, unit="B", unit_scale=True, desc="create-pretraining-data",
                                enabled=progress_bar)
    read = Counter()  # the reader's own counts; a resumed run's are in `counts` already
    documents = read_documents(files, encoding_errors, chinese_ref, read, progress.write)
    writer = ShardWriter(folder, "shard", options.max_seq_length, options.max_predictions_per_seq,
                         len(tokenizer.vocab), options.dynamic_masking, shard_size,
                         span_boundaries=options.masking != "token", shards=start["shards"] if start else ())
    state = (tokenizer, options, seed, chinese_words)
    first, skip_rows = (start["next_chunk"], start["rows_into_it"]) if start else (0, 0)
    if start:
        progress.write(f"{folder}: resuming after {len(start['shards'])} finished shard(s), at chunk {first:,}")
    try:
        for index, (arrays, chunk_counts) in _map_chunks(_chunks(documents, chunk_docs), workers, state, first):
            rows = list(array_rows(arrays))
            done = skip_rows if index == first else 0
            for j in range(done, len(rows)):
                if writer.add(rows[j]):  # a shard was written: record where the run stands
                    whole = j + 1 == len(rows)
                    _record(folder, fingerprint, writer.shards, index + 1 if whole else index, 0 if whole else j + 1,
                            counts + chunk_counts if whole else counts)
            counts.update(chunk_counts)
            bar.set_postfix(instances=counts["instances"], refresh=False)
            bar.update(read["bytes_read"] - bar.n)
    finally:
        bar.close()
    counts.update({k: v for k, v in read.items() if k != "bytes_read"})  # the whole files were read, resumed or not
    shards = writer.close()
    if not shards:
        raise ValueError(f"no instances: {', '.join(map(str, files))} hold no text")
    _save_tokenizer(tokenizer, folder)
    stats = {k: v for k, v in sorted(counts.items()) if k != "bytes_read"}
    settings = {"mode": options.mode, "masked_lm_prob": options.masked_lm_prob,
                "short_seq_prob": options.short_seq_prob, "dupe_factor": options.dupe_factor,
                "random_seed": seed, "do_whole_word_mask": options.do_whole_word_mask, "masking": options.masking,
                "chinese_words": chinese_words, "do_lower_case": tokenizer.do_lower_case, "chunk_docs": chunk_docs,
                "files": [os.path.abspath(f) for f in files], "stats": stats}
    write_meta(folder, shards, max_seq_length=options.max_seq_length,
               max_predictions_per_seq=options.max_predictions_per_seq, vocab_size=len(tokenizer.vocab),
               dynamic_masking=options.dynamic_masking, nsp=options.mode in PAIR_MODES, settings=settings,
               span_boundaries=options.masking != "token")
    if os.path.exists(os.path.join(folder, PROGRESS)):
        os.remove(os.path.join(folder, PROGRESS))  # meta.json marks the data complete
    return counts


PROGRESS = "progress.json"


def _fingerprint(files, tokenizer, options, seed, chunk_docs, shard_size, encoding_errors, chinese_ref,
                 chinese_words) -> dict:
    """What an interrupted run must share with the one that resumes it: the same bytes (each file's
    path, size and modification time), vocabulary and settings."""
    import dataclasses
    import hashlib
    vocab = hashlib.sha256("\n".join(tokenizer.vocab.id_to_token).encode()).hexdigest()
    stat = [(os.path.abspath(f), os.path.getsize(f), os.stat(f).st_mtime_ns) for f in files]
    return {"files": [list(x) for x in stat], "chinese_ref": [os.path.abspath(f) for f in chinese_ref or []],
            "vocab": vocab, "do_lower_case": tokenizer.do_lower_case, "options": dataclasses.asdict(options),
            "seed": seed, "chunk_docs": chunk_docs, "shard_size": shard_size, "encoding_errors": encoding_errors,
            "chinese_words": chinese_words}


def _record(folder, fingerprint, shards, next_chunk: int, rows_into_it: int, counts: Counter):
    atomic_write_text(os.path.join(folder, PROGRESS), json.dumps(
        {"fingerprint": fingerprint, "shards": shards, "next_chunk": next_chunk, "rows_into_it": rows_into_it,
         "counts": dict(counts)}) + "\n")


def _resume_point(folder, fingerprint) -> dict | None:
    """progress.json's place for a resumed run (None: nothing written yet, start afresh), after
    checking it is this run's and removing any shard written after it."""
    path = os.path.join(folder, PROGRESS)
    if os.path.exists(os.path.join(folder, "meta.json")):
        raise ValueError(f"{folder}: already complete (meta.json is written); nothing to --resume")
    if not os.path.exists(path):
        if output_entries(folder, DATA_FILES[:2]):
            raise ValueError(f"{folder}: holds shards but no {PROGRESS}, so where they end is unknown; start again "
                             "with --overwrite")
        return None
    try:
        with open(path, encoding="utf-8") as f:
            state = json.load(f)
        shards, next_chunk, rows, counts = (state["shards"], state["next_chunk"], state["rows_into_it"],
                                            state["counts"])
        ok = isinstance(shards, list) and all(isinstance(x, dict) and isinstance(x.get("name"), str)
                                              and isinstance(x.get("instances"), int) for x in shards) \
            and isinstance(next_chunk, int) and next_chunk >= 0 and isinstance(rows, int) and rows >= 0 \
            and isinstance(counts, dict) and all(isinstance(v, int) for v in counts.values())
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{path}: not a progress record ({e}); start again with --overwrite") from None
    if not ok:
        raise ValueError(f"{path}: not a progress record; start again with --overwrite")
    if state.get("fingerprint") != fingerprint:
        theirs = state.get("fingerprint") or {}
        differ = [k for k in fingerprint if theirs.get(k) != fingerprint[k]]
        raise ValueError(f"{folder}: was started with other {', '.join(differ) or 'inputs'}; --resume needs the same "
                         "files (unchanged), vocabulary and settings, or start again with --overwrite")
    kept = {x["name"] for x in shards}
    import glob
    for shard_file in glob.glob(os.path.join(glob.escape(folder), "shard-*.npy")):
        if os.path.basename(shard_file).split(".")[0] not in kept:
            os.remove(shard_file)  # written after the last record: made again
    return {"shards": shards, "next_chunk": next_chunk, "rows_into_it": rows, "counts": counts}


def check_inputs(files, tokenizer: BertTokenizer, options: InstanceOptions, chinese_ref=None, chinese_words=None):
    """Everything that can be wrong with the inputs, found before any work (not in a worker)."""
    Vocabulary.of(tokenizer.vocab)  # a vocab without [CLS]/[SEP]/[MASK] fails here, named
    tokenizer.unk_token_id  # noqa: B018 (and one without [UNK] too, not at a worker's first unknown word)
    if chinese_words and options.dynamic_masking:
        raise ValueError("Chinese whole-word masking needs static masking: the shards do not store word "
                         "boundaries, so a dynamic mask could not honour them")
    if chinese_words == "jieba":
        _jieba()
    check_text_files(list(files) + list(chinese_ref or []))


def _save_tokenizer(tokenizer: BertTokenizer, folder):
    """vocab.txt and a fresh tokenizer_config.json (not merged into one a previous run left)."""
    tokenizer.vocab.save(os.path.join(folder, "vocab.txt"))
    config = {"do_lower_case": tokenizer.do_lower_case}
    if tokenizer.special_tokens:
        config["never_split"] = tokenizer.special_tokens
    atomic_write_text(os.path.join(folder, "tokenizer_config.json"), json.dumps(config, indent=2) + "\n")


def report(counts: Counter, folder, mode: str = "nsp") -> str:
    c = counts
    pairs = f"swapped pairs (sentence order) {c['random_next']}" if mode == "sop" \
        else f"random next sentence {c['random_next']}"
    lines = [f"wrote {c['instances']} instances ({c['tokens']} tokens) to {folder}",
             f"  documents {c['documents']} (empty, skipped: {c['empty_documents']}), sentences {c['sentences']}, "
             f"lines {c['lines']}",
             f"  {pairs}, masked LM predictions {c['masked_lm_predictions']}"
             + (f" in {c['masked_spans']} spans" if c["masked_spans"] else ""),
             f"  sentences longer than an instance {c['long_sentences']}, instances trimmed {c['truncated_instances']}"]
    if c["encoding_replacements"]:
        lines.append(f"  non-UTF-8 byte sequences replaced by U+FFFD: {c['encoding_replacements']}")
    return "\n".join(lines)


# What create_pretraining_data writes into its folder: meta.json first in the list, so that a
# replacement removes it first and the folder reads as unfinished. Only these names are ever
# removed (a user's notes.npy beside the shards is not ours).
DATA_FILES = ("meta.json", "shard-[0-9][0-9][0-9][0-9]*.npy", "vocab.txt", "tokenizer_config.json", "progress.json")


def _prepare_output(folder, overwrite: bool):
    found = output_entries(folder, DATA_FILES)
    data = [n for n in found if n not in ("vocab.txt", "tokenizer_config.json")]
    claim_output_folder(folder, DATA_FILES, overwrite, what="pretraining data" if data else "", remove=True,
                        command="create-pretraining-data")


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
    global _STATE
    _STATE = state + (Vocabulary.of(state[0].vocab),)


def _process(task):
    index, raw_documents = task
    tokenizer, options, seed, chinese_words, vocabulary = _STATE
    counts = Counter()
    documents = tokenize_documents(raw_documents, tokenizer, options, vocabulary, chinese_words, counts)
    instances = create_training_instances(documents, options, vocabulary, chunk_rng(seed, index), counts)
    return instances_to_arrays(instances, options, vocabulary.size), counts


def _map_chunks(chunks, workers: int, state, first: int = 0):
    """(index, _process's result) over the chunks from index `first` (those before it are read past,
    not processed), in chunk order; at most 2 chunks per worker in flight."""
    numbered = ((i, chunk) for i, chunk in enumerate(chunks) if i >= first)
    if workers == 1:
        _init(state)
        yield from ((task[0], _process(task)) for task in numbered)
        return
    import multiprocessing
    context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    with context.Pool(workers, _init, (state,)) as pool:
        pending = deque()
        for task in numbered:
            pending.append((task[0], pool.apply_async(_process, (task,))))
            if len(pending) >= 2 * workers:
                index, result = pending.popleft()
                yield index, result.get()
        while pending:
            index, result = pending.popleft()
            yield index, result.get()


@dataclass
class CreatedData:
    """What create_pretraining_data_job wrote: the counts (also in meta.json) of `mode` data in `folder`."""
    counts: Counter
    folder: str
    mode: str

    def report(self) -> str:
        return report(self.counts, self.folder, self.mode)


def create_pretraining_data_job(files: list[str], out: str, vocab: str, *, do_lower_case: bool | None = None,
                                recipe: str | None = None, mode: str | None = None, dynamic_masking: bool = False,
                                max_seq_length: int = 128, max_predictions_per_seq: int | None = None,
                                masked_lm_prob: float | None = None, short_seq_prob: float = 0.1,
                                dupe_factor: int | None = None, do_whole_word_mask: bool = False,
                                masking: str = "token", chinese_ref: list[str] | None = None, jieba: bool = False,
                                seed: int = 12345, workers: int = 1, chunk_docs: int = 2000,
                                shard_size: int = 50_000, encoding_errors: str = "strict", overwrite: bool = False,
                                resume: bool = False, progress: bool = True) -> CreatedData:
    """`bertlab create-pretraining-data` with explicit arguments: the recipe's mode and masking
    (pretraining.recipes), the tokenizer of `vocab`, then create_pretraining_data. dupe_factor
    defaults to 10, 1 with dynamic masking; masked_lm_prob to 0.15 and max_predictions_per_seq to
    20 (google's), or the recipe's; Chinese whole-word masking comes from `chinese_ref` files,
    jieba, or ERNIE masking."""
    from .recipes import data_settings
    chosen = data_settings(recipe, mode, dynamic_masking, masked_lm_prob, max_predictions_per_seq, max_seq_length)
    mode, dynamic = chosen["mode"], chosen["dynamic_masking"]
    masked_lm_prob, max_predictions_per_seq = chosen["masked_lm_prob"], chosen["max_predictions_per_seq"]
    tokenizer = load_vocab_tokenizer(vocab, do_lower_case)
    chinese = "ref" if chinese_ref else "jieba" if jieba or masking == "ernie" else None
    options = InstanceOptions(max_seq_length, max_predictions_per_seq, masked_lm_prob, short_seq_prob,
                              dupe_factor or (1 if dynamic else 10), do_whole_word_mask or chinese is not None, mode,
                              dynamic, masking)
    counts = create_pretraining_data(files, out, tokenizer, options, seed=seed, workers=workers, chunk_docs=chunk_docs,
                                     shard_size=shard_size, encoding_errors=encoding_errors, chinese_ref=chinese_ref,
                                     chinese_words=chinese, overwrite=overwrite, progress_bar=progress, resume=resume)
    return CreatedData(counts, out, mode)
