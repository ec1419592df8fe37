"""The classes of bad input that every command meets, across all seventeen subcommands at once: a
missing input, an output whose parent is a file, and --help / --version without torch. The
classes particular to a family (empty, blank-only and non-UTF-8 inputs, broken model folders,
invalid numbers, existing outputs, non-ASCII and very long text) are in test_hardening_*.py."""
import argparse
import json
import os
import subprocess
import sys

import pytest
import torch

from bertlab.cli import COMMANDS
from cli_cases import assert_error, assert_ok, run_cli, write
from test_translation_training import write_corpus

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: threads only add overhead

TEXT = "the cat sat on the mat .\nthe dog ran .\n"
GOOGLE_FOLDER = os.path.join(os.path.dirname(__file__), "..", "data", "tf_checkpoints", "uncased_L-2_H-16_A-4")


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """Tiny models of every kind (BERT with its MLM head, GPT, translation, a fine-tuned classifier),
    a vocabulary, text files and pretraining shards: what the commands read."""
    from bertlab import BertConfig, BertForPreTraining, BertTokenizer, save_pretrained
    root = tmp_path_factory.mktemp("matrix")
    words = "the cat dog sat ran on a mat . , tired".split()
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=64)
    bert = str(root / "bert")
    save_pretrained(BertForPreTraining(config).eval(), bert, BertTokenizer({t: i for i, t in enumerate(vocab)}))
    f = {"bert": bert, "vocab": os.path.join(bert, "vocab.txt"), "text": write(root / "text.txt", TEXT),
         "root": str(root)}
    f["table"] = write(root / "train.tsv", "sentence\tlabel\n" + "".join(
        f"{s}\t{i % 2}\n" for i, s in enumerate(["the cat sat", "the dog ran", "a cat ran", "the mat"] * 2)))
    assert_ok(run_cli("finetune", "--task", "classify", "--model", bert, "--train", f["table"], "--dev", f["table"],
                      "--epochs", "1", "--batch-size", "4", "--quiet", "-o", root / "cls", "--device", "cpu"))
    f["classifier"] = str(root / "cls" / "model")
    corpus = write(root / "corpus.txt", "".join(f"line {i}: the quick brown fox {i % 7} jumps\n" for i in range(300)))
    assert_ok(run_cli("gpt-train", corpus, "--out", root / "gpt", "--tokenizer", "char", "--n-layer", "1",
                      "--n-embd", "16", "--n-head", "2", "--block-size", "16", "--batch-size", "4", "--max-steps", "1",
                      "--warmup", "1", "--eval-interval", "1", "--eval-tokens", "100", "--device", "cpu"))
    f["gpt"] = str(root / "gpt" / "model")
    (root / "pairs").mkdir()
    data = f["pairs"] = str(write_corpus(root / "pairs"))
    assert_ok(run_cli("translate-train", "--data", data, "--src", "en", "--tgt", "de", "--out", root / "tr",
                      "--joint-vocab", "--vocab-size", "80", "--min-frequency", "1", "--preset", "test",
                      "--max-tokens", "64", "--max-steps", "1", "--warmup", "1", "--eval-interval", "1",
                      "--bleu-sentences", "2", "--device", "cpu"))
    f["translation"] = str(root / "tr" / "model")
    sentences = write(root / "doc.txt", "".join(f"the cat sat on the mat {i} .\nthe dog ran .\n\n" for i in range(30)))
    assert_ok(run_cli("create-pretraining-data", sentences, "--vocab", bert, "-o", root / "shards",
                      "--max-seq-length", "16", "--max-predictions-per-seq", "2", "--dupe-factor", "1", "--workers", "1"))
    f["shards"] = str(root / "shards")
    assert_ok(run_cli("unilm-train", "--train-src", f["text"], "--train-tgt", f["text"], "--vocab", bert, "--layers", "1",
                      "--hidden", "16", "--heads", "2", "--intermediate", "32", "--max-steps", "1", "--batch-size", "2",
                      "--rouge-sentences", "0", "--max-source-tokens", "16", "--max-target-tokens", "8", "--quiet",
                      "--device", "cpu", "--out", root / "unilm"))
    f["unilm"] = str(root / "unilm" / "model")
    return f


