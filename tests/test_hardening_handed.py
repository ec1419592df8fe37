"""Files are untrusted input, part two: the rules behind the weights, tokenizer files, settings files,
line-based inputs, word vectors and size flags of the generate / translate / unilm-generate /
word2vec / embed commands. Every crafted file or flag ends in one clear line naming the file (and
line, field or tensor) or the flag (exit 2, no traceback), or in the right result.

Rules tested here:
  1. weights are floating point: a tensor of another dtype for a float weight is refused by name, in
     every loader (copy_matching's and the translation folder's load_state_dict alike);
  2. tokenizer files are read capped (bytes and entries) and checked (ids 0..n-1, two-symbol merges);
  3. tokenizer_config.json's fields are typed;
  4. unilm.json's budgets and translation.json's fields are typed and range-checked;
  5. a line of a text input ends at "\\n", a "\\r" before it belongs to the line end (CRLF);
  6. vectors.txt: finite values, one row per word, rows of the header's width, counts the file can hold;
  7. size flags no model config counts are bounded: --window, --beam (at most 1024, and the search's
     memory), word2vec's --dim x vocabulary; the ones that build a config are refused by its count.
"""
import json
import os
import shutil

import pytest
import torch

from cli_cases import assert_error, assert_ok, run_cli, write

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: threads only add overhead

WORDS = "the cat dog sat ran on a mat rug big small ##s and it was . , tired".split()
SUBWORD_TEXT = ["die datei öffnen speichern", "open the file save the cat"]
CORPUS = "".join(f"the cat sat on the mat and the dog ran {i % 7}\n" for i in range(60))
INT_DTYPES = [torch.int64, torch.int32, torch.bool, torch.uint8]


def _name(dtype) -> str:
    return str(dtype).removeprefix("torch.")


@pytest.fixture(scope="module")
def f(tmp_path_factory):
    """Tiny random models: a BERT encoder ("bert"), a translation folder, a character GPT and a
    UniLM folder; a corpus, a sentence file."""
    from bertlab import BertConfig, BertForPreTraining, BertModel, BertTokenizer, save_pretrained
    from bertlab.interop.hf_gpt2 import save_pretrained as save_gpt
    from bertlab.interop.translation_folder import save_translation_model
    from bertlab.interop.unilm_folder import save_unilm_model
    from bertlab.models import GPT, GPTConfig
    from bertlab.models.transformer import Seq2SeqTransformer, TransformerConfig
    from bertlab.tokenization.char_level import CharTokenizer
    from bertlab.tokenization.subword import SubwordTokenizer
    root = tmp_path_factory.mktemp("handed")
    f = {"root": root, "corpus": write(root / "corpus.txt", CORPUS),
         "sentences": write(root / "sentences.txt", "the cat sat on the mat\nthe dog ran\n")}
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS
    tokenizer = BertTokenizer({t: i for i, t in enumerate(vocab)})
    config = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=32)
    torch.manual_seed(0)
    f["bert"] = str(root / "bert")
    save_pretrained(BertModel(config).eval(), f["bert"], tokenizer)
    f["unilm"] = str(root / "unilm")
    save_unilm_model(f["unilm"], BertForPreTraining(config).eval(), tokenizer,
                     {"max_source_tokens": 16, "max_target_tokens": 8})
    subword = SubwordTokenizer.train(SUBWORD_TEXT, 60, 1)
    tconfig = TransformerConfig.preset("test", source_vocab_size=len(subword), target_vocab_size=len(subword),
                                       share_embeddings=True, max_position_embeddings=16)
    f["translation"] = str(root / "translation")
    save_translation_model(f["translation"], Seq2SeqTransformer(tconfig).eval(), subword, subword,
                           {"source_lang": "de", "target_lang": "en", "bleu_tokenize": "13a"})
    chars = CharTokenizer.train(CORPUS.splitlines())
    gconfig = GPTConfig.preset("test", vocab_size=chars.vocab_size, n_positions=32, bos_token_id=0, eos_token_id=0)
    f["gpt"] = str(root / "gpt")
    save_gpt(GPT(gconfig).eval(), f["gpt"], chars)
    return f


def copy(f, name, tmp_path) -> str:
    folder = str(tmp_path / name)
    shutil.copytree(f[name], folder)
    return folder


