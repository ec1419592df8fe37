"""The hardening matrix of the GPT and translation commands: generate, gpt-train, translate and
translate-train, each against the classes of bad input (missing, empty, blank-only, non-UTF-8 and
folder inputs; broken model folders, tokenizer files and configs; every numeric flag with values
out of its range; existing and unwritable outputs; resuming with other data; non-ASCII and very
long text). Every case ends in one clear line naming the problem (exit 2, no traceback) or in the
correct output."""
import json
import os
import shutil

import pytest
import torch

from cli_cases import BROKEN, NON_UTF8, bad_input, assert_error, assert_ok, broken_copy, run_cli, write
from test_translation_training import write_corpus

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: threads only add overhead

CORPUS = "".join(f"the cat sat on mat number {i}. 我爱中国 😀\n" for i in range(200))
CJK = ["我", "爱", "中", "国", "😀"]


def gpt_folder(path, tokenizer, n_positions=32):
    """A random test-size GPT saved with its tokenizer, as gpt-train writes OUT/model."""
    from bertlab.interop.hf_gpt2 import save_pretrained
    from bertlab.models import GPT, GPTConfig
    eos = tokenizer.eos_token_id or 0
    config = GPTConfig.preset("test", vocab_size=tokenizer.vocab_size, n_positions=n_positions, bos_token_id=eos,
                              eos_token_id=eos)
    torch.manual_seed(0)
    save_pretrained(GPT(config).eval(), str(path), tokenizer)
    return str(path)


@pytest.fixture(scope="module")
def f(tmp_path_factory):
    """Random tiny GPTs (characters, byte-level BPE, and characters that are all Chinese or emoji),
    a random tiny translation model whose sources hold 15 tokens, text files and a parallel corpus."""
    from bertlab.interop.translation_folder import save_translation_model
    from bertlab.models.transformer import Seq2SeqTransformer, TransformerConfig
    from bertlab.tokenization.bpe import ByteLevelBPETokenizer
    from bertlab.tokenization.char_level import CharTokenizer
    from bertlab.tokenization.subword import SubwordTokenizer
    root = tmp_path_factory.mktemp("gen-tr")
    lines = CORPUS.splitlines()
    f = {"root": root, "corpus": write(root / "corpus.txt", CORPUS),
         "char": gpt_folder(root / "gpt-char", CharTokenizer.train(lines)),
         "bpe": gpt_folder(root / "gpt-bpe", ByteLevelBPETokenizer.train(lines, 300, min_frequency=1)),
         "cjk": gpt_folder(root / "gpt-cjk", CharTokenizer(CJK)),
         "sentences": write(root / "sentences.de", "die datei öffnen\nspeichern\n")}
    tokenizer = SubwordTokenizer.train(["die datei öffnen speichern", "open the file save 我爱中国"], 60, 1)
    config = TransformerConfig.preset("test", source_vocab_size=len(tokenizer), target_vocab_size=len(tokenizer),
                                      share_embeddings=True, max_position_embeddings=16)
    torch.manual_seed(0)
    f["translation"] = str(root / "translation")
    save_translation_model(f["translation"], Seq2SeqTransformer(config).eval(), tokenizer, tokenizer,
                           {"source_lang": "de", "target_lang": "en"})
    (root / "pairs").mkdir()
    f["pairs"] = str(write_corpus(root / "pairs"))
    return f


def gpt_train(f, out, *extra):
    return ["gpt-train", f["corpus"], "--out", out, "--tokenizer", "char", "--preset", "test", "--block-size", "16",
            "--batch-size", "4", "--max-steps", "1", "--eval-interval", "1", "--warmup", "1", "--device", "cpu",
            "--quiet", *extra]


def translate_train(data, out, *extra):
    return ["translate-train", "--data", data, "--src", "en", "--tgt", "de", "--out", out, "--preset", "test",
            "--joint-vocab", "--vocab-size", "80", "--min-frequency", "1", "--max-tokens", "64", "--max-steps", "1",
            "--warmup", "1", "--eval-interval", "1", "--bleu-sentences", "2", "--device", "cpu", "--quiet", *extra]


# ---- input files: missing, empty, blank-only, non-UTF-8, a folder -----------------------------------