def command_lines(f, source, out):
    """Each command reading `source` (a text file, or a folder for pretrain/translate-train) and
    writing under `out`; None where a command has no input file or no output."""
    return {
        "tokenize": (["tokenize", source, "--vocab", f["vocab"]], None),
        "embed": (["embed", source, "-o", out + ".npy", "--model", f["bert"]],
                  ["embed", f["text"], "-o", out + ".npy", "--model", f["bert"]]),
        "similar": (["similar", "cat", "--corpus", source, "--model", f["bert"]], None),
        "gpt-train": (["gpt-train", source, "--out", out, "--tokenizer", "char", "--max-steps", "1"],
                      ["gpt-train", f["text"], "--out", out, "--tokenizer", "char", "--max-steps", "1"]),
        "generate": (["generate", "--model", f["gpt"], "--prompts", source, "-n", "2"], None),
        "finetune": (["finetune", "--task", "classify", "--model", f["bert"], "--train", source, "--dev", f["table"],
                      "-o", out, "--quiet"],
                     ["finetune", "--task", "classify", "--model", f["bert"], "--train", f["table"], "--dev",
                      f["table"], "-o", out, "--quiet", "--max-steps", "1"]),
        "predict": (["predict", source, "--model", f["classifier"]],
                    ["predict", f["table"], "--model", f["classifier"], "-o", out + ".jsonl"]),
        "extract-features": (["extract-features", source, "--model", f["bert"], "-o", out + ".jsonl"],
                             ["extract-features", f["text"], "--model", f["bert"], "-o", out + ".jsonl"]),
        "fill-mask": (None, None),
        "attention": (None, ["attention", "--model", f["bert"], "-o", out + ".png", "the cat sat"]),
        "convert": (["convert", source, "-o", out], ["convert", GOOGLE_FOLDER, "-o", out]),
        "pretrain": (["pretrain", "--data", source, "--out", out, "--preset", "tiny", "--max-steps", "1"],
                     ["pretrain", "--data", f["shards"], "--out", out, "--preset", "tiny", "--max-steps", "1",
                      "--batch-size", "2"]),
        "vocab": (["vocab", source, "-o", out, "--vocab-size", "50"],
                  ["vocab", f["text"], "-o", out, "--vocab-size", "50"]),
        "create-pretraining-data": (["create-pretraining-data", source, "--vocab", f["vocab"], "-o", out],
                                    ["create-pretraining-data", f["text"], "--vocab", f["vocab"], "-o", out]),
        "data": (None, ["data", "python-docs", "-o", out]),
        "translate-train": (["translate-train", "--data", source, "--src", "en", "--tgt", "de", "--out", out],
                            ["translate-train", "--data", f["pairs"], "--src", "en", "--tgt", "de", "--out", out,
                             "--preset", "test", "--max-steps", "1", "--vocab-size", "80", "--min-frequency", "1"]),
        "translate": (["translate", source, "--model", f["translation"]],
                      ["translate", f["text"], "--model", f["translation"], "-o", out + ".txt"]
                      if _has_output_flag("translate") else None),
        "notes": (None, ["notes", "positions", "-o", out]),  # reads nothing; -o is the pictures' folder
        "serve": (["serve", "--model", f"m={source}"], None),  # answers HTTP; writes no file
        "export": (["export", source, "--onnx", out], ["export", f["bert"], "--onnx", out]),
        "unilm-train": (["unilm-train", "--train-src", source, "--train-tgt", f["text"], "--out", out],
                        ["unilm-train", "--train-src", f["text"], "--train-tgt", f["text"], "--out", out, "--vocab",
                         f["bert"], "--layers", "1", "--hidden", "16", "--heads", "2", "--intermediate", "32",
                         "--max-steps", "1", "--batch-size", "2", "--rouge-sentences", "0"]),
        "unilm-generate": (["unilm-generate", source, "--model", f["unilm"]], None),
        "distill": (["distill", "--teacher", f["classifier"], "--student-layers", "1", "--train", source, "-o", out],
                    ["distill", "--teacher", f["classifier"], "--student-layers", "1", "--train", f["table"], "--dev",
                     f["table"], "-o", out, "--max-steps", "1", "--quiet", "--device", "cpu"]),
        "word2vec": (["word2vec", "train", source, "-o", out, "--quiet"],
                     ["word2vec", "train", f["text"], "-o", out, "--min-count", "1", "--quiet", "--device", "cpu"]),
    }


