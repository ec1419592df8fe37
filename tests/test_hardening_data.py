"""The hardening matrix of data preparation and pretraining: tokenize, vocab, data (english-corpus,
python-docs, gettext), create-pretraining-data and pretrain, each against the classes of bad input
(missing, empty, blank-only, non-UTF-8 and folder inputs; broken vocabularies, shard folders,
configs and model folders; every numeric flag with values out of its range; existing and
unwritable outputs; non-ASCII and very long text). Every case ends in one clear line naming the
problem (exit 2, no traceback) or in the correct output."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from bertlab.cli import args as cli_args
from bertlab.io import MARKER
from cli_cases import BROKEN, NON_UTF8, bad_input, assert_error, assert_ok, broken_copy, run_cli, write

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: threads only add overhead

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = "the cat dog sat ran on a mat . , tired".split()
DOCUMENTS = "".join("the cat sat on the mat .\nthe dog ran .\na cat , tired .\n\n" for _ in range(30))
SHARD_FLAGS = ["--max-seq-length", "16", "--max-predictions-per-seq", "2", "--dupe-factor", "1", "--workers", "1",
               "--quiet"]


@pytest.fixture(scope="module")
def f(tmp_path_factory):
    """A vocabulary (with its tiny BERT), a text of documents, shards made from it, a config that
    fits them, summaries and a gettext catalog: what the commands read."""
    import torch
    from bertlab import BertConfig, BertForPreTraining, BertTokenizer, save_pretrained
    from test_translation_data import write_catalog
    root = tmp_path_factory.mktemp("data-matrix")
    vocab = SPECIALS + WORDS
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=64)
    bert = str(root / "bert")
    save_pretrained(BertForPreTraining(config).eval(), bert, BertTokenizer({t: i for i, t in enumerate(vocab)}))
    config.to_json_file(root / "tiny.json")
    f = {"root": root, "bert": bert, "vocab": os.path.join(bert, "vocab.txt"), "config": str(root / "tiny.json"),
         "doc": write(root / "doc.txt", DOCUMENTS),
         "summaries": write(root / "summaries.txt", "".join(
             f"mod{i}.f: Does the first thing. Then the second thing.\nmod{i}.g: Ça marche, 中文也行.\n"
             for i in range(20)))}
    assert_ok(run_cli("create-pretraining-data", f["doc"], "--vocab", bert, "-o", root / "shards", *SHARD_FLAGS))
    f["shards"] = str(root / "shards")
    write_catalog(root / "locale", "de", "gui", [dict(msgid="Open the file", msgstr="Datei öffnen"),
                                                 dict(msgid="Save", msgstr="Speichern")])
    f["locale"] = str(root / "locale")
    return f


def pretrain(f, out, *extra):
    return ["pretrain", "--out", out, "--config", f["config"], "--max-steps", "1", "--batch-size", "2",
            "--device", "cpu", "--quiet", *extra]


# ---- input files: missing, empty, blank-only, non-UTF-8, a folder -----------------------------------



def reading(f, path, out):
    """Each command reading `path` as its text input."""
    return {"tokenize": ["tokenize", path, "--vocab", f["vocab"]],
            "vocab": ["vocab", path, "-o", out, "--vocab-size", "60", "--min-frequency", "1", "--quiet"],
            "create-pretraining-data": ["create-pretraining-data", path, "--vocab", f["vocab"], "-o", out, *SHARD_FLAGS],
            "data python-docs": ["data", "python-docs", "--summaries", path, "-o", out]}


# what each command answers; None: the correct output, checked below
EXPECTED = {
    ("tokenize", "missing"): ["input.txt", "no such file"],
    ("tokenize", "empty"): ["input.txt", "the file is empty"],
    ("tokenize", "blank-only"): None,  # one empty line per input line, as documented
    ("tokenize", "non-UTF-8"): ["input.txt:2: not valid UTF-8"],
    ("tokenize", "folder"): ["input.txt", "is a folder"],
    ("vocab", "missing"): ["input.txt: no such file"],
    ("vocab", "empty"): ["input.txt: has no text (the file is empty)"],
    ("vocab", "blank-only"): ["input.txt: has no text"],
    ("vocab", "non-UTF-8"): ["input.txt:2: not valid UTF-8"],
    ("vocab", "folder"): ["input.txt: is a folder"],
    ("create-pretraining-data", "missing"): ["input.txt: no such file"],
    ("create-pretraining-data", "empty"): ["no instances", "input.txt hold no text"],
    ("create-pretraining-data", "blank-only"): ["no instances", "input.txt hold no text"],
    ("create-pretraining-data", "non-UTF-8"): ["input.txt:2: not valid UTF-8"],
    ("create-pretraining-data", "folder"): ["input.txt: is a folder"],
    ("data python-docs", "missing"): ["--summaries", "input.txt: no such file"],
    ("data python-docs", "empty"): ["input.txt: the file is empty"],
    ("data python-docs", "blank-only"): ["no documents for train.txt", "nothing was written"],
    ("data python-docs", "non-UTF-8"): ["input.txt:2: not valid UTF-8"],
    ("data python-docs", "folder"): ["input.txt", "is a folder"],
}


@pytest.mark.parametrize("command, kind", sorted(EXPECTED))
def test_bad_input_files(f, tmp_path, command, kind):
    path = bad_input(tmp_path / "input.txt", kind)
    result = run_cli(*reading(f, path, str(tmp_path / "out"))[command])
    if EXPECTED[command, kind] is None:
        assert_ok(result)
        assert result.out == "\n\n\n"
    else:
        assert_error(result, *EXPECTED[command, kind])
        assert not os.path.exists(tmp_path / "out" / "train.txt")


def test_tokenize_reads_standard_input_and_refuses_an_empty_one(f):
    assert assert_ok(run_cli("tokenize", "--vocab", f["vocab"], stdin=b"the cat\n\nsat\n")).out == "the cat\n\nsat\n"
    assert_error(run_cli("tokenize", "--vocab", f["vocab"], stdin=b""), "<stdin>: the file is empty")
    assert_error(run_cli("tokenize", "--vocab", f["vocab"], stdin=NON_UTF8), "<stdin>:2: not valid UTF-8")


# ---- vocabularies: empty, without a special token, not UTF-8, duplicated, a garbled casing file --------

def vocab_lines(drop=()):
    return "".join(t + "\n" for t in SPECIALS + WORDS if t not in drop)


VOCABS = {"empty": ("", ["the vocabulary is empty"]),
          "no-unk": (vocab_lines(["[UNK]"]), ["no [UNK] token"]),
          "no-cls": (vocab_lines(["[CLS]"]), ["no [CLS] token"]),
          "no-sep": (vocab_lines(["[SEP]"]), ["no [SEP] token"]),
          "non-UTF-8": (vocab_lines().encode() + b"caf\xe9\n", ["line 17 is not valid UTF-8"]),
          "duplicate": (vocab_lines() + "cat\n", ["duplicate tokens", "'cat' on lines 7, 17"]),
          "missing": (None, ["vocab.txt"])}


@pytest.mark.parametrize("kind", sorted(VOCABS))
@pytest.mark.parametrize("command", ["tokenize", "create-pretraining-data"])
def test_broken_vocabularies(f, tmp_path, command, kind):
    text, needles = VOCABS[kind]
    vocab = str(tmp_path / "vocab.txt")
    if text is not None:
        write(vocab, text)
    argv = {"tokenize": ["tokenize", f["doc"], "--vocab", vocab],
            "create-pretraining-data": ["create-pretraining-data", f["doc"], "--vocab", vocab, "-o", tmp_path / "out",
                                        *SHARD_FLAGS]}[command]
    result = assert_error(run_cli(*argv), *needles)
    assert "vocab.txt" in result
    assert not os.path.exists(tmp_path / "out" / "meta.json")


def test_create_pretraining_data_needs_mask_and_a_readable_casing_file(f, tmp_path):
    folder = tmp_path / "v"
    folder.mkdir()
    write(folder / "vocab.txt", vocab_lines(["[MASK]"]))
    argv = ["create-pretraining-data", f["doc"], "--vocab", folder, "-o", tmp_path / "out", *SHARD_FLAGS]
    assert_error(run_cli(*argv), "vocab.txt", "no [MASK] token")
    write(folder / "vocab.txt", vocab_lines())
    write(folder / "tokenizer_config.json", '{"do_lower_case": tru')
    assert_error(run_cli(*argv), "tokenizer_config.json:1: not valid JSON")
    write(folder / "tokenizer_config.json", '{"do_lower_case": false}')
    assert_error(run_cli(*argv, "--uncased"), "tokenizer_config.json says do_lower_case=False")


# ---- shard folders: what pretrain reads ----------------------------------------------------------------

def _shard(folder, field="input_ids"):
    return os.path.join(folder, f"shard-0000.{field}.npy")


def _edit_meta(folder, **changes):
    path = os.path.join(folder, "meta.json")
    with open(path, encoding="utf-8") as fh:
        meta = json.load(fh)
    meta.update(changes)
    write(path, json.dumps(meta))


def _break_shards(folder, how):
    if how == "missing-meta":
        os.remove(os.path.join(folder, "meta.json"))
    elif how == "garbage-meta":
        write(os.path.join(folder, "meta.json"), '{"max_seq_length": 16,')
    elif how == "list-meta":
        write(os.path.join(folder, "meta.json"), "[1, 2]")
    elif how == "incomplete-meta":
        _edit_meta(folder, shards=None)
    elif how == "more-instances-than-rows":
        with open(os.path.join(folder, "meta.json"), encoding="utf-8") as fh:
            shards = json.load(fh)["shards"]
        shards[0]["instances"] += 5
        _edit_meta(folder, shards=shards)
    elif how == "truncated-shard":
        size = os.path.getsize(_shard(folder))
        with open(_shard(folder), "r+b") as fh:
            fh.truncate(size // 2)
    elif how == "garbage-shard":
        write(_shard(folder), b"\x00\x01 not numpy " * 20)
    elif how == "empty-shard":
        write(_shard(folder, "lengths"), b"")
    elif how == "missing-shard":
        os.remove(_shard(folder, "masked_lm_ids"))
    elif how == "missing-vocab":
        os.remove(os.path.join(folder, "vocab.txt"))
    elif how == "short-vocab":
        write(os.path.join(folder, "vocab.txt"), vocab_lines(["tired"]))
    else:
        raise ValueError(how)


SHARD_DAMAGE = {
    "missing-meta": ["no meta.json", "not a (finished) create-pretraining-data output"],
    "garbage-meta": ["meta.json:1: not valid JSON"],
    "list-meta": ["meta.json: expected a JSON object"],
    "incomplete-meta": ["meta.json: not a create-pretraining-data meta.json", "shards"],
    "more-instances-than-rows": ["shard-0000.input_ids.npy: holds an array of shape", "but meta.json says"],
    "truncated-shard": ["shard-0000.input_ids.npy: not a readable .npy shard, truncated or corrupt"],
    "garbage-shard": ["shard-0000.input_ids.npy: not a .npy file"],
    "empty-shard": ["shard-0000.lengths.npy: not a .npy file"],
    "missing-shard": ["shard-0000.masked_lm_ids.npy", "no such file"],
    "missing-vocab": ["vocab.txt", "no such file"],
    "short-vocab": ["vocab.txt: has 15 tokens, but meta.json says the instances use a 16-token vocabulary"],
}


@pytest.mark.parametrize("how", sorted(SHARD_DAMAGE))
@pytest.mark.parametrize("flag", ["--data", "--eval-data", "--data-512"])
def test_broken_shard_folders(f, tmp_path, flag, how):
    import shutil
    broken = str(tmp_path / "broken")
    shutil.copytree(f["shards"], broken)
    _break_shards(broken, how)
    extra = {"--data": ["--data", broken], "--eval-data": ["--data", f["shards"], "--eval-data", broken],
             "--data-512": ["--data", f["shards"], "--data-512", broken]}[flag]
    assert_error(run_cli(*pretrain(f, tmp_path / "out", *extra)), *SHARD_DAMAGE[how])
    assert not os.path.exists(tmp_path / "out" / "checkpoint.pt")


def test_shard_ids_beyond_the_vocabulary_are_named(f, tmp_path):
    import shutil
    broken = str(tmp_path / "broken")
    shutil.copytree(f["shards"], broken)
    ids = np.load(_shard(broken))
    ids[:, 1] = 999
    np.save(_shard(broken), ids)
    assert_error(run_cli(*pretrain(f, tmp_path / "out", "--data", broken)), "token ids beyond its 16-token vocabulary")


@pytest.mark.parametrize("what", ["file", "missing", "empty-folder"])
def test_data_that_is_not_a_shard_folder(f, tmp_path, what):
    path = tmp_path / "data"
    if what == "file":
        write(path, "text\n")
    elif what == "empty-folder":
        path.mkdir()
    needles = {"file": ["--data", "is a file"], "missing": ["--data", "no such folder"],
               "empty-folder": ["no meta.json"]}[what]
    assert_error(run_cli(*pretrain(f, tmp_path / "out", "--data", path)), *needles)


# ---- the model: wrong configs, broken model folders ----------------------------------------------------

def _config(f, tmp_path, **changes):
    with open(f["config"], encoding="utf-8") as fh:
        config = {**json.load(fh), **changes}
    return write(tmp_path / "config.json", json.dumps(config))


@pytest.mark.parametrize("case", ["vocab-size", "positions", "garbage", "missing", "heads"])
def test_wrong_configs(f, tmp_path, case):
    path = {"vocab-size": lambda: _config(f, tmp_path, vocab_size=30522),
            "positions": lambda: _config(f, tmp_path, max_position_embeddings=8),
            "garbage": lambda: write(tmp_path / "config.json", '{"hidden_size": 16,'),
            "missing": lambda: str(tmp_path / "config.json"),
            "heads": lambda: _config(f, tmp_path, num_attention_heads=3)}[case]()
    needles = {"vocab-size": ["its instances use a 16-token vocabulary but the model has vocab_size=30522"],
               "positions": ["instances of 16 tokens exceed the model's max_position_embeddings=8"],
               "garbage": ["config.json:1: not valid JSON"], "missing": ["--config", "no such file"],
               "heads": ["num_attention_heads 3"]}[case]
    argv = pretrain(f, tmp_path / "out", "--data", f["shards"])
    argv[argv.index("--config") + 1] = path
    assert_error(run_cli(*argv), *needles)


@pytest.mark.parametrize("how", BROKEN)
def test_broken_init_from_folders(f, tmp_path, how):
    broken = broken_copy(f["bert"], tmp_path, how)
    needles = {"truncated-weights": ["model.safetensors", "truncated or corrupt"],
               "garbage-weights": ["model.safetensors", "truncated or corrupt"],
               "nan-weights": ["model.safetensors", "NaN"], "garbage-config": ["config.json:1: not valid JSON"],
               "missing-config": [broken, "no config.json"], "missing-weights": [broken, "no model.safetensors"]}[how]
    argv = ["pretrain", "--out", tmp_path / "out", "--data", f["shards"], "--init-from", broken, "--max-steps", "1",
            "--batch-size", "2", "--device", "cpu", "--quiet"]
    assert_error(run_cli(*argv), *needles)
    assert not os.path.exists(tmp_path / "out" / "checkpoint.pt")


def test_phases_with_different_vocabularies_are_refused(f, tmp_path):
    other = tmp_path / "other"
    vocab = write(tmp_path / "vocab.txt", vocab_lines(["tired"]) + "weary\n")
    assert_ok(run_cli("create-pretraining-data", f["doc"], "--vocab", vocab, "-o", other, *SHARD_FLAGS))
    assert_error(run_cli(*pretrain(f, tmp_path / "out", "--data", f["shards"], "--data-512", other)),
                 "were made with different vocabularies")


# ---- numbers: every numeric flag, each value out of its range -------------------------------------------

COMMANDS = {  # a command line that parses, for each command (path) with numeric flags
    ("vocab",): ["vocab", "x.txt", "-o", "out"],
    ("create-pretraining-data",): ["create-pretraining-data", "x.txt", "--vocab", "v.txt", "-o", "out"],
    ("pretrain",): ["pretrain", "--data", "d", "--out", "out"],
    ("data", "english-corpus"): ["data", "english-corpus", "-o", "out"],
    ("data", "python-docs"): ["data", "python-docs", "-o", "out"],
    ("data", "gettext"): ["data", "gettext", "--lang", "de", "-o", "out"],
}
BAD_VALUES = {cli_args.positive_int: ["0", "-1", "1.5", "nan"], cli_args.nonnegative_int: ["-1", "2.5", "inf"],
              cli_args.positive_float: ["0", "-1e-3", "nan", "inf"], cli_args.nonnegative_float: ["-1", "nan", "inf"],
              cli_args.fraction: ["-0.1", "1.5", "nan", "inf"], cli_args.positive_fraction: ["0", "1.5", "nan"],
              cli_args.fraction_below_one: ["-0.1", "1", "nan"]}


def _subparser(path):
    from bertlab.cli import build_parser
    parser = build_parser()
    for name in path:
        parser = parser._subparsers._group_actions[0].choices[name]
    return parser


def _numeric_actions(path):
    return [a for a in _subparser(path)._actions if a.option_strings and a.type is not None
            and a.type not in (str, cli_args.escaped_text)]


def test_every_numeric_flag_has_a_checked_type():
    for path in COMMANDS:
        for action in _numeric_actions(path):
            assert action.type in BAD_VALUES, (path, action.option_strings, action.type)


NUMBER_CASES = [(path, action.option_strings[-1], value) for path in COMMANDS for action in _numeric_actions(path)
                for value in BAD_VALUES[action.type]]


@pytest.mark.parametrize("path, flag, value", NUMBER_CASES, ids=[f"{' '.join(p)} {fl}={v}" for p, fl, v in NUMBER_CASES])
def test_numeric_flags_out_of_range(path, flag, value):
    assert_error(run_cli(*COMMANDS[path], f"{flag}={value}"), f"argument {flag}", value)


# ranges a type cannot say: checked by the library (or by the command, naming the flag)
RANGES = [
    ("create-pretraining-data", ["--max-seq-length", "4"], ["max_seq_length 4: must be between 5 and 32767"]),
    ("create-pretraining-data", ["--max-seq-length", "2", "--mode", "full-sentences"], ["between 3 and 32767"]),
    ("create-pretraining-data", ["--max-seq-length", "40000"], ["max_seq_length 40000", "32767"]),
    ("create-pretraining-data", ["--max-predictions-per-seq", "256"], ["max_predictions_per_seq 256", "1 and 255"]),
    ("create-pretraining-data", ["--masked-lm-prob", "0"], ["--masked-lm-prob: 0: must be more than 0"]),
    ("pretrain", ["--phase2-fraction", "1"], ["--phase2-fraction: 1: must be less than 1"]),
    ("pretrain", ["--batch-size", "1000"], ["cannot fill one micro-batch of 1000"]),
    ("vocab", ["--vocab-size", "10"], ["vocab size 10 is smaller than the alphabet"]),
    ("english-corpus", ["--heldout", "1"], ["--heldout: 1: must be less than 1"]),
    ("python-docs", ["--heldout", "1"], ["--heldout: 1: must be less than 1"]),
    ("gettext", ["--heldout", "0.5"], ["--heldout 0.5: must be less than 0.5"]),
]


@pytest.mark.parametrize("command, flags, needles", RANGES, ids=[f"{c} {' '.join(fl)}" for c, fl, _ in RANGES])
def test_ranges_beyond_the_types(f, tmp_path, command, flags, needles):
    out = tmp_path / "out"
    argv = {"create-pretraining-data": ["create-pretraining-data", f["doc"], "--vocab", f["vocab"], "-o", out,
                                        "--workers", "1"],
            "pretrain": pretrain(f, out, "--data", f["shards"], "--data-512", f["shards"]),
            "vocab": ["vocab", f["doc"], "-o", out],
            "english-corpus": ["data", "english-corpus", "-o", out, "--root", tmp_path],
            "python-docs": ["data", "python-docs", "--summaries", f["summaries"], "-o", out],
            "gettext": ["data", "gettext", "--lang", "de", "--locale-dir", f["locale"], "-o", out]}[command]
    assert_error(run_cli(*argv, *flags), *needles)
    assert not os.path.exists(out / "checkpoint.pt") and not os.path.exists(out / "meta.json")


PRETRAIN_FIELDS = [("batch_size", 0), ("grad_accum", -1), ("max_steps", 0), ("eval_every", 0), ("save_every", 0),
                   ("warmup", -1), ("seed", -1), ("lr", -1e-4), ("lr", float("nan")), ("weight_decay", -0.1),
                   ("grad_clip", -1.0), ("grad_clip", float("inf")), ("phase2_fraction", 1.0),
                   ("phase2_fraction", -0.5), ("phase2_batch_size", 0), ("eval_instances", 0),
                   ("max_minutes", -1.0), ("batch_size", 2.5), ("optimizer", "sgd")]


@pytest.mark.parametrize("field, value", PRETRAIN_FIELDS, ids=[f"{k}={v}" for k, v in PRETRAIN_FIELDS])
def test_pretrain_settings_check_their_fields(f, field, value):
    """Python callers get the same checks as the command line, before any work."""
    from bertlab.models import BertConfig
    from bertlab.pretraining.objective import PretrainSettings
    with pytest.raises(ValueError, match=field if field != "optimizer" else "unknown optimizer"):
        PretrainSettings(data=f["shards"], out="unused", model=BertConfig.from_json_file(f["config"]), **{field: value})


INSTANCE_FIELDS = [("max_seq_length", 0), ("max_seq_length", 4), ("max_predictions_per_seq", 0),
                   ("max_predictions_per_seq", 300), ("masked_lm_prob", 0.0), ("masked_lm_prob", 1.5),
                   ("masked_lm_prob", float("nan")), ("short_seq_prob", -0.1), ("short_seq_prob", 2.0),
                   ("dupe_factor", 0), ("max_seq_length", 12.5), ("mode", "bert")]


@pytest.mark.parametrize("field, value", INSTANCE_FIELDS, ids=[f"{k}={v}" for k, v in INSTANCE_FIELDS])
def test_instance_options_check_their_fields(field, value):
    from bertlab.pretraining.instances import InstanceOptions
    with pytest.raises(ValueError, match=field if field != "mode" else "mode must be one of"):
        InstanceOptions(**{field: value})


def test_corpus_builders_check_their_shares(f, tmp_path):
    from bertlab.data.english_corpus import build_corpus, python_docs_corpus
    from bertlab.data.gettext_corpus import build_gettext_corpus
    for share in (1.0, -0.1, float("nan")):
        with pytest.raises(ValueError, match="heldout_share"):
            python_docs_corpus(f["summaries"], tmp_path / "a", share)
    with pytest.raises(ValueError, match="min_sentences 0"):
        build_corpus(tmp_path / "b", {}, sources=(), min_sentences=0)
    with pytest.raises(ValueError, match="workers 0"):
        build_corpus(tmp_path / "b", {}, sources=(), workers=0)
    with pytest.raises(ValueError, match="heldout_share 0.5"):
        build_gettext_corpus("de", tmp_path / "c", f["locale"], heldout_share=0.5)


# ---- empty results are errors, not an empty corpus with exit 0 -------------------------------------------

def test_empty_results(f, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert_error(run_cli("data", "english-corpus", "-o", tmp_path / "en", "--root", empty, "--min-mb", "0", "--quiet"),
                 "no documents for train.txt", "nothing was written")
    assert not os.path.exists(tmp_path / "en" / "train.txt")
    one_sentence = write(tmp_path / "one.txt", "m.f: Only one sentence here.\n")  # documents need two
    assert_error(run_cli("data", "python-docs", "--summaries", one_sentence, "-o", tmp_path / "pd"),
                 "no documents for train.txt", "1 documents under 2 sentences")
    assert_error(run_cli("data", "python-docs", "--summaries", f["summaries"], "-o", tmp_path / "pd", "--heldout", "1"),
                 "--heldout: 1: must be less than 1")
    assert_error(run_cli("data", "gettext", "--lang", "fr", "--locale-dir", f["locale"], "-o", tmp_path / "g"),
                 "no language 'fr'")
    assert_error(run_cli("data", "gettext", "--lang", "de", "--locale-dir", empty, "-o", tmp_path / "g"),
                 "it holds no catalogs at all")
    catalogs = tmp_path / "locale" / "de" / "LC_MESSAGES"
    catalogs.mkdir(parents=True)
    write(catalogs / "broken.mo", b"not a catalog at all")
    assert_error(run_cli("data", "gettext", "--lang", "de", "--locale-dir", tmp_path / "locale", "-o", tmp_path / "g"),
                 "broken.mo: not a readable gettext catalog")
    write(catalogs / "broken.mo", b"\xde\x12\x04\x95\x00\x00")  # a catalog's magic number, cut short
    assert_error(run_cli("data", "gettext", "--lang", "de", "--locale-dir", tmp_path / "locale", "-o", tmp_path / "g"),
                 "broken.mo: not a readable gettext catalog")


# ---- outputs: existing ones are kept unless --overwrite; unwritable ones are named -------------------------

def writing(f, tmp_path, out):
    """Each command writing to `out`, with the files a previous run left there."""
    return {
        "vocab": (["vocab", f["doc"], "-o", out, "--vocab-size", "60", "--quiet"], ["vocab.txt"],
                  "already holds vocab.txt; pass --overwrite"),
        "create-pretraining-data": (["create-pretraining-data", f["doc"], "--vocab", f["vocab"], "-o", out,
                                     *SHARD_FLAGS], ["meta.json"], "already holds pretraining data; pass --overwrite"),
        "data english-corpus": (["data", "english-corpus", "-o", out, "--root", tmp_path / "nothing", "--min-mb", "0"],
                                ["train.txt"], "already holds train.txt; pass --overwrite"),
        "data python-docs": (["data", "python-docs", "--summaries", f["summaries"], "-o", out],
                             ["train.txt", "stats.json"], "already holds train.txt, stats.json; pass --overwrite"),
        "data gettext": (["data", "gettext", "--lang", "de", "--locale-dir", f["locale"], "-o", out],
                         ["valid.de"], "already holds valid.de; pass --overwrite"),
        "pretrain": (pretrain(f, out, "--data", f["shards"]), ["checkpoint.pt"], "pass --resume to continue it or --overwrite"),
    }


WRITERS = ["vocab", "create-pretraining-data", "data english-corpus", "data python-docs", "data gettext", "pretrain"]


@pytest.mark.parametrize("command", WRITERS)
def test_existing_outputs_need_overwrite(f, tmp_path, command):
    out = tmp_path / "out"
    out.mkdir()
    argv, names, needle = writing(f, tmp_path, out)[command]
    write(out / MARKER, "{}\n")  # the earlier run was bertlab's: --overwrite replaces only its own outputs
    for name in names:
        write(out / name, "from an earlier run\n")
    assert_error(run_cli(*argv), needle)
    assert all((out / name).read_text() == "from an earlier run\n" for name in names)
    if command != "data english-corpus":  # (its source here is empty)
        assert_ok(run_cli(*argv, "--overwrite"))
        assert all((out / name).read_text() != "from an earlier run\n" for name in names if name != "checkpoint.pt")


@pytest.mark.parametrize("under", ["parent-is-a-file", "output-is-a-file"])
@pytest.mark.parametrize("command", WRITERS)
def test_unwritable_outputs_are_named(f, tmp_path, command, under):
    blocker = write(tmp_path / "blocker", "I am a file\n")
    out = os.path.join(blocker, "out") if under == "parent-is-a-file" else blocker
    argv = writing(f, tmp_path, out)[command][0]
    assert_error(run_cli(*argv), "blocker", "not a folder")
    assert (tmp_path / "blocker").read_text() == "I am a file\n"


# ---- non-ASCII and very long text ------------------------------------------------------------------------

def test_tokenize_non_ascii_and_long_text(tmp_path, bert_vocab_path, google_tokenization):
    lines = ["Ünïcödé café NAÏVE", "中文分词 and 日本語", "مرحبا بالعالم", "emoji 🙂 here", "zero\u200bwidth",
             "x" * 250, "the quick brown fox " * 20_000]
    path = write(tmp_path / "in.txt", "".join(line + "\n" for line in lines))
    out = assert_ok(run_cli("tokenize", "--vocab", bert_vocab_path, path)).out.split("\n")[:-1]
    google = google_tokenization.FullTokenizer(bert_vocab_path, do_lower_case=True)
    assert out == [" ".join(google.tokenize(line)) for line in lines]
    assert out[0] == "unicode cafe naive" and out[5] == "[UNK]"  # a word over 200 characters (google's limit)
    # between 101 and 200 characters bertlab follows HF (100) rather than google (200)
    assert assert_ok(run_cli("tokenize", "--vocab", bert_vocab_path, stdin=b"x" * 150)).out == "[UNK]\n"
    ids = assert_ok(run_cli("tokenize", "--vocab", bert_vocab_path, "--ids", path)).out.split("\n")
    assert len(ids[6].split()) == 80_000 and len(ids) == len(lines) + 1


def test_vocab_and_shards_from_non_ascii_and_long_text(tmp_path):
    text = "".join(f"Ça va très bien {i} ?\n中文句子很好。\nΟδός {i % 5} και ΝΕΡΟ.\n\n" for i in range(40))
    text += "a" * 150 + " " + "long sentence " * 2000 + "\nend here .\n"
    path = write(tmp_path / "text.txt", text)
    result = assert_ok(run_cli("vocab", path, "-o", tmp_path / "v", "--vocab-size", "300", "--min-frequency", "1",
                               "--quiet"))
    assert "[UNK] for 1 " in result.out  # the 150-character word
    tokens = set((tmp_path / "v" / "vocab.txt").read_text(encoding="utf-8").split("\n"))
    assert {"中", "文", "ο", "##ς"} <= tokens and "ç" not in tokens  # uncased: accents stripped
    result = assert_ok(run_cli("create-pretraining-data", path, "--vocab", tmp_path / "v", "-o", tmp_path / "s",
                               *SHARD_FLAGS))
    assert "sentences longer than an instance 1" in result.out
    from bertlab.pretraining.shards import PretrainingData
    data = PretrainingData(str(tmp_path / "s"))
    assert len(data) > 40 and int(data.rows(np.arange(len(data)))["lengths"].max()) <= 16


def test_python_docs_keeps_non_ascii_text(f, tmp_path):
    assert_ok(run_cli("data", "python-docs", "--summaries", f["summaries"], "-o", tmp_path / "pd", "--heldout", "0"))
    assert "Ça marche, 中文也行." in (tmp_path / "pd" / "train.txt").read_text(encoding="utf-8")


# ---- pretraining runs: phase 2 off at fraction 0, progress and evaluations on stderr ------------------------

def test_phase2_fraction_zero_reads_only_the_main_data(f, tmp_path):
    result = assert_ok(run_cli(*pretrain(f, tmp_path / "out", "--data", f["shards"], "--data-512", f["shards"],
                                         "--phase2-fraction", "0", "--eval-data", f["shards"], "--eval-every", "1")))
    assert result.out == ""  # the summary and evaluations go to stderr
    assert "held-out masked LM" in result.err
    with open(tmp_path / "out" / "metrics.jsonl", encoding="utf-8") as fh:
        records = [json.loads(line) for line in fh]
    assert [r["phase"] for r in records if r["kind"] == "train"] == [1]


def test_progress_lines_reach_a_log_file(f, tmp_path):
    """stderr to a file (a background run's log): plain progress lines, not an empty log; --quiet: none."""
    log = tmp_path / "log.txt"
    argv = ["create-pretraining-data", f["doc"], "--vocab", f["vocab"], "-o", tmp_path / "s", "--max-seq-length",
            "16", "--workers", "1"]
    with open(log, "w") as fh:
        subprocess.run([sys.executable, "-m", "bertlab", *map(str, argv)], stderr=fh, stdout=subprocess.DEVNULL,
                       check=True)
    assert "create-pretraining-data: " in log.read_text() and "\r" not in log.read_text()
    with open(log, "w") as fh:
        subprocess.run([sys.executable, "-m", "bertlab", *map(str, argv), "--quiet", "--overwrite"], stderr=fh,
                       stdout=subprocess.DEVNULL, check=True)
    assert log.read_text() == ""


# ---- the data commands do not import torch ------------------------------------------------------------

def test_data_commands_run_without_torch(f, tmp_path):
    """tokenize, vocab, create-pretraining-data and data (debian-zh too) need no model: importing torch would add
    seconds to each run (4.7 s of a one-line `bertlab tokenize` before)."""
    runs = [["tokenize", "--vocab", f["vocab"], f["doc"]],
            ["vocab", f["doc"], "-o", tmp_path / "v", "--vocab-size", "60", "--quiet"],
            ["create-pretraining-data", f["doc"], "--vocab", f["vocab"], "-o", tmp_path / "s", *SHARD_FLAGS],
            ["data", "python-docs", "--summaries", f["summaries"], "-o", tmp_path / "pd"],
            ["data", "debian-zh", "--lists", os.path.join(os.path.dirname(__file__), "fixtures", "debian-zh"),
             "-o", tmp_path / "zh", "--min-per-section", "1"],
            ["pretrain", "--help"], ["data", "--help"]]
    script = ("import contextlib, io, sys\nfrom bertlab.cli import main\n"
              "for argv in %r:\n"
              "    with contextlib.redirect_stdout(io.StringIO()):\n"
              "        try:\n            assert main(argv) == 0, argv\n"
              "        except SystemExit as e:\n            assert e.code == 0, argv\n"
              "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", script % [[str(a) for a in argv] for argv in runs]],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines()[-1] == "[]"


def test_tokenize_takes_a_model_folder_for_its_vocabulary(f, tmp_path):
    folder = os.path.dirname(f["vocab"])
    path = write(tmp_path / "in.txt", "the cat\n")
    by_file = assert_ok(run_cli("tokenize", "--vocab", f["vocab"], path)).out
    assert assert_ok(run_cli("tokenize", "--vocab", folder, path)).out == by_file == "the cat\n"