def embed(folder, tmp_path, f):
    return run_cli("embed", f["sentences"], "-o", tmp_path / "out.npy", "--model", folder)


def translate(folder, f, *extra):
    return run_cli("translate", f["sentences"], "--model", folder, *extra)


def _edit_json(path, change):
    with open(path, encoding="utf-8") as fh:
        value = json.load(fh)
    write(path, json.dumps(change(value)))


# ---- 1. weights are floating point ---------------------------------------------------------------

def _retype(path, name, dtype, fmt):
    """Rewrite the weights file of a folder with tensor `name` as `dtype`, as safetensors or as
    pytorch_model.bin (the safetensors file then removed)."""
    from safetensors.torch import load_file, save_file
    tensors = load_file(path)
    tensors[name] = tensors[name].to(dtype)
    if fmt == "safetensors":
        save_file(tensors, path, metadata={"format": "pt"})
    else:
        os.remove(path)
        torch.save(tensors, os.path.join(os.path.dirname(path), "pytorch_model.bin"))


@pytest.mark.parametrize("fmt", ["safetensors", "bin"])
@pytest.mark.parametrize("dtype", INT_DTYPES, ids=_name)
def test_a_bert_folder_with_integer_weights_is_refused_naming_the_tensor(f, tmp_path, dtype, fmt):
    folder = copy(f, "bert", tmp_path)
    _retype(os.path.join(folder, "model.safetensors"), "encoder.layer.0.attention.self.query.weight", dtype, fmt)
    line = assert_error(embed(folder, tmp_path, f), "encoder.layer.0.attention.self.query.weight",
                        f"dtype {_name(dtype)}", "must be floating point")
    assert folder in line


@pytest.mark.parametrize("dtype", INT_DTYPES, ids=_name)
def test_a_translation_folder_with_integer_weights_is_refused_naming_the_tensor(f, tmp_path, dtype):
    """load_state_dict(strict=False) cast them silently: int64 embeddings became rows of whole numbers."""
    from safetensors.torch import load_file
    folder = copy(f, "translation", tmp_path)
    path = os.path.join(folder, "model.safetensors")
    name = next(n for n, t in load_file(path).items() if t.dim() == 2 and "decoder" in n)
    _retype(path, name, dtype, "safetensors")
    assert_error(translate(folder, f), "model.safetensors", f"tensor {name}", f"dtype {_name(dtype)}",
                 "must be floating point")


@pytest.mark.parametrize("dtype", [torch.int64, torch.uint8], ids=_name)
def test_a_gpt_bin_with_integer_weights_is_refused_naming_the_tensor(f, tmp_path, dtype):
    folder = copy(f, "gpt", tmp_path)
    _retype(os.path.join(folder, "model.safetensors"), "transformer.wte.weight", dtype, "bin")
    assert_error(run_cli("generate", "--model", folder, "the", "-n", "2"), "wte.weight", f"dtype {_name(dtype)}",
                 "must be floating point")


def test_half_precision_translation_weights_load_and_translate_alike(f, tmp_path):
    """float16 is a float: loaded (cast up), and the translation is the float32 one's."""
    from safetensors.torch import load_file, save_file
    folder = copy(f, "translation", tmp_path)
    path = os.path.join(folder, "model.safetensors")
    save_file({n: t.to(torch.float16) if t.dim() == 2 else t for n, t in load_file(path).items()}, path,
              metadata={"format": "pt"})
    assert assert_ok(translate(folder, f, "--beam", "1", "--device", "cpu")).out.count("\n") == 2


def test_the_shared_check_names_the_tensor_and_the_file():
    from bertlab.interop.folder import check_float_weight
    check_float_weight("w", torch.zeros(2, dtype=torch.float16), torch.zeros(2))  # a float: fine
    check_float_weight("steps", torch.zeros(2, dtype=torch.int64), torch.zeros(2, dtype=torch.int64))  # not a weight
    with pytest.raises(ValueError, match=r"^f\.bin: tensor w has dtype complex64; weights must be floating point"):
        check_float_weight("w", torch.zeros(2, dtype=torch.complex64), torch.zeros(2), "f.bin")


# ---- 2. tokenizer files: capped and checked ------------------------------------------------------

def _sparse(path, size):
    """A file of `size` bytes that takes no disk: refused on its size, never read."""
    with open(path, "wb") as fh:
        fh.truncate(size)


