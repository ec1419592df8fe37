"""Real token-classification and extractive-QA sets built from the manual pages on this machine, for
bench_finetune.py's --task ner and --task squad. Nothing is downloaded. Built from every page, the
sets come under many licences, so they are rebuilt wherever the benchmark runs; with
--licensed-only --sections 237 they hold only text of the Linux man-pages project (sections 2, 3
and 7 under its copyleft licence, as data/manpages/make_manpages.py --licensed-only selects them),
which the repo ships in data/manpages-ner and data/manpages-qa (their READMEs give the commands).

    python benchmarks/finetune_tasks.py ner OUT_DIR      # OUT_DIR/{train,dev,test}.txt (CoNLL)
    python benchmarks/finetune_tasks.py squad OUT_DIR    # OUT_DIR/{train,dev,test}.json (SQuAD v1.1)
    python benchmarks/finetune_tasks.py options OUT_DIR  # the same, long answers (qa_parity.py)

ner: the sentences of every page's DESCRIPTION section (man(7) pages of sections 1-8), one word
per line in BIO form. The labels come from the page's own typesetting, which the model never sees:
- CMD: a word set in bold or italic that names an installed page of section 1 or 8 (`grep`,
  `ls(1)`); the same word in roman type ("the time of day") stays O;
- FUNC: likewise for a page of section 2 or 3 (`open(2)`, `printf()`); a section number after
  the name decides between the two (`write(1)` CMD, `write(2)` FUNC; `sysfs(5)` neither);
- OPT: a word shaped like an option (`-l`, `--block-size=SIZE`);
- PATH: a word that is an absolute or home path (`/etc/passwd`, `~/.bashrc`).
Every entity is one word, so only B- tags occur. Sentences of 5 to 60 words are kept.

squad: each page's one-line NAME description ("ls - list directory contents"). A context is 2 to 8
such lines of different pages ("NAME - description", one a line, at most 50 words); each line gives
the question "What does NAME do?", whose answer is that line's description.

options: each page's command-line options, from the `.TP` / `.IP` entries of its OPTIONS and
DESCRIPTION sections whose tag starts with a dash ("-a, --all" then "do not ignore entries starting
with ."). A context is 3 to 8 consecutive entries of one page ("TAG: description", one entry a
line, at most `max_words` words: often longer than a 256-piece window); each entry gives the
question "What does the option TAG of NAME do?", whose answer is the entry's description (its first
paragraph, 3 to 40 words: 15 on average, a fifth past 22).

All three split by a hash of the page name (a page's text lands in one split only) and keep a fixed
sample of each split (--train/--dev/--test; the same on every run of the same machine).
"""
import argparse
import hashlib
import json
import os
import random
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "manpages"))
from make_manpages import TROFF_ESCAPES, description, licensed, name_line, page_text, split_of  # noqa: E402

SECTIONS = "12345678"
FONT = re.compile(r"\\f(\[[^\]]*\]|\(..|.)")
LEFTOVER_ESCAPES = re.compile(r"\\\(..|\\\[[^\]]*\]|\\.")  # glyphs (\(bu) and other escapes: dropped
ALTERNATING = ("BR", "RB", "BI", "IB", "IR", "RI")  # man(7) macros alternating two fonts
OPTION = re.compile(r"^--?[A-Za-z0-9][\w-]*(=\S*)?$")
PATH = re.compile(r"^~?/[\w.~-]+\S*$")
SECTION_REF = re.compile(r"\((\d?)\w*\)$")  # ls(1), write(2), printf()
KINDS = {"1": "CMD", "8": "CMD", "2": "FUNC", "3": "FUNC"}


# --- pages -------------------------------------------------------------------------------------------
def page_files(man_dir: str, sections: str = SECTIONS):
    """(page name, path) of every page file of `sections`, section by section (gcloud's 16k
    generated pages left out)."""
    for section in sections:
        folder = os.path.join(man_dir, f"man{section}")
        for file in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
            if not file.startswith("gcloud"):
                yield re.sub(r"\.\w+(\.gz)?$", "", file), os.path.join(folder, file)


def man_pages(man_dir: str, sections: str = SECTIONS, licensed_only: bool = False):
    """(page name, path) of every page of `sections` that is a file of its own (links are aliases),
    with `licensed_only` only those under the Linux man-pages copyleft licence."""
    return ((name, path) for name, path in page_files(man_dir, sections)
            if not os.path.islink(path) and (not licensed_only or licensed(page_text(path))))


def page_names(man_dir: str) -> dict[str, str]:
    """{page name, aliases included: "CMD" or "FUNC"}: sections 1 and 8 name commands, 2 and 3
    functions; a name in both is a command."""
    return {name: "CMD" if section in "18" else "FUNC"
            for section in "2318" for name, _ in page_files(man_dir, section)}


