"""Using a checkpoint: extract-features (vs HF's hidden states), fill-mask (vs our own MLM logits)
and attention (vs HF's attention weights), through the command line."""
import json

import numpy as np
import pytest
import torch

from bertlab.cli import main

LAYERS = [-1, -2, 0]


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def write_lines(path, lines):
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def line_rows(npz, i):
    a, b = npz["offsets"][i], npz["offsets"][i + 1]
    return npz["values"][a:b], list(npz["tokens"][a:b])


@pytest.fixture(scope="module")
def hf_minilm(minilm_dir):
    transformers = pytest.importorskip("transformers")
    model = transformers.BertModel.from_pretrained(minilm_dir, attn_implementation="eager").eval()
    return model, transformers.AutoTokenizer.from_pretrained(minilm_dir)


@pytest.fixture(scope="module")
def lines(real_sentences):
    """Real sentences, short to ~100 tokens, and one sentence pair."""
    picked = [real_sentences[i] for i in (0, 60, 120, 199)] + [real_sentences[200]]
    return picked + [f"{real_sentences[10]} ||| {real_sentences[90]}"]


def hf_hidden_states(hf_minilm, line):
    model, tokenizer = hf_minilm
    a, sep, b = line.rpartition(" ||| ")
    enc = tokenizer(a, b, return_tensors="pt") if sep else tokenizer(line, return_tensors="pt")
    with torch.no_grad():
        out = model(**enc, output_hidden_states=True)
    tokens = tokenizer.convert_ids_to_tokens(enc["input_ids"][0])
    # google's layer k is HF's hidden_states[k + 1]; negative numbers index both alike
    return tokens, torch.stack([out.hidden_states[k + 1 if k >= 0 else k][0] for k in LAYERS], dim=1)


def test_extract_features_equals_hf_hidden_states(tmp_path, capsys, minilm_dir, hf_minilm, lines):
    path = write_lines(tmp_path / "in.txt", lines)
    code, _, err = run(capsys, "extract-features", "--model", minilm_dir, path, "-o", str(tmp_path / "f.npz"),
                       "--layers=-1,-2,0", "--max-seq-length", "512", "--batch-size", "3")
    assert code == 0, err
    npz = np.load(tmp_path / "f.npz")
    assert list(npz["layers"]) == LAYERS and len(npz["offsets"]) == len(lines) + 1
    for i, line in enumerate(lines):
        values, tokens = line_rows(npz, i)
        hf_tokens, expected = hf_hidden_states(hf_minilm, line)
        assert tokens == hf_tokens
        torch.testing.assert_close(torch.from_numpy(values), expected, atol=1e-5, rtol=1e-5)