def reading(f, path, out):
    """Each command reading `path` as its text input."""
    return {"generate": ["generate", "--model", f["char"], "--prompts", path, "-n", "2"],
            "translate": ["translate", path, "--model", f["translation"]],
            "translate --ref": ["translate", write(os.path.join(f["root"], "no-lines.txt"), ""), "--model",
                                f["translation"], "--ref", path],  # an empty input: /dev/null is refused (not a file)
            "gpt-train": gpt_train(f, out)[:1] + [path] + gpt_train(f, out)[2:],
            "translate-train": translate_train(f["pairs"], out)[:1]
            + ["--train-src", path, "--train-tgt", os.path.join(f["pairs"], "train.de"),
               "--valid-src", os.path.join(f["pairs"], "valid.en"), "--valid-tgt", os.path.join(f["pairs"], "valid.de")]
            + translate_train(f["pairs"], out)[7:]}


# what each command answers; a string: the correct standard output (exit 0)
EXPECTED = {
    ("generate", "missing"): ["input.txt", "no such file"],
    ("generate", "empty"): ["input.txt: the file is empty"],
    ("generate", "blank-only"): "\n  \n\t\n",  # a blank prompt gives its line back, in order
    ("generate", "non-UTF-8"): ["input.txt:2: not valid UTF-8"],
    ("generate", "folder"): ["input.txt", "is a folder"],
    ("translate", "missing"): ["input.txt", "no such file"],
    ("translate", "empty"): "",  # nothing in, nothing out (a filter)
    ("translate", "blank-only"): "\n\n\n",  # a blank line is translated as a blank line
    ("translate", "non-UTF-8"): ["input.txt:2: not valid UTF-8"],
    ("translate", "folder"): ["input.txt", "is a folder"],
    ("translate --ref", "missing"): ["input.txt", "no such file"],
    ("translate --ref", "empty"): ["no lines, so nothing to score against", "input.txt"],
    ("translate --ref", "blank-only"): ["input.txt has 3 lines, the input 0"],
    ("translate --ref", "non-UTF-8"): ["input.txt:2: not valid UTF-8"],
    ("translate --ref", "folder"): ["input.txt", "is a folder"],
    ("gpt-train", "missing"): ["input.txt: no such file"],
    ("gpt-train", "empty"): ["input.txt: the file is empty"],
    ("gpt-train", "blank-only"): ["input.txt: has no text (only blank lines)"],
    ("gpt-train", "non-UTF-8"): ["input.txt:2: not valid UTF-8"],
    ("gpt-train", "folder"): ["input.txt: is a directory"],
    ("translate-train", "missing"): ["input.txt: no such file"],
    ("translate-train", "empty"): ["input.txt: the file is empty"],
    ("translate-train", "blank-only"): ["misaligned parallel files", "input.txt has 3 lines"],
    ("translate-train", "non-UTF-8"): ["input.txt:2: not valid UTF-8"],
    ("translate-train", "folder"): ["input.txt", "is a folder"],
}


@pytest.mark.parametrize("command, kind", sorted(EXPECTED))
def test_bad_input_files(f, tmp_path, command, kind):
    path = bad_input(tmp_path / "input.txt", kind)
    result = run_cli(*reading(f, path, str(tmp_path / "out"))[command])
    expected = EXPECTED[command, kind]
    if isinstance(expected, str):
        assert assert_ok(result).out == expected
    else:
        assert_error(result, *expected)
        assert not os.path.exists(tmp_path / "out" / "checkpoint.pt")


def test_translate_train_with_blank_only_pairs_has_nothing_to_learn(f, tmp_path):
    data = tmp_path / "blank"
    data.mkdir()
    for name in ("train.en", "train.de", "valid.en", "valid.de"):
        write(data / name, "\n  \n\t\n")
    assert_error(run_cli(*translate_train(str(data), tmp_path / "out")), "train.en", "no pairs left")


def test_generate_and_translate_read_standard_input_and_blank_lines_stay_in_place(f):
    result = assert_ok(run_cli("translate", "--model", f["translation"], "--beam", "2", stdin=b"die datei\n\nspeichern\n"))
    lines = result.out.split("\n")
    assert len(lines) == 4 and lines[1] == "" and lines[3] == "" and lines[0] and lines[2]
    nbest = assert_ok(run_cli("translate", "--model", f["translation"], "--beam", "2", "--nbest", "2",
                              stdin=b"\ndie datei\n")).out.splitlines()
    assert nbest[:2] == ["1\tnan\t", "1\tnan\t"] and [line.split("\t")[0] for line in nbest[2:]] == ["2", "2"]
    assert_error(run_cli("translate", "--model", f["translation"], stdin=NON_UTF8), "<stdin>:2: not valid UTF-8")