# --- ner: typeset words ------------------------------------------------------------------------------
def _macro_text(line: str) -> str | None:
    """A font macro line (.B, .I, .BR, ...) as text with inline font escapes; None for other requests."""
    m = re.match(r"^\.(B|I|BR|RB|BI|IB|IR|RI|SB|SM)(?:\s+(.*))?$", line)
    if not m:
        return None
    args = [a.strip('"') for a in re.findall(r'"[^"]*"|\S+', m.group(2) or "")]
    if m.group(1) in ALTERNATING:  # alternate the two fonts, no space between the arguments
        fonts = m.group(1)
        return "".join(f"\\f{fonts[i % 2]}{a}" for i, a in enumerate(args)) + "\\fR"
    font = m.group(1) if m.group(1) in "BI" else "R"
    return f"\\f{font}{' '.join(args)}\\fR"


def _font_of(escape: str, font: str, previous: str) -> str:
    if escape == "P":
        return previous
    name = escape.strip("[]()")
    return name[0] if name[:1] in ("B", "I") else "R"


def typeset_words(lines: list[str]) -> list[tuple[str, str]]:
    """(word, the font of each of its characters: B, I or R) of a paragraph's source lines."""
    chars, fonts, font, previous = [], [], "R", "R"
    for line in lines:
        for i, piece in enumerate(FONT.split(line + " ")):
            if i % 2:  # FONT.split puts each escape's argument at the odd indices
                font, previous = _font_of(piece, font, previous), font
                continue
            for pattern, repl in TROFF_ESCAPES:
                piece = re.sub(pattern, repl, piece)
            piece = LEFTOVER_ESCAPES.sub("", piece)
            chars += piece
            fonts += font * len(piece)
    words, start = [], None
    for i, c in enumerate([*chars, " "]):
        if not c.isspace() and start is None:
            start = i
        elif c.isspace() and start is not None:
            words.append(("".join(chars[start:i]), "".join(fonts[start:i])))
            start = None
    return words


def split_punctuation(word: str) -> list[str]:
    """A word with its leading and trailing punctuation as words of their own: "(see", "ls(1)," ->
    "(", "see"; "ls(1)", ","."""
    head, tail = [], []
    while word and (word[0] in "\"'`" or (word[0] == "(" and word.count("(") > word.count(")"))):
        head, word = [*head, word[0]], word[1:]
    while word and (word[-1] in ",.;:!?\"'" or (word[-1] == ")" and word.count(")") > word.count("("))):
        tail, word = [word[-1], *tail], word[:-1]
    return [*head, *([word] if word else []), *tail]


def tag(word: str, font: str, names: dict[str, str]) -> str:
    if OPTION.match(word):
        return "B-OPT"
    if PATH.match(word):
        return "B-PATH"
    ref = SECTION_REF.search(word)
    name = word[:ref.start()] if ref else word
    if font not in "BI" or name not in names:
        return "O"
    if ref and ref.group(1):  # write(2): the section says which kind of page is meant
        return f"B-{KINDS[ref.group(1)]}" if ref.group(1) in KINDS else "O"
    return f"B-{names[name]}"


def description_paragraphs(source: str):
    """The source lines of each paragraph of the DESCRIPTION section (man(7) pages)."""
    m = re.search(r'^\.SH\s+"?DESCRIPTION"?\s*$(.*?)(?=^\.SH\s|\Z)', source, re.M | re.S)
    paragraph = []
    for line in (m.group(1).splitlines() if m else []):
        if line.startswith(("'", ".")) and not line.startswith(".\\\""):
            text = _macro_text(line)
            if text is None:  # .PP, .TP, .IP, .RS, .nf ...: the paragraph ends
                if paragraph:
                    yield paragraph
                paragraph = []
                continue
            line = text
        elif line.startswith(".\\\""):  # a comment
            continue
        paragraph.append(line.split('\\"')[0])
    if paragraph:
        yield paragraph


def tagged_sentences(source: str, names: dict[str, str], min_words=5, max_words=60):
    """(words, tags) of each sentence of a page's DESCRIPTION, the tags as the module docstring says."""
    for lines in description_paragraphs(source):
        sentence = []
        for word, fonts in typeset_words(lines):
            at = 0
            for piece in split_punctuation(word):
                at = word.index(piece, at)
                sentence.append((piece, tag(piece, fonts[at], names)))
                at += len(piece)
                if piece in (".", "?", "!"):
                    yield from _kept(sentence, min_words, max_words)
                    sentence = []
        yield from _kept(sentence, min_words, max_words)


def _kept(sentence, min_words, max_words):
    if min_words <= len(sentence) <= max_words:
        yield [w for w, _ in sentence], [t for _, t in sentence]