def _lines_file(path, line: str, count: int):
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(line * count)


TOO_MANY = (1 << 20) + 1


def test_a_huge_subword_vocab_json_is_refused_before_reading(f, tmp_path):
    folder = copy(f, "translation", tmp_path)
    _sparse(os.path.join(folder, "source_tokenizer", "vocab.json"), (32 << 20) + 1)
    assert_error(translate(folder, f), "source_tokenizer/vocab.json", "33,554,433 bytes")


def test_a_merges_txt_of_more_merges_than_a_vocabulary_holds_is_refused(f, tmp_path):
    folder = copy(f, "translation", tmp_path)
    _lines_file(os.path.join(folder, "target_tokenizer", "merges.txt"), "a b\n", TOO_MANY)
    assert_error(translate(folder, f), "target_tokenizer/merges.txt", f"{TOO_MANY:,} lines",
                 "more than a vocabulary may hold")


def test_a_huge_merges_txt_is_refused_on_its_size(f, tmp_path):
    folder = copy(f, "translation", tmp_path)
    _sparse(os.path.join(folder, "target_tokenizer", "merges.txt"), (32 << 20) + 1)
    assert_error(translate(folder, f), "merges.txt", "more than a merges file may hold")


def test_a_vocab_json_id_beyond_its_size_is_refused(f, tmp_path):
    """An id of 10**12 would have made a tokenizer (and a model) of 10**12 tokens."""
    folder = copy(f, "gpt", tmp_path)
    from bertlab.tokenization.bpe import ByteLevelBPETokenizer
    bpe = ByteLevelBPETokenizer.train(CORPUS.splitlines(), 300, min_frequency=1)
    bpe.save(folder)
    os.remove(os.path.join(folder, "chars.json"))
    _edit_json(os.path.join(folder, "vocab.json"), lambda v: {**v, "zzz-new": 10 ** 12})
    assert_error(run_cli("generate", "--model", folder, "the", "-n", "2"), "vocab.json", "'zzz-new'",
                 "1,000,000,000,000", "ids must be 0 to")


def test_a_malformed_merge_line_names_the_file_and_line(f, tmp_path):
    folder = copy(f, "translation", tmp_path)
    write(os.path.join(folder, "source_tokenizer", "merges.txt"), "#version: 0.2\nd i e\n")
    assert_error(translate(folder, f), "source_tokenizer/merges.txt:2", "expected two symbols")


def test_a_crlf_merges_txt_reads_as_the_lf_one(f, tmp_path):
    """"d i\\r" was a merge of the piece "i\\r", which no vocabulary has."""
    folder = copy(f, "translation", tmp_path)
    for side in ("source_tokenizer", "target_tokenizer"):
        path = os.path.join(folder, side, "merges.txt")
        write(path, open(path, encoding="utf-8").read().replace("\n", "\r\n"))
    want = assert_ok(translate(f["translation"], f, "--beam", "1", "--device", "cpu")).out
    assert assert_ok(translate(folder, f, "--beam", "1", "--device", "cpu")).out == want


def test_a_vocab_txt_of_more_tokens_than_a_vocabulary_holds_is_refused(f, tmp_path):
    folder = copy(f, "bert", tmp_path)
    with open(os.path.join(folder, "vocab.txt"), "w", encoding="utf-8") as fh:
        fh.write("".join(f"t{i}\n" for i in range(TOO_MANY)))
    assert_error(embed(folder, tmp_path, f), "vocab.txt", f"{TOO_MANY:,} lines", "more than a vocabulary may hold")


def test_a_huge_vocab_txt_is_refused_on_its_size(f, tmp_path):
    folder = copy(f, "bert", tmp_path)
    _sparse(os.path.join(folder, "vocab.txt"), (32 << 20) + 1)
    assert_error(embed(folder, tmp_path, f), "vocab.txt", "more than a vocabulary file may hold")


def test_a_huge_chars_json_is_refused(f, tmp_path):
    folder = copy(f, "gpt", tmp_path)
    _sparse(os.path.join(folder, "chars.json"), (32 << 20) + 1)
    assert_error(run_cli("generate", "--model", folder, "the", "-n", "2"), "chars.json", "33,554,433 bytes")


# ---- 3. tokenizer_config.json: typed fields ------------------------------------------------------

