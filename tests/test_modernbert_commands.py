"""The commands on a tiny ModernBERT folder: each runs end to end through `bertlab`'s main."""
import numpy as np
import pytest
import torch

from bertlab.cli import main
from bertlab.inference.embed import embed_texts
from bertlab.interop.load import load_model
from modernbert_fixtures import make_folder

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    path = tmp_path_factory.mktemp("mb") / "model"
    make_folder(path, "ModernBertForMaskedLM")
    return path


def test_embed(folder, tmp_path):
    texts = tmp_path / "in.txt"
    texts.write_text("the copyright holder\n\nGNU General Public License, version 2\n")
    out = tmp_path / "out.npy"
    assert main(["embed", "--model", str(folder), "--device", "cpu", "--quiet", str(texts), "-o", str(out)]) == 0
    vectors = np.load(out)
    assert vectors.shape == (3, 32) and not vectors[1].any()
    loaded = load_model(folder)
    with torch.no_grad():
        want = embed_texts(loaded.encoder, loaded.tokenizer, ["the copyright holder"])
    np.testing.assert_allclose(vectors[0], want[0], atol=1e-5)


def test_similar(folder, tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("free software license\nthe quick brown fox\n")
    assert main(["similar", "--model", str(folder), "--device", "cpu", "--corpus", str(corpus), "-k", "1",
                 "the quick brown fox"]) == 0
    assert "the quick brown fox" in capsys.readouterr().out