# ---- model folders: broken weights and configs, tokenizer files, a folder of another kind ------------

WEIGHTS_OR_CONFIG = {"truncated-weights": "model.safetensors", "garbage-weights": "model.safetensors",
                     "nan-weights": "NaN", "garbage-config": "config.json", "missing-config": "config.json",
                     "missing-weights": "model.safetensors"}


@pytest.mark.parametrize("how", BROKEN)
@pytest.mark.parametrize("command", ["generate", "translate"])
def test_broken_model_folders(f, tmp_path, command, how):
    folder = broken_copy(f["char"] if command == "generate" else f["translation"], tmp_path, how)
    argv = ["generate", "--model", folder, "hi", "-n", "2"] if command == "generate" else \
        ["translate", f["sentences"], "--model", folder]
    line = assert_error(run_cli(*argv), WEIGHTS_OR_CONFIG[how])
    assert f"broken-{how}" in line


def _edit_json(path, change):
    with open(path, encoding="utf-8") as fh:
        value = json.load(fh)
    write(path, json.dumps(change(value)))


def _config(**changes):
    return lambda folder: _edit_json(os.path.join(folder, "config.json"), lambda c: {**c, **changes})


def _remove(name):
    return lambda folder: os.remove(os.path.join(folder, name))


def _replace(name, text):
    return lambda folder: write(os.path.join(folder, name), text)


# (model, how it is broken, what the error names)
FOLDERS = {
    "bpe-no-vocab.json": ("bpe", _remove("vocab.json"), ["vocab.json"]),
    "bpe-no-merges.txt": ("bpe", _remove("merges.txt"), ["no tokenizer", "merges.txt"]),
    "bpe-garbage-vocab.json": ("bpe", _replace("vocab.json", '{"a": 1,'), ["vocab.json:1: not valid JSON"]),
    "bpe-vocab.json-a-list": ("bpe", _replace("vocab.json", '["a", "b"]'), ["vocab.json", "expected a JSON object"]),
    "bpe-vocab.json-text-ids": ("bpe", lambda d: _edit_json(os.path.join(d, "vocab.json"),
                                                            lambda v: {**v, "!": "one"}), ["vocab.json", "'!'"]),
    "bpe-merge-of-unknown-pieces": ("bpe", _replace("merges.txt", "#version: 0.2\nQQ ZZ\n"),
                                    ["merges.txt", "merge 1", "vocab.json lacks"]),
    "bpe-merges.txt-not-UTF-8": ("bpe", _replace("merges.txt", b"#version: 0.2\n\xff \xfe\n"),
                                 ["merges.txt:2: not valid UTF-8"]),
    "char-no-chars.json": ("char", _remove("chars.json"), ["no tokenizer", "chars.json"]),
    "char-chars.json-of-numbers": ("char", _replace("chars.json", "[1, 2, 3]"), ["chars.json", "character list"]),
    "char-chars.json-reordered": ("char", lambda d: _edit_json(os.path.join(d, "chars.json"),
                                                               lambda c: c[:1] + c[1:][::-1]), ["chars.json"]),
    "char-fewer-chars-than-the-model": ("char", lambda d: _edit_json(os.path.join(d, "chars.json"), lambda c: c[:-1]),
                                        ["tokenizer has", "the model"]),
    "gpt-n_head-0": ("char", _config(n_head=0), ["config.json", "n_head 0: must be at least 1"]),
    "gpt-n_embd-not-a-multiple": ("char", _config(n_embd=33), ["config.json", "n_embd 33", "multiple"]),
    "gpt-n_layer-text": ("char", _config(n_layer="two"), ["config.json", "n_layer is a string ('two')"]),
    "gpt-dropout-2": ("char", _config(resid_pdrop=2.0), ["config.json", "resid_pdrop 2.0"]),
    "gpt-unknown-activation": ("char", _config(activation_function="swish9"), ["config.json", "swish9"]),
    "gpt-vocab-not-the-weights'": ("char", _config(vocab_size=500), ["does not fit", "wte.weight"]),
    "gpt-a-bert-config": ("char", _config(model_type="bert"), ["config.json", "'bert' model", "not a GPT"]),
    "translation-no-source_tokenizer": ("translation", lambda d: shutil.rmtree(os.path.join(d, "source_tokenizer")),
                                        ["no source_tokenizer"]),
    "translation-no-merges.txt": ("translation", _remove("target_tokenizer/merges.txt"), ["merges.txt"]),
    "translation-garbage-vocab.json": ("translation", _replace("source_tokenizer/vocab.json", "{"),
                                       ["vocab.json:1: not valid JSON"]),
    "translation-vocab-of-another-size": ("translation", lambda d: _edit_json(
        os.path.join(d, "target_tokenizer", "vocab.json"), lambda v: {**v, "extra": len(v)}),
                                          ["target vocabulary has", "the model"]),
    "translation-heads-0": ("translation", _config(attention_heads=0), ["config.json", "attention_heads 0"]),
    "translation-d_model-not-the-weights": ("translation", _config(d_model=64, attention_heads=2),
                                            ["does not fit config.json", "has shape"]),
    "translation-eos-outside-vocab": ("translation", _config(eos_token_id=10_000), ["config.json", "eos_token_id"]),
}