CONFIGS = [
    ({"do_lower_case": "yes"}, ["do_lower_case is a string ('yes')", "true or false"]),
    ({"do_lower_case": 1}, ["do_lower_case is a whole number (1)", "true or false"]),
    ({"do_lower_case": []}, ["do_lower_case is a list", "true or false"]),
    ({"do_lower_case": None}, ["do_lower_case is null", "true or false"]),
    ({"model_max_length": "512"}, ["model_max_length is a string", "a whole number"]),
    ({"model_max_length": 512.5}, ["model_max_length is a number", "a whole number"]),
    ({"model_max_length": -1}, ["model_max_length -1: must be at least 1"]),
    ({"tokenize_chinese_chars": "true"}, ["tokenize_chinese_chars is a string"]),
    ({"strip_accents": "no"}, ["strip_accents is a string", "true or false or null"]),
    ({"never_split": "[S]"}, ["never_split is a string", "a list or null"]),
    ({"never_split": [1]}, ["never_split holds 1"]),
    ({"never_split": ["a b"]}, ["never_split holds 'a b'"]),
    ({"unk_token": 5}, ["unk_token is a whole number"]),
]


@pytest.mark.parametrize("fields, needles", CONFIGS, ids=[json.dumps(c) for c, _ in CONFIGS])
def test_tokenizer_config_fields_of_the_wrong_type_are_refused_by_name(f, tmp_path, fields, needles):
    folder = copy(f, "bert", tmp_path)
    _edit_json(os.path.join(folder, "tokenizer_config.json"), lambda c: {**c, **fields})
    assert_error(embed(folder, tmp_path, f), "tokenizer_config.json", *needles)


def test_an_hf_tokenizer_config_with_nulls_and_added_tokens_loads(f, tmp_path):
    """HF writes null for strip_accents and never_split, AddedToken objects for special tokens, and
    its 'no limit' model_max_length (int(1e30)): all accepted."""
    folder = copy(f, "bert", tmp_path)
    _edit_json(os.path.join(folder, "tokenizer_config.json"), lambda c: {
        **c, "strip_accents": None, "never_split": None, "tokenize_chinese_chars": True,
        "model_max_length": int(1e30), "tokenizer_class": "BertTokenizer",
        "mask_token": {"content": "[MASK]", "lstrip": True, "__type": "AddedToken"}})
    assert_ok(embed(folder, tmp_path, f))


# ---- 4. unilm.json and translation.json: typed, in range -----------------------------------------

UNILM = [
    ({"max_target_tokens": -1}, ["max_target_tokens -1: must be at least 2"]),
    ({"max_target_tokens": 0}, ["max_target_tokens 0: must be at least 2"]),
    ({"max_target_tokens": "5"}, ["max_target_tokens is a string ('5')", "a whole number"]),
    ({"max_target_tokens": 1e12}, ["max_target_tokens is a number", "a whole number"]),
    ({"max_target_tokens": 10 ** 12}, ["max_target_tokens 1000000000000: must be at most 16"]),
    ({"max_target_tokens": None}, ["max_target_tokens is null"]),
    ({"max_source_tokens": "16"}, ["max_source_tokens is a string"]),
    ({"max_source_tokens": 1}, ["max_source_tokens 1: must be at least 3"]),
    ({"max_source_tokens": 100}, ["max_source_tokens 100: must be at most 30"]),
]


@pytest.mark.parametrize("fields, needles", UNILM, ids=[json.dumps(c) for c, _ in UNILM])
def test_unilm_json_budgets_are_typed_and_in_range(f, tmp_path, fields, needles):
    folder = copy(f, "unilm", tmp_path)
    _edit_json(os.path.join(folder, "unilm.json"), lambda s: {**s, **fields})
    assert_error(run_cli("unilm-generate", f["sentences"], "--model", folder, "--device", "cpu"), "unilm.json",
                 *needles)


def test_unilm_json_without_a_source_budget_is_refused(f, tmp_path):
    folder = copy(f, "unilm", tmp_path)
    write(os.path.join(folder, "unilm.json"), '{"max_target_tokens": 8}')
    assert_error(run_cli("unilm-generate", f["sentences"], "--model", folder), "unilm.json", "needs max_source_tokens")


