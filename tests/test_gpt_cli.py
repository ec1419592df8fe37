"""gpt-train and generate from the command line: a tiny end-to-end run, and errors that name the
file, line and problem instead of a traceback."""
import pytest

from bertlab.cli import main


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cli")
    text = folder / "corpus.txt"
    text.write_text("".join(f"the cat sat on mat number {i}.\n" for i in range(300)), encoding="utf-8")
    out = folder / "run"
    assert main([ "gpt-train", str(text), "--out", str(out), "--tokenizer", "char", "--preset", "test",
                  "--block-size", "32", "--batch-size", "8", "--max-steps", "20", "--eval-interval", "10",
                  "--warmup", "2", "--lr", "3e-3"]) == 0
    return out


def test_train_writes_everything(trained):
    for name in ["checkpoint.pt", "curves.png", "metrics.jsonl", "summary.json", "samples.txt",
                 "model/config.json", "model/model.safetensors", "model/chars.json", "data/meta.json"]:
        assert (trained / name).exists(), name


def test_existing_run_needs_resume_or_overwrite(trained, capsys):
    assert main(["gpt-train", str(trained / "unused.txt"), "--out", str(trained), "--resume"]) == 2
    assert "no such file" in capsys.readouterr().err
    corpus = str(trained.parent / "corpus.txt")
    assert main(["gpt-train", corpus, "--out", str(trained), "--tokenizer", "char"]) == 2
    assert "pass --resume to continue it or --overwrite" in capsys.readouterr().err


def test_generate_greedy_streams_and_stops(trained, capsys):
    assert main(["generate", "--model", str(trained / "model"), "the cat", "-n", "20"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("the cat") and len(out) > len("the cat")
    assert main(["generate", "--model", str(trained / "model"), "the cat", "-n", "20", "--stop", "t"]) == 0
    stopped = capsys.readouterr().out
    assert "t" not in stopped[len("the cat"):].rstrip("\n")


def test_generate_batch_file_in_order(trained, tmp_path, capsys):
    prompts = tmp_path / "p.txt"
    prompts.write_text("the\nmat num\ncat sat on\n", encoding="utf-8")
    assert main(["generate", "--model", str(trained / "model"), "--prompts", str(prompts), "-n", "5",
                 "--temperature", "0.7", "--top-k", "5"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line[:3] for line in lines] == ["the", "mat", "cat"]


def test_errors_name_file_line_and_problem(tmp_path, capsys):
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    assert main(["gpt-train", str(empty), "--out", str(tmp_path / "o")]) == 2
    assert "empty.txt: the file is empty" in capsys.readouterr().err
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"fine\nalso fine\nbad \xff byte\n")
    assert main(["gpt-train", str(bad), "--out", str(tmp_path / "o")]) == 2
    assert "bad.txt:3: not valid UTF-8" in capsys.readouterr().err
    assert main(["generate", "--model", str(tmp_path / "missing"), "hi"]) == 2
    assert "missing: no such model folder" in capsys.readouterr().err
    assert main(["gpt-train", str(bad), "--out", str(tmp_path / "fresh"), "--resume"]) == 2
    assert "no checkpoint.pt" in capsys.readouterr().err