@pytest.mark.parametrize("name", sorted(FOLDERS))
def test_broken_tokenizers_and_configs(f, tmp_path, name):
    model, breaking, needles = FOLDERS[name]
    folder = str(tmp_path / "model")
    shutil.copytree(f[model], folder)
    breaking(folder)
    argv = ["translate", f["sentences"], "--model", folder] if model == "translation" else \
        ["generate", "--model", folder, "hi", "-n", "2"]
    assert_error(run_cli(*argv), *needles)


def test_a_folder_of_another_kind(f, minilm_dir):
    assert_error(run_cli("generate", "--model", minilm_dir, "hi"), "config.json", "'bert' model", "not a GPT")
    # refused from the folder's files before anything loads, naming the file that says what it is
    assert_error(run_cli("translate", f["sentences"], "--model", minilm_dir), "config.json", "'bert' model",
                 "not a translation model")
    assert_error(run_cli("generate", "--model", f["translation"], "hi"), "translation.json", "'translation' model",
                 "not a GPT")
    assert_error(run_cli("translate", f["sentences"], "--model", f["char"]), "config.json", "'gpt' model",
                 "not a translation model")


# ---- numbers: every numeric flag, out of its range ------------------------------------------------------

def generate_args(f, tmp_path):
    return ["generate", "--model", f["char"], "hi", "-n", "2"]


def translate_args(f, tmp_path):
    return ["translate", f["sentences"], "--model", f["translation"]]


def gpt_train_args(f, tmp_path):
    return gpt_train(f, tmp_path / "out")


def translate_train_args(f, tmp_path):
    return translate_train(f["pairs"], tmp_path / "out")


COMMANDS = {"generate": generate_args, "translate": translate_args, "gpt-train": gpt_train_args,
            "translate-train": translate_train_args}