TRANSLATION = [
    ({"bleu_tokenize": 5}, ["bleu_tokenize is a whole number"]),
    ({"bleu_tokenize": "nope"}, ["bleu_tokenize 'nope' is not one of sacreBLEU's tokenizers", "13a"]),
    ({"target_lang": 3}, ["target_lang is a whole number", "a string or null"]),
    ({"source_lang": ["de"]}, ["source_lang is a list"]),
]


@pytest.mark.parametrize("fields, needles", TRANSLATION, ids=[json.dumps(c) for c, _ in TRANSLATION])
def test_translation_json_fields_are_typed(f, tmp_path, fields, needles):
    folder = copy(f, "translation", tmp_path)
    _edit_json(os.path.join(folder, "translation.json"), lambda s: {**s, **fields})
    assert_error(translate(folder, f), "translation.json", *needles)


# ---- 5. CRLF line ends -----------------------------------------------------------------------------

def test_generate_prompts_of_a_crlf_file_are_the_lf_file_s(f, tmp_path):
    """The prompt kept its "\\r": the model was fed a carriage return, and the output line held one."""
    lf = write(tmp_path / "lf.txt", "the cat\nthe dog\n\n")
    crlf = write(tmp_path / "crlf.txt", "the cat\r\nthe dog\r\n\r\n")
    argv = ["generate", "--model", f["gpt"], "-n", "3", "--device", "cpu", "--prompts"]
    want = assert_ok(run_cli(*argv, lf)).out
    got = assert_ok(run_cli(*argv, crlf)).out
    assert got == want and "\r" not in got and got.count("\n") == 3


def test_translate_input_and_references_of_crlf_files_are_the_lf_files(f, tmp_path):
    lf, ref = write(tmp_path / "lf.de", "die datei\nspeichern\n"), write(tmp_path / "ref.en", "the file\nsave\n")
    crlf, ref_crlf = write(tmp_path / "crlf.de", "die datei\r\nspeichern\r\n"), write(tmp_path / "ref-crlf.en",
                                                                                    "the file\r\nsave\r\n")
    want = assert_ok(run_cli("translate", lf, "--model", f["translation"], "--ref", ref, "--device", "cpu"))
    got = assert_ok(run_cli("translate", crlf, "--model", f["translation"], "--ref", ref_crlf, "--device", "cpu"))
    assert (got.out, got.err) == (want.out, want.err)


def test_unilm_generate_of_a_crlf_file_is_the_lf_file_s(f, tmp_path):
    lf, crlf = write(tmp_path / "lf.txt", "the cat sat\nthe dog\n"), write(tmp_path / "crlf.txt", "the cat sat\r\nthe dog\r\n")
    want = assert_ok(run_cli("unilm-generate", lf, "--model", f["unilm"], "--device", "cpu")).out
    assert assert_ok(run_cli("unilm-generate", crlf, "--model", f["unilm"], "--device", "cpu")).out == want


def test_only_the_cr_of_a_line_end_is_dropped(tmp_path):
    from bertlab.tokenization.files import text_lines
    path = write(tmp_path / "mixed.txt", "a\r\nb\rc\r\nd\n\r\ne")
    assert text_lines(path) == ["a", "b\rc", "d", "", "e"]


# ---- 6. vectors.txt ------------------------------------------------------------------------------

