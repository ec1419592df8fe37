"""Learning a WordPiece vocabulary that fits our exact tokenizer.

The text is cut into words by *our* BasicTokenizer -- lower-casing and accent stripping when
uncased, punctuation split off, every CJK ideograph a word of its own -- and only those words are
counted and merged into pieces (train_wordpiece: what the `tokenizers` library's WordPieceTrainer
does, with its ties settled so that every run on the same text gives the same vocabulary). So the
pieces are learned from exactly the words that BertTokenizer will later segment, and every character
seen becomes a piece (alone and as "##" continuation), so the training text never needs [UNK]
(except for words over 100 characters, which google's WordPiece always maps to [UNK]).

    vocab, report = learn_vocab(["corpus.txt"], vocab_size=30522)
    save_vocab(vocab, "my-vocab", do_lower_case=True)      # vocab.txt + tokenizer_config.json
"""
import json
import os
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
    """The WordPiece vocabulary for these word counts, learned as the `tokenizers` library's
    WordPieceTrainer learns it (BPE over the words, a piece inside a word written "##" + piece):
    the special tokens first, then the alphabet (each character, and "##" + each character that
    occurs inside a word), then each merge's new piece in the order merged. Each step merges the
    adjacent pair that occurs most often, weighted by the words' counts, while that count is at
    least `min_frequency`; smaller than vocab_size when the words run out of merges.

    Equal counts go, as in that trainer, to the pair of the lower ids (a piece's id is its place
    in the vocabulary: the characters in code-point order, then the "##" characters by frequency,
    ties by string, then the merges in order), so the result depends on the text alone. The trainer
    orders the "##" characters by the iteration order of Rust hash maps, which changes from process
    to process, so two runs on the same text gave different pieces and ids (15 Latin pieces of 7,750
    on Debian's Chinese descriptions), and a model pretrained on each learned differently. The
    learned set agrees with the trainer's as closely as two of its runs agree with each other
    (30,493 of 30,522 pieces, against 30,477, on 160k distinct words of this machine's text); it
    takes longer: 35-44 s there against the trainer's 7 (counting those words took 9 s)."""
    import heapq
    needed = len(SPECIAL_TOKENS) + alphabet_size(words)
    if vocab_size < needed:
        raise ValueError(f"vocab size {vocab_size} is smaller than the alphabet: the text's characters, at "
                         f"word starts and as ## continuations, plus the {len(SPECIAL_TOKENS)} special tokens "
                         f"make {needed}; ask for at least that")
    items = sorted(words.items())  # one order for every run (a Counter keeps the file's)
    inside = Counter()
    for word, n in items:
        for c in word[1:]:
            inside["##" + c] += n
    tokens = list(SPECIAL_TOKENS) + sorted({c for word, _ in items for c in word}) \
        + sorted(inside, key=lambda t: (-inside[t], t))
    ids = {t: i for i, t in enumerate(tokens)}
    # symbols are ids, a pair (a, b) the one int a * SPAN + b: ordering pairs by it is ordering by
    # (a, b), and int keys hash faster than tuples of strings
    SPAN = 1 << 32
    seqs = [[ids[word[0]]] + [ids["##" + c] for c in word[1:]] for word, _ in items]
    counts = [n for _, n in items]
    pairs, where = {}, {}
    for i, (seq, n) in enumerate(zip(seqs, counts)):
        for x, y in zip(seq, seq[1:]):
            key = x * SPAN + y
            pairs[key] = pairs.get(key, 0) + n
            where.setdefault(key, set()).add(i)
    heap = [(-n, key) for key, n in pairs.items()]
    heapq.heapify(heap)
    bar = progress_bar(total=max(vocab_size - len(tokens), 0), unit="piece", desc="merging", enabled=progress)
    while len(tokens) < vocab_size and heap:
        n, key = heapq.heappop(heap)
        if pairs.get(key) != -n:  # an entry from before the pair's count changed
            continue
        if -n < min_frequency:
            break
        a, b = divmod(key, SPAN)
        text = tokens[a] + tokens[b][2:]
        new = ids.get(text)
        if new is None:
            new = ids[text] = len(tokens)
            tokens.append(text)
            bar.update(1)
        changed = set()
        for i in where.pop(key):
            seq = seqs[i]
            merged, j, last = [], 0, len(seq) - 1
            while j <= last:
                if j < last and seq[j] == a and seq[j + 1] == b:
                    merged.append(new)
                    j += 2
                else:
                    merged.append(seq[j])
                    j += 1
            if len(merged) == len(seq):  # the pair left this word in an earlier merge
                continue
            weight = counts[i]
            for x, y in zip(seq, seq[1:]):
                old = x * SPAN + y
                pairs[old] -= weight
                changed.add(old)
            for x, y in zip(merged, merged[1:]):
                got = x * SPAN + y
                pairs[got] = pairs.get(got, 0) + weight
                where.setdefault(got, set()).add(i)
                changed.add(got)
            seqs[i] = merged
        pairs.pop(key, None)
        changed.discard(key)
        for got in changed:  # the heap orders its entries itself: no order needed here
            if pairs[got] > 0:
                heapq.heappush(heap, (-pairs[got], got))
            else:
                del pairs[got]
    bar.close()
    return Vocab(tokens, source="<learned vocab>")


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