# (command, extra flags, what the error says)
NUMBERS = [
    ("generate", ["-n", "-1"], "-n/--max-new-tokens: -1: must be at least 1"),
    ("generate", ["-n", "0"], "-n/--max-new-tokens: 0"),
    ("generate", ["-n", "2.5"], "-n/--max-new-tokens: '2.5' is not a whole number"),
    ("generate", ["--temperature", "-1"], "--temperature: -1: must be at least 0"),
    ("generate", ["--temperature", "nan"], "--temperature: nan: must be a finite number"),
    ("generate", ["--temperature", "inf"], "--temperature: inf: must be a finite number"),
    ("generate", ["--top-k", "-1"], "--top-k: -1"),
    ("generate", ["--top-p", "0"], "--top-p: 0: must be more than 0"),
    ("generate", ["--top-p", "1.5"], "--top-p: 1.5: must be at most 1"),
    ("generate", ["--top-p", "nan"], "--top-p: nan"),
    ("generate", ["--repetition-penalty", "0"], "--repetition-penalty: 0: must be more than 0"),
    ("generate", ["--repetition-penalty", "-1.2"], "--repetition-penalty: -1.2"),
    ("generate", ["--batch-size", "0"], "--batch-size: 0: must be at least 1"),
    ("generate", ["--seed", "-1"], "--seed: -1"),
    ("generate", ["--stop", ""], "stop strings must be non-empty"),
    ("translate", ["--beam", "0"], "--beam: 0: must be at least 1"),
    ("translate", ["--beam", "-4"], "--beam: -4"),
    ("translate", ["--nbest", "0"], "--nbest: 0: must be at least 1"),
    ("translate", ["--beam", "2", "--nbest", "3"], "--nbest 3 needs --beam 3"),
    ("translate", ["--batch-size", "0"], "--batch-size: 0"),
    ("translate", ["--max-len", "0"], "--max-len: 0"),
    ("translate", ["--max-len-a", "-1"], "--max-len-a: -1"),
    ("translate", ["--max-len-b", "-1"], "--max-len-b: -1"),
    ("translate", ["--length-penalty", "nan"], "--length-penalty: nan"),
    ("translate", ["--length-penalty", "-1"], "--length-penalty: -1"),
    ("gpt-train", ["--vocab-size", "0"], "--vocab-size: 0"),
    ("gpt-train", ["--tokenizer", "bpe", "--vocab-size", "10"], "vocab_size 10: a byte-level BPE needs at least 257"),
    ("gpt-train", ["--val-fraction", "0"], "--val-fraction: 0: must be more than 0"),
    ("gpt-train", ["--val-fraction", "1"], "val_fraction 1.0: must be more than 0 and less than 1"),
    ("gpt-train", ["--val-fraction", "nan"], "--val-fraction: nan"),
    ("gpt-train", ["--batch-size", "0"], "--batch-size: 0"),
    ("gpt-train", ["--block-size", "0"], "--block-size: 0"),
    ("gpt-train", ["--block-size", "100000"], "fewer than a block of 100001; use more text or a smaller --block-size"),
    ("gpt-train", ["--grad-accum", "0"], "--grad-accum: 0"),
    ("gpt-train", ["--lr", "0"], "--lr: 0: must be more than 0"),
    ("gpt-train", ["--lr", "-0.001"], "--lr: -0.001"),
    ("gpt-train", ["--lr", "inf"], "--lr: inf: must be a finite number"),
    ("gpt-train", ["--warmup", "-1"], "--warmup: -1"),
    ("gpt-train", ["--weight-decay", "-0.1"], "--weight-decay: -0.1"),
    ("gpt-train", ["--max-steps", "-1"], "--max-steps: -1: must be at least 1"),
    ("gpt-train", ["--max-steps", "0"], "--max-steps: 0"),
    ("gpt-train", ["--max-minutes", "0"], "--max-minutes: 0: must be more than 0"),
    ("gpt-train", ["--max-minutes", "-5"], "--max-minutes: -5"),
    ("gpt-train", ["--eval-interval", "0"], "--eval-interval: 0"),
    ("gpt-train", ["--eval-tokens", "0"], "--eval-tokens: 0"),
    ("gpt-train", ["--n-layer", "0"], "--n-layer: 0"),
    ("gpt-train", ["--n-embd", "-8"], "--n-embd: -8"),
    ("gpt-train", ["--n-head", "0"], "--n-head: 0"),
    ("gpt-train", ["--n-embd", "30", "--n-head", "4"], "n_embd 30 is not a multiple of n_head 4"),
    ("gpt-train", ["--dropout", "1.5"], "--dropout: 1.5: must be less than 1"),
    ("gpt-train", ["--dropout", "1"], "--dropout: 1: must be less than 1"),
    ("gpt-train", ["--seed", "-1"], "--seed: -1"),
    ("translate-train", ["--max-tokens", "0"], "--max-tokens: 0"),
    ("translate-train", ["--max-tokens", "4"], "--max-tokens 4: the longest pair needs"),
    ("translate-train", ["--grad-accum", "0"], "--grad-accum: 0"),
    ("translate-train", ["--lr", "0"], "--lr: 0: must be more than 0"),
    ("translate-train", ["--lr", "nan"], "--lr: nan"),
    ("translate-train", ["--warmup", "-1"], "--warmup: -1"),
    ("translate-train", ["--label-smoothing", "-0.1"], "--label-smoothing: -0.1"),
    ("translate-train", ["--label-smoothing", "1.5"], "--label-smoothing: 1.5: must be less than 1"),
    ("translate-train", ["--label-smoothing", "1"], "--label-smoothing: 1: must be less than 1"),
    ("translate-train", ["--clip-norm", "-1"], "--clip-norm: -1: must be at least 0"),
    ("translate-train", ["--max-steps", "-1"], "--max-steps: -1"),
    ("translate-train", ["--max-minutes", "0"], "--max-minutes: 0"),
    ("translate-train", ["--eval-interval", "0"], "--eval-interval: 0"),
    ("translate-train", ["--save-interval", "0"], "--save-interval: 0"),
    ("translate-train", ["--bleu-sentences", "-1"], "--bleu-sentences: -1"),
    ("translate-train", ["--average-last", "-1"], "--average-last: -1"),
    ("translate-train", ["--vocab-size", "0"], "--vocab-size: 0"),
    ("translate-train", ["--min-frequency", "0"], "--min-frequency: 0"),
    ("translate-train", ["--max-sentence-tokens", "0"], "--max-sentence-tokens: 0"),
    ("translate-train", ["--max-positions", "0"], "--max-positions: 0"),
    ("translate-train", ["--max-positions", "2"], "--max-positions 2: must be at least 3"),
    ("translate-train", ["--layers", "0"], "--layers: 0"),
    ("translate-train", ["--d-model", "0"], "--d-model: 0"),
    ("translate-train", ["--heads", "-2"], "--heads: -2"),
    ("translate-train", ["--d-model", "30", "--heads", "4"], "d_model 30 is not a multiple of attention_heads 4"),
    ("translate-train", ["--dropout", "1.5"], "--dropout: 1.5"),
    ("translate-train", ["--seed", "-1"], "--seed: -1"),
]


