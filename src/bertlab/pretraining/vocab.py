"""Learning a WordPiece vocabulary that fits our exact tokenizer.

The text is cut into words by *our* BasicTokenizer -- lower-casing and accent stripping when
uncased, punctuation split off, every CJK ideograph a word of its own -- and only those words are
given to the `tokenizers` library's WordPieceTrainer. So the pieces are learned from exactly the
words that BertTokenizer will later segment, and every character seen becomes a piece (alone and as
"##" continuation), so the training text never needs [UNK] (except for words over 100 characters,
which google's WordPiece always maps to [UNK]).

    vocab, report = learn_vocab(["corpus.txt"], vocab_size=30522)
    save_vocab(vocab, "my-vocab", do_lower_case=True)      # vocab.txt + tokenizer_config.json
"""
import json
import os
import sys
from collections import Counter

from ..io import atomic_write_text
from ..progress import progress_bar
from ..tokenization import CLS, MASK, PAD, SEP, UNK, BasicTokenizer, BertTokenizer, Vocab
from .instances import check_text_files, corpus_lines

SPECIAL_TOKENS = (PAD, UNK, CLS, SEP, MASK)  # ids 0-4, in this order
MAX_WORD_CHARS = 100  # google's max_input_chars_per_word


def count_words(paths, do_lower_case: bool = True, progress: bool = True) -> Counter:
    """How often each basic token (word after BasicTokenizer) occurs in the files."""
    check_text_files(paths)
    basic = BasicTokenizer(do_lower_case)
    words, cache, read = Counter(), {}, Counter()
    with progress_bar(total=sum(os.path.getsize(p) for p in paths), unit="B", unit_scale=True,
                      desc="counting words", enabled=progress) as bar:
        for path in paths:
            before = sum(words.values())
            for _, line in corpus_lines(path, counts=read):
                for word in basic.split_words(line):
                    tokens = cache.get(word)
                    if tokens is None:
                        tokens = cache[word] = basic.word_to_tokens(word)
                        if len(cache) > 1 << 20:
                            cache.clear()
                    words.update(tokens)
                bar.update(read["bytes_read"] - bar.n)
            if sum(words.values()) == before:
                raise ValueError(f"{path}: has no text" + (" (the file is empty)" if not os.path.getsize(path) else ""))
    return words


def alphabet_size(words: Counter) -> int:
    """Pieces the trainer must keep whatever the vocab size: each character, and "##" + each
    character that occurs inside a word."""
    first, inside = set(), set()
    for word in words:
        first.update(word)
        inside.update(word[1:])
    return len(first) + len(inside)