def build_ner(out: str, man_dir="/usr/share/man", sizes=None, seed=0, sections=SECTIONS, licensed_only=False) -> dict:
    """Write OUT/{train,dev,test}.txt; returns how many sentences and entities each split holds.
    The tags name the pages of every section; the sentences come from `sections` only."""
    names, splits = page_names(man_dir), {"train": [], "dev": [], "test": []}
    for name, path in man_pages(man_dir, sections, licensed_only):
        splits[split_of(name)] += tagged_sentences(page_text(path), names)
    stats = {}
    for split, sentences in _sampled(splits, sizes, seed).items():
        with open(os.path.join(out, f"{split}.txt"), "w", encoding="utf-8") as f:
            f.writelines("".join(f"{w} {t}\n" for w, t in zip(words, tags)) + "\n" for words, tags in sentences)
        stats[split] = {"sentences": len(sentences), "entities": sum(t != "O" for _, tags in sentences for t in tags)}
    return stats


# --- squad ---------------------------------------------------------------------------------------------
def one_liners(man_dir: str, sections=SECTIONS, licensed_only=False) -> dict[str, list[tuple[str, str]]]:
    """(name, description) of every page with a NAME line, by split; a description is kept once."""
    splits, seen_texts, seen_names = {"train": [], "dev": [], "test": []}, set(), set()
    for name, path in man_pages(man_dir, sections, licensed_only):
        line = name_line(page_text(path))
        text = line and description(line)
        if text and text.lower() not in seen_texts and name not in seen_names:  # a name asked about once
            seen_texts.add(text.lower())
            seen_names.add(name)
            splits[split_of(name)].append((name, text))
    return splits


def grouped_paragraphs(items, rng: random.Random, least: int, max_words: int, prefix, question, qid) -> list[dict]:
    """SQuAD paragraphs of `least` to 8 consecutive (key, text) items (fewer words than max_words once
    `least` are in), one line `prefix(key)` + text each, each line's text asked about by `question(key)`;
    `qid(key, paragraph, line)` names the question."""
    paragraphs, i = [], 0
    while i + least <= len(items):
        chosen = []
        for key, text in items[i:i + rng.randint(least, 8)]:
            words = sum(len(f"{prefix(k)}{t}".split()) for k, t in [*chosen, (key, text)])
            if words > max_words and len(chosen) >= least:
                break
            chosen.append((key, text))
        i += len(chosen)
        context, qas = "", []
        for key, text in chosen:
            start = len(context) + len(prefix(key))
            context += f"{prefix(key)}{text}\n"
            qas.append({"id": qid(key, len(paragraphs), len(qas)), "question": question(key),
                        "answers": [{"text": text, "answer_start": start}]})
        paragraphs.append({"context": context, "qas": qas})
    return paragraphs


def squad_paragraphs(lines: list[tuple[str, str]], rng: random.Random, max_words=50) -> list[dict]:
    """SQuAD paragraphs of 2 to 8 "NAME - description" lines, each line asked about."""
    rng.shuffle(lines)
    return grouped_paragraphs(lines, rng, 2, max_words, lambda name: f"{name} - ",
                              lambda name: f"What does {name} do?", lambda name, paragraph, _: f"{name}-{paragraph}")


def build_squad(out: str, man_dir="/usr/share/man", sizes=None, seed=0, sections=SECTIONS, licensed_only=False) -> dict:
    """Write OUT/{train,dev,test}.json; returns how many questions each split holds."""
    rng, stats = random.Random(seed), {}
    for split, lines in one_liners(man_dir, sections, licensed_only).items():
        paragraphs = squad_paragraphs(lines, rng)
        if sizes:  # whole paragraphs, until the split has its number of questions
            kept, total = [], 0
            for p in paragraphs:
                if total >= sizes[split]:
                    break
                kept.append(p)
                total += len(p["qas"])
            paragraphs = kept
        with open(os.path.join(out, f"{split}.json"), "w", encoding="utf-8") as f:
            json.dump({"version": "1.1", "data": [{"title": "manual pages", "paragraphs": paragraphs}]}, f)
        stats[split] = {"paragraphs": len(paragraphs), "questions": sum(len(p["qas"]) for p in paragraphs)}
    return stats


# --- options: long answers --------------------------------------------------------------------------
ENTRY_END = re.compile(r"^\.(TP|IP|PP|P|LP|SH|SS|RS|RE|HP|TQ|nf|fi|in|sp|br|ti|EX|EE)\b")


def _plain(line: str) -> str:
    """A source line as its text: font macros and escapes resolved, requests dropped."""
    if line.startswith(".\\\""):
        return ""
    if line.startswith((".", "'")):
        text = _macro_text(line)
        if text is None:
            return ""
        line = text
    for pattern, repl in TROFF_ESCAPES:
        line = re.sub(pattern, repl, line)
    line = line.replace("\\^", "").replace("\\|", "")
    return " ".join(LEFTOVER_ESCAPES.sub("", line).split())