@pytest.mark.parametrize("command, extra, needle", NUMBERS, ids=[" ".join([c, *e]) for c, e, _ in NUMBERS])
def test_numbers_out_of_range(f, tmp_path, command, extra, needle):
    assert_error(run_cli(*COMMANDS[command](f, tmp_path), *extra), needle)
    assert not os.path.exists(tmp_path / "out" / "checkpoint.pt")


def test_library_settings_refuse_what_the_flags_refuse():
    """Python callers get the checks without the command line; a negative clip norm above all, which
    would multiply the gradients by a negative factor and train uphill."""
    from bertlab.inference.generate import SamplingOptions
    from bertlab.inference.translate import translate_ids
    from bertlab.models import GPT, GPTConfig
    from bertlab.models.transformer import Seq2SeqTransformer, TransformerConfig
    from bertlab.training.engine import train_step
    from bertlab.lm.objective import GPTSettings
    from bertlab.translation.objective import TranslationSettings
    gpt = GPTConfig.preset("test", n_positions=16)
    for bad, needle in (({"grad_clip": -1.0}, "grad_clip -1.0"), ({"batch_size": 0}, "batch_size 0"),
                        ({"lr": float("nan")}, "lr nan"), ({"block_size": 32}, "block_size 32: more than"),
                        ({"max_steps": -1}, "max_steps -1"), ({"schedule": "step"}, "unknown schedule")):
        with pytest.raises(ValueError, match=needle):
            GPTSettings(data="d", out="o", model=gpt, **{"block_size": 16, **bad})
    translation = TransformerConfig.preset("test")
    for bad, needle in (({"grad_clip": -1.0}, "grad_clip -1.0"), ({"max_tokens": 0}, "max_tokens 0"),
                        ({"label_smoothing": 2.0}, "label_smoothing 2.0"), ({"schedule": "cosine"}, "schedule")):
        with pytest.raises(ValueError, match=needle):
            TranslationSettings(out="o", model=translation, **bad)
    for bad, needle in (({"temperature": float("nan")}, "temperature nan"), ({"top_p": 0.0}, "top_p 0.0"),
                        ({"top_k": -1}, "top_k -1"), ({"repetition_penalty": 0.0}, "repetition_penalty 0.0"),
                        ({"max_new_tokens": -1}, "max_new_tokens -1"), ({"stop": ("",)}, "stop strings")):
        with pytest.raises(ValueError, match=needle):
            SamplingOptions(**bad)
    model = GPT(gpt)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    with pytest.raises(ValueError, match="grad_clip -1"):
        train_step(model, optimizer, scheduler, lambda: None, grad_clip=-1.0)
    seq2seq = Seq2SeqTransformer(translation)
    for bad, needle in (({"beam_size": 0}, "beam_size 0"), ({"beam_size": 2, "nbest": 3}, "nbest 3"),
                        ({"batch_size": 0}, "batch_size 0"), ({"length_penalty": float("inf")}, "length_penalty inf")):
        with pytest.raises(ValueError, match=needle):
            translate_ids(seq2seq, [[5, 6]], **bad)
    with pytest.raises(ValueError, match="source 0 has 64 tokens, more than the model's 63"):
        translate_ids(seq2seq, [[5] * 64])


# ---- outputs: existing runs, resuming with other data, an output under a file ------------------------