def _has_output_flag(name):
    from bertlab.cli import build_parser
    sub = build_parser()._subparsers._group_actions[0].choices[name]
    return any("-o" in a.option_strings for a in sub._actions)


NAMES = [c.__name__.rsplit(".", 1)[1].replace("_", "-") for c in COMMANDS]


def test_the_table_covers_every_command(folders):
    assert sorted(command_lines(folders, "x", "y")) == sorted(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_a_missing_input_is_named(folders, name, tmp_path):
    missing = str(tmp_path / "no-such-input")
    argv = command_lines(folders, missing, str(tmp_path / "out"))[name][0]
    if argv is None:
        pytest.skip(f"{name} reads no input file")
    assert_error(run_cli(*argv), "no-such-input")


@pytest.mark.parametrize("name", NAMES)
def test_an_output_under_a_file_is_named(folders, name, tmp_path):
    blocker = write(tmp_path / "blocker", "I am a file\n")
    argv = command_lines(folders, "unused", os.path.join(blocker, "out"))[name][1]
    if argv is None:
        pytest.skip(f"{name} writes to standard output only")
    assert_error(run_cli(*argv), "blocker", "not a folder")


def test_help_and_version_of_every_command_without_torch():
    """`bertlab --help`, `--version` and each command's --help answer without importing torch (4-5 s
    of a short command's time), and so does tokenizing a line."""
    script = ("import sys\nfrom bertlab.cli import main\n"
              "for argv in %r:\n"
              "    try:\n        main(argv)\n    except SystemExit as e:\n        assert e.code == 0, (argv, e.code)\n"
              "print(json.dumps(sorted(m for m in ('torch', 'numpy', 'transformers') if m in sys.modules)))\n")
    argvs = [["--help"], ["--version"]] + [[name, "--help"] for name in NAMES]
    out = subprocess.run([sys.executable, "-c", "import json\n" + script % argvs], capture_output=True, text=True,
                         check=True).stdout
    assert json.loads(out.splitlines()[-1]) == []


def test_tokenize_without_torch(folders):
    script = ("import sys\nfrom bertlab.cli import main\nassert main(['tokenize', '--vocab', %r, %r]) == 0\n"
              "assert 'torch' not in sys.modules, 'torch was imported'\n") % (folders["vocab"], folders["text"])
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "the cat sat on the mat ."


def _all_subparsers(parser, path=()):
    """(path, parser) for every command and sub-subcommand (`data gettext`, ...)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*path, name), sub
                yield from _all_subparsers(sub, (*path, name))


def test_every_numeric_flag_of_every_command_is_checked():
    """No flag of any command takes a bare int or float: each numeric flag has one of cli.args'
    checked types, so 0, negative, nan and inf are refused by name (tested at their bad values in
    test_hardening_*.py). The one exception is a layer index, negative from the end, whose range
    is the model's and is checked once the model is loaded."""
    from bertlab.cli import args as cli_args
    from bertlab.cli import build_parser
    checked = {cli_args.positive_int, cli_args.nonnegative_int, cli_args.positive_float, cli_args.nonnegative_float,
               cli_args.fraction, cli_args.positive_fraction, cli_args.fraction_below_one}
    seen = 0
    for path, sub in _all_subparsers(build_parser()):
        for action in sub._actions:
            if action.type in (int, float) and (path, action.dest) != (("attention",), "layer"):
                raise AssertionError(f"bertlab {' '.join(path)} {action.option_strings}: unchecked {action.type}")
            seen += action.type in checked
    assert seen > 100