GOOD_ROWS = "cat 0.1 0.2 0.3\ndog 0.2 0.1 0.3\nmat 0.3 0.3 0.1\n"
VECTORS = {
    "nan": ("3 3\ncat 0.1 0.2 0.3\ndog nan 0.1 0.3\nmat 0.3 0.3 0.1\n", [":3:", "'dog'", "nan", "must be finite"]),
    "inf": ("3 3\ncat 0.1 0.2 0.3\ndog 0.2 0.1 0.3\nmat 0.3 -inf 0.1\n", [":4:", "'mat'", "-inf", "must be finite"]),
    "beyond-float32": ("3 3\ncat 0.1 0.2 1e39\n" + GOOD_ROWS.split("\n", 1)[1], [":2:", "1e39", "float32"]),
    "duplicate": ("3 3\ncat 0.1 0.2 0.3\ndog 0.2 0.1 0.3\ncat 0.3 0.3 0.1\n", [":4:", "'cat' appears twice",
                                                                             "lines 2 and 4"]),
    "short-row": ("3 3\ncat 0.1 0.2 0.3\ndog 0.2 0.1\nmat 0.3 0.3 0.1\n", [":3:", "2 numbers", "the header says 3"]),
    "long-row": ("3 3\ncat 0.1 0.2 0.3 0.4\n" + GOOD_ROWS.split("\n", 1)[1], [":2:", "4 numbers"]),
    "empty-word": ("3 3\n 0.1 0.2 0.3\n" + GOOD_ROWS.split("\n", 1)[1], [":2:", "word is empty"]),
    "text-value": ("3 3\ncat 0.1 zero 0.3\n" + GOOD_ROWS.split("\n", 1)[1], [":2:", "not a number"]),
    "header-words": ("three 3\n" + GOOD_ROWS, [":1:", "expected the header"]),
    "header-three-fields": ("3 3 3\n" + GOOD_ROWS, [":1:", "expected the header"]),
    "header-unicode-digits": ("3 ³\n" + GOOD_ROWS, [":1:", "expected the header"]),
    "header-zero": ("0 3\n", [":1:", "0 words", "at least 1"]),
    "header-more-words": ("4 3\n" + GOOD_ROWS, ["promises 4 words", "3 lines after it"]),
    "header-fewer-words": ("2 3\n" + GOOD_ROWS, ["promises 2 words", "3 lines after it"]),
    "huge-count": ("1000000000000 3\n" + GOOD_ROWS, ["promises 1,000,000,000,000 words", "can hold"]),
    "huge-dimension": ("3 100000000000\n" + GOOD_ROWS, ["3 words of 100,000,000,000 numbers", "can hold"]),
    "empty": ("", ["the file is empty"]),
}


@pytest.mark.parametrize("name", sorted(VECTORS))
def test_a_broken_vectors_txt_is_refused_naming_the_file_and_line(tmp_path, name):
    text, needles = VECTORS[name]
    path = write(tmp_path / "vectors.txt", text)
    assert_error(run_cli("word2vec", "neighbours", path, "cat"), "vectors.txt", *needles)


def test_a_vectors_txt_whose_table_passes_the_memory_limit_is_refused(tmp_path):
    rows = "".join(f"w{i} " + " ".join(["1"] * 1000) + "\n" for i in range(300))  # 300 x 1000: 2.4 MB as float32
    path = write(tmp_path / "vectors.txt", "300 1000\n" + rows)
    assert_error(run_cli("word2vec", "neighbours", path, "w1", "--max-model-gb", "0.001"), "vectors.txt",
                 "300 words x 1,000 dimensions", "--max-model-gb")
    assert_ok(run_cli("word2vec", "neighbours", path, "w1"))


def test_a_good_vectors_txt_with_crlf_rows_and_trailing_spaces_is_read(tmp_path):
    path = write(tmp_path / "vectors.txt", "3 3\r\n" + GOOD_ROWS.replace("\n", " \r\n"))
    out = assert_ok(run_cli("word2vec", "neighbours", path, "cat", "-k", "2")).out
    assert out.startswith("cat: dog ") and "mat" in out


# ---- 7. size flags --------------------------------------------------------------------------------

def _gpt_train(f, out, *extra):
    return ["gpt-train", f["corpus"], "--out", out, "--tokenizer", "char", "--preset", "test", "--block-size", "16",
            "--max-steps", "1", "--device", "cpu", "--quiet", "--max-model-gb", "1", *extra]


def _translate_train(f, tmp_path, *extra):
    src = write(tmp_path / "train.en", "".join(f"open the file {i}\n" for i in range(20)))
    tgt = write(tmp_path / "train.de", "".join(f"die datei öffnen {i}\n" for i in range(20)))
    return ["translate-train", "--train-src", src, "--train-tgt", tgt, "--valid-src", src, "--valid-tgt", tgt,
            "--out", tmp_path / "out", "--preset", "test", "--joint-vocab", "--vocab-size", "60", "--min-frequency",
            "1", "--max-steps", "1", "--device", "cpu", "--quiet", "--max-model-gb", "1", *extra]


def _unilm_train(f, tmp_path, *extra):
    return ["unilm-train", "--train-src", f["sentences"], "--train-tgt", f["sentences"], "--out", tmp_path / "out",
            "--vocab", f["bert"], "--heads", "2", "--intermediate", "32", "--max-steps", "1", "--batch-size", "2",
            "--rouge-sentences", "0", "--device", "cpu", "--max-model-gb", "1", *extra]