def test_gpt_train_starts_over_only_when_asked_and_resumes_only_the_same_data(f, tmp_path):
    out = tmp_path / "run"
    first = write(tmp_path / "a.txt", CORPUS)
    other = write(tmp_path / "b.txt", "".join(f"zyx wvu {i} qqq\n" for i in range(200)))
    argv = gpt_train(f, out)
    argv[1] = first
    assert_ok(run_cli(*argv))
    assert "我" in json.loads((out / "model" / "chars.json").read_text(encoding="utf-8"))  # non-ASCII kept
    assert_error(run_cli(*argv), "--resume", "--overwrite")
    argv[1] = other  # --overwrite: the tokenizer and token files come from the new file, not OUT/data
    assert_ok(run_cli(*argv, "--overwrite"))
    assert set(json.loads((out / "model" / "chars.json").read_text(encoding="utf-8"))) == set("\ufffd zyxwvuq0123456789")
    assert json.loads((out / "inputs.json").read_text())["files"][0]["path"] == other
    argv[1] = first
    assert_error(run_cli(*argv, "--resume", "--max-steps", "2"), "a.txt is not the file", "b.txt", "--overwrite")
    argv[1] = other
    assert_error(run_cli(*argv, "--resume", "--max-steps", "2", "--val-fraction", "0.1"),
                 "prepared with --val-fraction 0.05, not 0.1")
    assert_error(run_cli(*argv, "--resume", "--max-steps", "2", "--tokenizer", "bpe"), "prepared with --tokenizer char")
    moved = shutil.copy(other, tmp_path / "moved.txt")  # the same bytes elsewhere are the same data
    argv[1] = moved
    assert_ok(run_cli(*argv, "--resume", "--max-steps", "2"))
    assert json.loads((out / "summary.json").read_text())["steps"] == 2
    os.remove(out / "inputs.json")
    assert_error(run_cli(*argv, "--resume", "--max-steps", "3"), "inputs.json is missing", "--overwrite")


def test_translate_train_resumes_only_the_same_data_and_vocabulary(f, tmp_path):
    out = tmp_path / "run"
    assert_ok(run_cli(*translate_train(f["pairs"], out)))
    assert_error(run_cli(*translate_train(f["pairs"], out)), "--resume", "--overwrite")
    (tmp_path / "other").mkdir()
    other = str(write_corpus(tmp_path / "other", seed=1))
    assert_error(run_cli(*translate_train(other, out, "--resume", "--max-steps", "2")), "train.en is not the file",
                 "--overwrite")
    assert_error(run_cli(*translate_train(f["pairs"], out, "--resume", "--max-steps", "2", "--vocab-size", "90")),
                 "prepared with --vocab-size 80, not 90")
    assert_ok(run_cli(*translate_train(f["pairs"], out, "--resume", "--max-steps", "2")))
    assert_ok(run_cli(*translate_train(other, out, "--overwrite")))
    assert json.loads((out / "inputs.json").read_text())["files"][0]["path"] == os.path.join(other, "train.en")


@pytest.mark.parametrize("command", ["gpt-train", "translate-train"])
def test_an_output_under_a_file(f, tmp_path, command):
    blocker = write(tmp_path / "blocker", "I am a file\n")
    argv = gpt_train(f, os.path.join(blocker, "out")) if command == "gpt-train" else \
        translate_train(f["pairs"], os.path.join(blocker, "out"))
    assert_error(run_cli(*argv), "blocker is a file, not a folder")


def test_translate_train_defaults_are_sized_for_a_cpu():
    """A plain `translate-train` must finish on a 2-core CPU in minutes (it defaulted to the paper's
    100,000 GPU steps of 4,096 tokens), and its --help says how long."""
    from bertlab.cli import build_parser
    args = build_parser().parse_args(["translate-train", "--data", "d", "--src", "de", "--tgt", "en", "--out", "o"])
    assert (args.preset, args.max_tokens, args.warmup, args.lr) == ("small", 1024, 100, 1e-3)
    help_text = run_cli("translate-train", "--help").out
    assert "optimizer steps (500;" in help_text
    assert "minutes on 2 CPU cores" in " ".join(help_text.split())


# ---- text: non-ASCII prompts, stop strings and sentences; very long ones ------------------------------