def train_wordpiece(words: Counter, vocab_size: int, min_frequency: int = 2, progress: bool = True) -> Vocab:
    """The trainer's vocabulary for these word counts: the special tokens first, then the
    alphabet, then the learned merges; smaller than vocab_size when the words run out of merges."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    needed = len(SPECIAL_TOKENS) + alphabet_size(words)
    if vocab_size < needed:
        raise ValueError(f"vocab size {vocab_size} is smaller than the alphabet: the text's characters, at "
                         f"word starts and as ## continuations, plus the {len(SPECIAL_TOKENS)} special tokens "
                         f"make {needed}; ask for at least that")
    tokenizer = Tokenizer(models.WordPiece(unk_token=UNK))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()  # the words are already basic tokens
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, min_frequency=min_frequency,
                                        special_tokens=list(SPECIAL_TOKENS), continuing_subword_prefix="##",
                                        # its Rust bar redraws in place: only for a terminal
                                        show_progress=progress and sys.stderr.isatty())
    tokenizer.train_from_iterator(_repeated(words), trainer)
    token_to_id = tokenizer.get_vocab()
    vocab = Vocab.from_dict(token_to_id, source="<learned vocab>")
    if tuple(vocab.id_to_token[:len(SPECIAL_TOKENS)]) != SPECIAL_TOKENS:
        raise RuntimeError(f"the trainer did not put {SPECIAL_TOKENS} first: {vocab.id_to_token[:5]}")
    return vocab


def _repeated(words: Counter, batch_chars: int = 1 << 20):
    """The counted words as text again, each as often as it occurred, in batches of about 1 MB
    (the trainer only needs the counts, not the order)."""
    batch, size = [], 0
    for word, n in words.items():
        while n:
            k = min(n, max(1, batch_chars // (len(word) + 1)))
            batch.append((word + " ") * k)
            size += k * (len(word) + 1)
            n -= k
            if size >= batch_chars:
                yield batch
                batch, size = [], 0
    if batch:
        yield batch


def check_vocab(vocab: Vocab, words: Counter, do_lower_case: bool, sample_lines=()) -> dict:
    """Round trips with our BertTokenizer; returns the report (size, share of words split).

    Every counted word must segment into pieces that join back into the word; each sample line
    must go text -> pieces -> ids -> pieces -> words and come back as its basic tokens. Only words
    over MAX_WORD_CHARS characters may become [UNK]."""
    tokenizer = BertTokenizer(vocab, do_lower_case)
    split = unknown = total = 0
    for word, n in words.items():
        pieces = tokenizer.wordpiece_tokenizer.split_word(word)
        total += n
        if pieces is None:
            if len(word) <= MAX_WORD_CHARS:
                raise ValueError(f"the learned vocabulary cannot segment {word!r}")
            unknown += n
            continue
        if "".join(p[2:] if i else p for i, p in enumerate(pieces)) != word:
            raise ValueError(f"{word!r} does not round-trip: {pieces}")
        split += n * (len(pieces) > 1)
    for line in sample_lines:
        ids = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(line))
        rejoined = []
        for piece in tokenizer.convert_ids_to_tokens(ids):
            if piece.startswith("##") and rejoined:
                rejoined[-1] += piece[2:]
            else:
                rejoined.append(piece)
        expected = [w if len(w) <= MAX_WORD_CHARS else UNK for w in tokenizer.basic_tokenizer.tokenize(line)]
        if rejoined != expected:
            raise ValueError(f"line {line[:60]!r} does not round-trip through the vocabulary")
    return {"vocab_size": len(vocab), "words": total, "distinct_words": len(words),
            "split_fraction": split / max(total, 1), "unknown_words": unknown}


def learn_vocab(paths, vocab_size: int = 30522, min_frequency: int = 2, do_lower_case: bool = True,
                progress: bool = True) -> tuple[Vocab, dict]:
    """(vocabulary, report) learned from text files; see the module docstring."""
    words = count_words(paths, do_lower_case, progress)
    vocab = train_wordpiece(words, vocab_size, min_frequency, progress)
    sample = [line for _, line in zip(range(1000), (t for _, t in corpus_lines(paths[0])))]
    return vocab, check_vocab(vocab, words, do_lower_case, sample)


def save_vocab(vocab: Vocab, folder, do_lower_case: bool) -> None:
    """vocab.txt and tokenizer_config.json (the casing, in the keys bertlab and HF both read), each
    written atomically."""
    os.makedirs(folder, exist_ok=True)
    vocab.save(os.path.join(folder, "vocab.txt"))
    config = {"do_lower_case": do_lower_case, "strip_accents": None, "tokenize_chinese_chars": True,
              "tokenizer_class": "BertTokenizer"}
    atomic_write_text(os.path.join(folder, "tokenizer_config.json"), json.dumps(config, indent=2) + "\n")


def vocab_job(files: list[str], out: str, vocab_size: int = 30522, min_frequency: int = 2,
              do_lower_case: bool = True, overwrite: bool = False, progress: bool = True) -> dict:
    """`bertlab vocab`: learn a vocabulary from `files` and save it in the folder `out` (refused when
    it already holds a vocab.txt, unless overwrite). Returns learn_vocab's report and the
    path written ("path"); vocab_size below the size asked for means the text ran out of merges."""
    from ..io import claim_output_folder
    # an OUT_DIR that cannot be made fails before the work, not after
    claim_output_folder(out, ("vocab.txt", "tokenizer_config.json"), overwrite, command="vocab")
    vocab, report = learn_vocab(files, vocab_size, min_frequency, do_lower_case, progress=progress)
    save_vocab(vocab, out, do_lower_case)
    return {**report, "path": os.path.join(out, "vocab.txt")}