@pytest.mark.parametrize("flag, value, needle", [
    ("--n-layer", "100000", "n_layer 100000 makes a model of"),
    ("--n-embd", "10000000", "n_embd 10000000 makes a model of"),
])
def test_gpt_train_architecture_flags_are_refused_by_the_config_count(f, tmp_path, flag, value, needle):
    assert_error(run_cli(*_gpt_train(f, tmp_path / "out", flag, value)), needle, "--max-model-gb")


@pytest.mark.parametrize("flags, needle", [
    (["--layers", "100000"], "layers 100000 makes a model of"),
    (["--d-model", "10000000", "--heads", "1"], "d_model 10000000 makes a model of"),
])
def test_translate_train_architecture_flags_are_refused_by_the_config_count(f, tmp_path, flags, needle):
    assert_error(run_cli(*_translate_train(f, tmp_path, *flags)), needle, "--max-model-gb")


@pytest.mark.parametrize("flags, needle", [
    (["--layers", "100000", "--hidden", "16"], "num_hidden_layers 100000 makes a model of"),
    (["--layers", "1", "--hidden", "10000000"], "hidden_size 10000000 makes a model of"),
])
def test_unilm_train_architecture_flags_are_refused_by_the_config_count(f, tmp_path, flags, needle):
    assert_error(run_cli(*_unilm_train(f, tmp_path, *flags)), needle, "--max-model-gb")


def test_word2vec_dim_times_the_vocabulary_is_checked_before_the_tables(f, tmp_path):
    line = assert_error(run_cli("word2vec", "train", f["corpus"], "-o", tmp_path / "w2v", "--min-count", "1",
                                "--dim", "100000000", "--device", "cpu", "--quiet", "--max-model-gb", "1"),
                        "word2vec's two tables of", "dim 100,000,000", "--dim")
    assert "words x dim" in line


@pytest.mark.parametrize("value, needle", [("1000000000", "--window: 1000000000: must be at most 1000"),
                                           ("0", "--window: 0: must be at least 1"),
                                           ("2.5", "--window: '2.5' is not a whole number")])
def test_word2vec_window_is_bounded(f, tmp_path, value, needle):
    assert_error(run_cli("word2vec", "train", f["corpus"], "-o", tmp_path / "w2v", "--window", value), needle)


def test_word2vec_trains_at_the_largest_window(f, tmp_path):
    assert_ok(run_cli("word2vec", "train", f["corpus"], "-o", tmp_path / "w2v", "--min-count", "1", "--dim", "8",
                      "--window", "1000", "--epochs", "1", "--device", "cpu", "--quiet", "--architecture", "cbow"))
    assert os.path.exists(tmp_path / "w2v" / "vectors.txt")


def test_beam_flags_are_bounded(f):
    for argv in (["translate", f["sentences"], "--model", f["translation"]],
                 ["unilm-generate", f["sentences"], "--model", f["unilm"]]):
        assert_error(run_cli(*argv, "--beam", str(10 ** 9)), f"--beam: {10 ** 9}: must be at most 1024")
        assert_error(run_cli(*argv, "--beam", "1025"), "--beam: 1025: must be at most 1024")
    assert_error(run_cli("generate", "--model", f["gpt"], "the", "--beam", "4"), "unrecognized arguments: --beam")


def test_a_beam_whose_search_passes_the_memory_limit_is_refused_before_decoding(f):
    """1,024 beams x 2 sentences: 2,048 rows of cache and scores, over a 1 MB limit."""
    assert_error(translate(f["translation"], f, "--beam", "1024", "--device", "cpu", "--max-model-gb", "0.001"),
                 "a search of beam 1024 over 2 sentences", "--beam or --batch-size")
    assert_error(run_cli("unilm-generate", f["sentences"], "--model", f["unilm"], "--beam", "1024", "--device", "cpu",
                         "--max-model-gb", "0.001"), "a search of beam 1024 over 2 sentences", "--beam or --batch-size")


def test_the_library_refuses_the_same_beams():
    from bertlab.inference.translate import translate_ids
    with pytest.raises(ValueError, match="beam_size 2000: must be at most 1024"):
        translate_ids(None, [[4]], beam_size=2000)