def test_jsonl_is_googles_layout_and_matches_npz(tmp_path, capsys, minilm_dir, lines):
    path = write_lines(tmp_path / "in.txt", lines[:3] + lines[-1:])
    for out in ("f.npz", "f.jsonl"):
        code, _, err = run(capsys, "extract-features", "--model", minilm_dir, path, "-o", str(tmp_path / out),
                           "--layers", "-1", "-2", "0")
        assert code == 0, err
    npz = np.load(tmp_path / "f.npz")
    records = [json.loads(line) for line in (tmp_path / "f.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [r["linex_index"] for r in records] == [0, 1, 2, 3]
    for i, record in enumerate(records):
        values, tokens = line_rows(npz, i)
        assert [f["token"] for f in record["features"]] == tokens
        assert all([layer["index"] for layer in f["layers"]] == LAYERS for f in record["features"])
        got = np.array([[layer["values"] for layer in f["layers"]] for f in record["features"]])
        np.testing.assert_allclose(got, values, atol=5e-7 + 1e-9, rtol=0)  # google rounds to 6 decimals
        assert got.tolist() == np.round(got, 6).tolist()


def test_words_are_the_mean_of_their_pieces(tmp_path, capsys, minilm_dir):
    path = write_lines(tmp_path / "in.txt", ["Unaffable Ünïcödé didn't, 我爱 x ||| Tokenization works."])
    for name, extra in (("tokens.npz", []), ("words.npz", ["--words"]), ("words.jsonl", ["--words"])):
        code, _, err = run(capsys, "extract-features", "--model", minilm_dir, path, "-o", str(tmp_path / name), *extra)
        assert code == 0, err
    pieces, tokens = line_rows(np.load(tmp_path / "tokens.npz"), 0)
    words, word_texts = line_rows(np.load(tmp_path / "words.npz"), 0)
    assert tokens[:4] == ["[CLS]", "una", "##ffa", "##ble"] and "[UNK]" in tokens  # 爱 is not in the vocab
    # words as the basic tokenizer splits them, in their original spelling; [CLS]/[SEP] stay words
    assert word_texts == ["[CLS]", "Unaffable", "Ünïcödé", "didn", "'", "t", ",", "我", "爱", "x", "[SEP]",
                          "Tokenization", "works", ".", "[SEP]"]
    np.testing.assert_allclose(words[1], pieces[1:4].mean(axis=0), atol=1e-6)  # una ##ffa ##able
    token_of_word = {0: 0, 2: 4, 3: 5, 8: 10, 10: 12, 14: len(tokens) - 1}
    for w, t in token_of_word.items():
        np.testing.assert_allclose(words[w], pieces[t], atol=1e-6)
    n = tokens.index("token")  # "Tokenization" -> token ##ization
    assert tokens[n + 1] == "##ization"
    np.testing.assert_allclose(words[11], pieces[n : n + 2].mean(axis=0), atol=1e-6)
    record = json.loads((tmp_path / "words.jsonl").read_text(encoding="utf-8"))
    assert [f["word"] for f in record["features"]] == word_texts


def test_layers_are_validated_and_truncation_is_counted(tmp_path, capsys, minilm_dir):
    path = write_lines(tmp_path / "in.txt", ["one two three four five six seven eight nine", "short"])
    out = str(tmp_path / "f.npz")
    for layers, message in (("6", "layer 6: the model has 6 layers, so a layer is a number from -6 to 5"),
                            ("-7", "layer -7: the model has 6 layers"),
                            ("-1,x", "--layers -1,x: expected integers")):
        code, _, err = run(capsys, "extract-features", "--model", minilm_dir, path, "-o", out, f"--layers={layers}")
        assert code == 2 and message in err, err
    code, _, err = run(capsys, "extract-features", "--model", minilm_dir, path, "-o", str(tmp_path / "f.npy"))
    assert code == 2 and "must end in .jsonl or .npz" in err
    code, _, err = run(capsys, "extract-features", "--model", minilm_dir, path, "-o", out, "--max-seq-length", "6")
    assert code == 0
    assert "note: 1 of 2 lines were longer than --max-seq-length 6 tokens and were truncated (line 1)" in err
    npz = np.load(out)
    assert line_rows(npz, 0)[1] == ["[CLS]", "one", "two", "three", "four", "[SEP]"]
    (tmp_path / "empty.txt").write_text("")
    code, _, err = run(capsys, "extract-features", "--model", minilm_dir, str(tmp_path / "empty.txt"), "-o", out)
    assert code == 2 and "empty.txt: the file is empty" in err


# ---- a tiny random checkpoint with both pretraining heads ------------------------------------

WORDS = "the cat dog sat ran on a mat rug big small ##s and it was . , tired".split()


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    from bertlab import BertConfig, BertForPreTraining, BertTokenizer, save_pretrained
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS
    torch.manual_seed(0)
    # a wide initialiser spreads the logits, so the top-k has no near-ties
    config = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=32, initializer_range=0.5)
    folder = tmp_path_factory.mktemp("tiny")
    save_pretrained(BertForPreTraining(config).eval(), folder, BertTokenizer({t: i for i, t in enumerate(vocab)}))
    return str(folder)


def test_fill_mask_is_the_softmax_of_the_mlm_logits(capsys, tiny_dir):
    from bertlab import BertForPreTraining, load_pretrained
    text = "the cat [MASK] on the [MASK] ."
    code, out, err = run(capsys, "fill-mask", "--model", tiny_dir, "--top-k", "4", "--json", text)
    assert code == 0, err
    result = json.loads(out)
    assert result["text"] == text and len(result["masks"]) == 2
    loaded = load_pretrained(tiny_dir, BertForPreTraining)
    model, tokenizer = loaded.model, loaded.tokenizer
    ids = tokenizer.convert_tokens_to_ids("[CLS] the cat [MASK] on the [MASK] . [SEP]".split())
    with torch.no_grad():
        logits, _ = model(torch.tensor([ids]), masked_lm_positions=torch.tensor([[3, 6]]))
    probabilities = logits[0].softmax(-1)
    for mask, p in zip(result["masks"], probabilities):
        expected = p.topk(4)
        assert [m["token_id"] for m in mask] == expected.indices.tolist()
        assert [m["token"] for m in mask] == tokenizer.convert_ids_to_tokens(expected.indices.tolist())
        got = [m["probability"] for m in mask]
        np.testing.assert_allclose(got, expected.values.numpy(), rtol=1e-5)
        assert got == sorted(got, reverse=True)
    code, out, _ = run(capsys, "fill-mask", "--model", tiny_dir, text)
    assert code == 0 and out.startswith(text + "\n  [MASK] 1: ") and "\n  [MASK] 2: " in out


def test_fill_mask_errors(capsys, tiny_dir, minilm_dir):
    code, _, err = run(capsys, "fill-mask", "--model", tiny_dir, "no mask here")
    assert code == 2 and "'no mask here': no [MASK] in the text" in err
    code, _, err = run(capsys, "fill-mask", "--model", minilm_dir, "a [MASK] b")
    assert code == 2 and "has no masked-LM head" in err and "missing mlm.dense.weight" in err


# ---- attention -----------------------------------------------------------------------------

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_attention_weights_equal_hf(minilm, hf_minilm):
    from bertlab.inference.attention import DEFAULT_SENTENCE, attention_weights
    model, tokenizer = minilm
    hf_model, hf_tokenizer = hf_minilm
    enc = hf_tokenizer(DEFAULT_SENTENCE, return_tensors="pt")
    with torch.no_grad():
        hf = hf_model(**enc, output_attentions=True).attentions
    for layer in (0, -1):
        tokens, weights = attention_weights(model, tokenizer, DEFAULT_SENTENCE, layer)
        assert tokens == hf_tokenizer.convert_ids_to_tokens(enc["input_ids"][0])
        torch.testing.assert_close(torch.from_numpy(weights), hf[layer][0], atol=1e-5, rtol=1e-5)
        np.testing.assert_allclose(weights.sum(-1), 1, atol=1e-5)


def test_attention_cli_png_and_print_top(tmp_path, capsys, tiny_dir):
    from bertlab import load_pretrained
    png = tmp_path / "grid.png"
    code, out, err = run(capsys, "attention", "--model", tiny_dir, "the cat sat on the mat . it was tired",
                         "-o", str(png), "--print-top", "it", "--top-k", "3", "--head", "2", "--layer", "0")
    assert code == 0, err
    data = png.read_bytes()
    assert data.startswith(PNG_MAGIC) and len(data) > 5000
    loaded = load_pretrained(tiny_dir)
    model, tokenizer = loaded.model, loaded.tokenizer
    ids = tokenizer.encode("the cat sat on the mat . it was tired").input_ids
    with torch.no_grad():
        row = model(torch.tensor([ids]), output_attentions=True).attentions[0][0, 2, ids.index(tokenizer.vocab.token_to_id["it"])]
    lines = out.splitlines()
    assert lines[0] == "'it' (token 8), layer 0, head 2, attends to:"
    printed = [float(line.split()[0]) for line in lines[1:4]]
    np.testing.assert_allclose(printed, row.sort(descending=True).values[:3].numpy(), atol=5e-5)
    code, _, err = run(capsys, "attention", "--model", tiny_dir, "-o", str(tmp_path / "all.png"))
    assert code == 0 and (tmp_path / "all.png").read_bytes().startswith(PNG_MAGIC)
    bad = str(tmp_path / "bad.png")
    for argv, message in ((["--head", "4", "-o", bad], "--head 4: the model has 4 heads"),
                          (["--layer", "2", "-o", bad], "layer 2: the model has 2 layers"),
                          (["--print-top", "zebra"], "--print-top zebra: no such token"), ([], "nothing to do")):
        code, _, err = run(capsys, "attention", "--model", tiny_dir, *argv)
        assert code == 2 and message in err, err