@pytest.mark.parametrize("model", ["char", "bpe", "cjk"])
def test_generate_keeps_every_unicode_character(f, model):
    for prompt in ("我爱", "😀 中国", "ünïcödé the"):
        out = assert_ok(run_cli("generate", "--model", f[model], prompt, "-n", "4")).out
        assert out.startswith(prompt) and out.endswith("\n"), (prompt, out)
    escaped = assert_ok(run_cli("generate", "--model", f[model], "\\u6211\\u7231\\n", "-n", "2")).out
    assert escaped.startswith("我爱\n")


def test_generate_stops_at_a_chinese_stop_string(f):
    """Every token of the cjk model is Chinese or an emoji: its sampled text (a fixed seed) is cut
    before a stop string taken from that text, given as itself and as an escape."""
    sampled = ["--model", f["cjk"], "我爱", "-n", "8", "--temperature", "2", "--seed", "0"]
    out = assert_ok(run_cli("generate", *sampled)).out
    continuation = out[len("我爱"):-1]
    assert len(continuation) == 8 and set(continuation) <= set(CJK)
    stop = continuation[2:4]  # a two-character stop that first occurs after a character or two
    expected = "我爱" + continuation[:continuation.index(stop)] + "\n"
    assert len(expected) > len("我爱\n")
    assert assert_ok(run_cli("generate", *sampled, "--stop", stop)).out == expected
    escape = "".join("\\U%08x" % ord(c) for c in stop)
    assert assert_ok(run_cli("generate", *sampled, "--stop", escape, "--stop", "never")).out == expected


def test_generate_prompts_file_keeps_order_blank_lines_and_characters(f, tmp_path):
    prompts = write(tmp_path / "prompts.txt", "我爱\n\nthe cat\n  \n😀\n")
    single = {p: assert_ok(run_cli("generate", "--model", f["char"], p, "-n", "3")).out.rstrip("\n")
              for p in ("我爱", "the cat", "😀")}
    for batch_size in ("1", "2", "8"):
        out = assert_ok(run_cli("generate", "--model", f["char"], "--prompts", prompts, "-n", "3", "--batch-size",
                                batch_size)).out
        assert out.split("\n") == [single["我爱"], "", single["the cat"], "  ", single["😀"], ""]
    one = write(tmp_path / "one.txt", "我爱\n")  # one prompt in a file: one line, as for many
    assert assert_ok(run_cli("generate", "--model", f["char"], "--prompts", one, "-n", "3")).out == single["我爱"] + "\n"


def test_generate_refuses_what_does_not_fit_the_model(f, tmp_path):
    long_prompt = "the cat sat " * 50
    assert_error(run_cli("generate", "--model", f["char"], long_prompt, "-n", "2"), "PROMPT: the prompt has 600 tokens",
                 "32 positions", "the prompt alone fills them")
    assert_error(run_cli("generate", "--model", f["char"], "hi"), "PROMPT", "-n 100", "use -n 30 or less")
    prompts = write(tmp_path / "prompts.txt", "fine\n" + long_prompt + "\n")
    assert_error(run_cli("generate", "--model", f["char"], "--prompts", prompts, "-n", "2"), "prompts.txt:2",
                 "600 tokens")
    assert_error(run_cli("generate", "--model", f["char"], "   "), "PROMPT is blank")
    assert_error(run_cli("generate", "--model", f["char"]), "give either a PROMPT or --prompts")


def test_translate_non_ascii_and_very_long_lines(f, tmp_path):
    lines = ["die datei öffnen", "我爱中国", "😀", "speichern " * 40, "die datei"]
    path = write(tmp_path / "in.de", "".join(line + "\n" for line in lines))
    result = assert_ok(run_cli("translate", path, "--model", f["translation"], "--beam", "2"))
    assert len(result.out.split("\n")) == len(lines) + 1
    assert "in.de: 1 line(s) longer than the model's 15 source tokens were cut to fit: line 4" in result.err
    greedy = assert_ok(run_cli("translate", path, "--model", f["translation"], "--beam", "1"))
    assert len(greedy.out.split("\n")) == len(lines) + 1 and "line 4" in greedy.err
    refs = write(tmp_path / "ref.en", "open the file\nI love China\n\nsave\nthe file\n")
    scored = assert_ok(run_cli("translate", path, "--model", f["translation"], "--ref", refs))
    assert "BLEU" in scored.err and "chrF" in scored.err
    assert_error(run_cli("translate", path, "--model", f["translation"], "--ref", f["sentences"]),
                 "sentences.de has 2 lines, the input 5")