def option_entries(source: str, min_words=3, max_words=40) -> list[tuple[str, str]]:
    """(tag, description) of each option entry (.TP tag line, or .IP "tag") of a man(7) page."""
    lines, entries, k = source.splitlines(), [], 0
    while k < len(lines):
        line = lines[k]
        k += 1
        if line.startswith(".TP"):
            while k < len(lines) and lines[k].startswith(".TQ"):
                k += 1
            if k >= len(lines):
                break
            tag = _plain(lines[k])
            k += 1
        elif line.startswith(".IP "):
            args = re.findall(r'"[^"]*"|\S+', line[4:])
            tag = _plain(args[0].strip('"')) if args else ""
        else:
            continue
        body = []
        while k < len(lines) and not ENTRY_END.match(lines[k]):
            body.append(_plain(lines[k]))
            k += 1
        text = " ".join(" ".join(body).split())
        if tag.startswith("-") and len(tag) <= 60 and min_words <= len(text.split()) <= max_words:
            entries.append((tag, text))
    return entries


def option_paragraphs(name: str, entries, rng: random.Random, max_words: int, first_id: int) -> list[dict]:
    """SQuAD paragraphs of 3 to 8 consecutive entries of one page, each entry asked about."""
    return grouped_paragraphs(entries, rng, 3, max_words, lambda tag: f"{tag}: ",
                              lambda tag: f"What does the option {tag} of {name} do?",
                              lambda tag, paragraph, line: f"{name}-{first_id + paragraph}-{line}")


def build_options(out: str, man_dir="/usr/share/man", sizes=None, seed=0, sections="18", licensed_only=False,
                  max_words=150) -> dict:
    """Write OUT/{train,dev,test}.json (SQuAD v1.1) of option questions (the module docstring);
    returns each split's questions, paragraphs and answer lengths. A page's options land in one
    split (split_of its name); a description met before (another page's copy) is left out."""
    rng, pages, seen = random.Random(seed), {"train": [], "dev": [], "test": []}, set()
    for name, path in man_pages(man_dir, sections, licensed_only):
        entries = []
        for tag, text in option_entries(page_text(path)):
            if text.lower() not in seen:
                seen.add(text.lower())
                entries.append((tag, text))
        if len(entries) >= 3:
            pages[split_of(name)].append((name, entries))
    stats = {}
    for split, found in pages.items():
        rng.shuffle(found)
        paragraphs = []
        for name, entries in found:
            if sizes and sum(len(p["qas"]) for p in paragraphs) >= sizes[split]:
                break
            paragraphs += option_paragraphs(name, entries, rng, max_words, len(paragraphs))
        with open(os.path.join(out, f"{split}.json"), "w", encoding="utf-8") as f:
            json.dump({"version": "1.1", "data": [{"title": "manual page options", "paragraphs": paragraphs}]}, f)
        words = [len(qa["answers"][0]["text"].split()) for p in paragraphs for qa in p["qas"]]
        stats[split] = {"paragraphs": len(paragraphs), "questions": len(words), "pages": len({
            qa["id"].rsplit("-", 2)[0] for p in paragraphs for qa in p["qas"]}),
            "answer_words_mean": round(sum(words) / max(len(words), 1), 1),
            "answers_over_22_words": round(sum(w > 22 for w in words) / max(len(words), 1), 3)}
    return stats


def _sampled(splits: dict, sizes: dict | None, seed: int) -> dict:
    """A fixed random sample of each split (in a fixed order), `sizes[split]` items at most."""
    sampled = {}
    for split, items in splits.items():
        order = sorted(range(len(items)), key=lambda i: hashlib.sha1(f"{seed}-{i}".encode()).hexdigest())
        sampled[split] = [items[i] for i in order[:sizes[split]]] if sizes else [items[i] for i in order]
    return sampled


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("task", choices=["ner", "squad", "options"])
    parser.add_argument("out")
    parser.add_argument("--man-dir", default="/usr/share/man")
    parser.add_argument("--train", type=int, default=3000)
    parser.add_argument("--dev", type=int, default=400)
    parser.add_argument("--test", type=int, default=400)
    parser.add_argument("--sections", default=None,
                        help=f"the sections whose text is used (default {SECTIONS}; options: 18)")
    parser.add_argument("--licensed-only", action="store_true",
                        help="only pages under the Linux man-pages copyleft licence (what the repo may ship)")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    build = {"ner": build_ner, "squad": build_squad, "options": build_options}[args.task]
    sections = args.sections or ("18" if args.task == "options" else SECTIONS)
    stats = build(args.out, args.man_dir, {"train": args.train, "dev": args.dev, "test": args.test},
                  sections=sections, licensed_only=args.licensed_only)
    print(json.dumps(stats), file=sys.stderr)


if __name__ == "__main__":
    main()
