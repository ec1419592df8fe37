"""Issue 14, "the CLI on a library API": cli/ parses flags and prints; the work is a library function
with explicit arguments. (a) Outside cli/ no module imports argparse or names a Namespace (the
issue's grep check, read from the files); (b) the library functions the inference commands now call
give, called straight from Python, exactly what the commands print or write."""
import ast
import json
import pathlib

import numpy as np
import pytest

from cli_cases import assert_ok, run_cli, write
from serve_fixtures import build_models

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "src" / "bertlab"
SETTINGS = ["--device", "cpu"]

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: threads only add overhead


def _argparse_uses(path: pathlib.Path) -> list[str]:
    """What in one module ties it to argparse: an import of it, or the words argparse / Namespace."""
    text = path.read_text(encoding="utf-8")
    found = []
    for node in ast.walk(ast.parse(text, str(path))):
        if isinstance(node, ast.Import):
            found += [f"imports {a.name}" for a in node.names if a.name.split(".")[0] == "argparse"]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "argparse":
            found.append(f"imports from {node.module}")
    found += [f"mentions {word}" for word in ("argparse", "Namespace") if word in text]
    return found


def test_no_module_outside_cli_imports_argparse_or_names_a_namespace():
    problems = [f"{path.relative_to(PACKAGE)}: {use}" for path in sorted(PACKAGE.rglob("*.py"))
                if path.relative_to(PACKAGE).parts[0] != "cli" for use in _argparse_uses(path)]
    assert not problems, "\n".join(problems)


def test_the_check_finds_argparse_where_it_is():
    """cli/ does use argparse, so a scan that found nothing there would be a check that cannot fail."""
    assert "imports argparse" in _argparse_uses(PACKAGE / "cli" / "__init__.py")
    assert any(_argparse_uses(path) for path in (PACKAGE / "cli").glob("*.py") if path.name != "__init__.py")


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("library_api")
    folders = build_models(root)
    folders["lines"] = write(root / "lines.txt", "the cat sat on mat\n\nwho lives in paris ?\nthe dog ran .\n")
    return folders


def test_generate_file_and_generate_prompt_are_what_generate_prints(models, tmp_path):
    from bertlab.inference.generate import SamplingOptions, generate_file, generate_prompt
    prompts = write(tmp_path / "prompts.txt", "the cat\n\nthe mat number 1\n")
    cli = assert_ok(run_cli("generate", "--model", models["gpt"], "--prompts", prompts, "-n", "12",
                            "--temperature", "0.9", "--seed", "3", "--batch-size", "2", *SETTINGS))
    options = SamplingOptions(max_new_tokens=12, do_sample=True, temperature=0.9)
    lines = list(generate_file(models["gpt"], prompts, options, batch_size=2, seed=3, device="cpu"))
    assert len(lines) == 3 and lines[1] == ""
    assert "".join(line + "\n" for line in lines) == cli.out

    cli = assert_ok(run_cli("generate", "--model", models["gpt"], "the cat", "-n", "10", *SETTINGS))
    pieces = []
    text = generate_prompt(models["gpt"], "the cat", SamplingOptions(max_new_tokens=10), on_text=pieces.append,
                           device="cpu")
    assert pieces[0] == "the cat" and text == "".join(pieces) and cli.out == text + "\n"


def test_translate_file_is_what_translate_prints(models, tmp_path):
    from bertlab.inference.translate import translate_file
    source = write(tmp_path / "source.en", "open the file\n\nsave the file\n")
    cli = assert_ok(run_cli("translate", "--model", models["translator"], source, "--beam", "3", "--nbest", "2",
                            "--max-len", "6", *SETTINGS))
    done = translate_file(models["translator"], source, beam=3, nbest=2, max_len=6, device="cpu")
    assert len(done.texts) == 3 and done.texts[1] == ["", ""] and done.cut == []
    rows = [line.split("\t") for line in cli.out.splitlines()]
    assert [row[2] if len(row) > 2 else "" for row in rows] == [t for texts in done.texts for t in texts]
    assert [int(row[0]) for row in rows] == [1, 1, 2, 2, 3, 3]


def test_extract_features_file_writes_what_extract_features_writes(models, tmp_path):
    from bertlab.inference.features import extract_features_file
    cli = assert_ok(run_cli("extract-features", models["lines"], "--model", models["mlm"], "-o", tmp_path / "cli.npz",
                            "--layers=-1,-2", "--words", "--max-seq-length", "6", "--quiet", *SETTINGS))
    report = extract_features_file(models["mlm"], models["lines"], str(tmp_path / "lib.npz"), layers=[-1, -2],
                                   max_seq_length=6, words=True, device="cpu")
    ours, theirs = np.load(tmp_path / "lib.npz"), np.load(tmp_path / "cli.npz")
    for key in ("values", "offsets", "tokens", "layers"):
        np.testing.assert_array_equal(ours[key], theirs[key])
    assert f"wrote {report.vectors} word vectors x 2 layers for 4 lines" in cli.err
    assert report.truncated == [1, 3] and "2 of 4 lines were longer than --max-seq-length 6 tokens and were truncated (lines 1, 3)" in cli.err


def test_embed_file_and_search_corpus_are_what_embed_and_similar_give(models, tmp_path):
    from bertlab.inference.embedder import embed_file, search_corpus
    cli = assert_ok(run_cli("embed", models["lines"], "--model", models["mlm"], "-o", tmp_path / "cli.npy",
                            "--normalize", "--quiet", *SETTINGS))
    report = embed_file(models["mlm"], models["lines"], str(tmp_path / "lib.npy"), normalize=True, device="cpu")
    np.testing.assert_array_equal(np.load(tmp_path / "lib.npy"), np.load(tmp_path / "cli.npy"))
    assert report.blank == [2] and report.shape == (4, 32) and "1 of 4 lines were blank" in cli.err

    cli = assert_ok(run_cli("similar", "a cat", "paris", "--corpus", models["lines"], "--model", models["mlm"],
                            "-k", "2", "--pooling", "cls", "--quiet", *SETTINGS))
    found = search_corpus(models["mlm"], ["a cat", "paris"], models["lines"], k=2, pooling="cls", device="cpu")
    printed = "".join(f"query: {q}\n" + "".join(f"  {s:.4f}  {line}\n" for s, line in hits) + "\n"
                      for q, hits in zip(["a cat", "paris"], found.hits))
    assert printed == cli.out and found.skipped == [2]


def test_fill_mask_texts_is_what_fill_mask_prints(models):
    from bertlab.inference.fill_mask import fill_mask_texts
    texts = ["the [MASK] sat on mat", "who [MASK] in [MASK] ?"]
    cli = assert_ok(run_cli("fill-mask", *texts, "--model", models["mlm"], "--top-k", "3", "--json", *SETTINGS))
    results = fill_mask_texts(models["mlm"], texts, top_k=3, device="cpu")
    assert [json.loads(line) for line in cli.out.splitlines()] == [
        {"text": t, "masks": [[vars(p) for p in m] for m in masks]} for t, masks in zip(texts, results)]
