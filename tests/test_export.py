"""`bertlab export --onnx`: every kind of model folder as ONNX graphs that onnxruntime runs to the
same outputs as bertlab (1e-4, fp32), on real sentences of varied length and on batches and lengths
other than the ones traced; GPT greedy tokens and translation greedy and beam outputs identical
through bertlab's own decoding code; the real MiniLM's embeddings; clear errors for bad input."""
import csv
import os
import sys

import pytest
import torch

pytest.importorskip("onnxruntime", reason="ONNX export tests need onnxruntime (pip install 'bertlab[export]')")
pytest.importorskip("onnxscript", reason="ONNX export tests need onnxscript (pip install 'bertlab[export]')")

from bertlab.inference.onnx_export import export_onnx, graphs_of, require_onnx  # noqa: E402
from bertlab.inference.onnx_runtime import load_onnx  # noqa: E402
from bertlab.interop.load import LoadedModel, load_model  # noqa: E402
from cli_cases import assert_error, assert_ok, run_cli  # noqa: E402
from export_models import FINETUNED, make_folders  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")
KINDS = ["bert", *FINETUNED, "gpt", "translation"]
DATA = os.path.join(os.path.dirname(__file__), "..", "data")


def man_page_descriptions(split="test", n=48):
    with open(os.path.join(DATA, "manpages", f"{split}.tsv"), encoding="utf-8") as f:
        return [row["description"] for row in csv.DictReader(f, delimiter="\t")][:n]


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    return make_folders(tmp_path_factory.mktemp("export"))


@pytest.fixture(scope="module")
def exports(folders, tmp_path_factory):
    """Each kind exported once (the bert kind through the command line); {kind: (folder, report)}."""
    root, done = tmp_path_factory.mktemp("onnx"), {}

    def export(kind):
        if kind not in done:
            out = str(root / f"{kind}.onnx")
            if kind == "bert":
                assert_ok(run_cli("export", folders[kind], "--onnx", out))
                done[kind] = out, None
            else:
                done[kind] = out, export_onnx(folders[kind], out, log=lambda m: None)
        return done[kind]
    return export


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_exports_and_matches_bertlab(kind, exports):
    folder, report = exports(kind)
    meta_kind = "finetuned" if kind in FINETUNED else kind
    assert load_onnx(folder).meta["kind"] == meta_kind
    if report is not None:  # the command line printed its check; the library returns it
        assert all(v <= 1e-4 for k, v in report.items() if k.startswith("max_abs"))
        assert any(k.startswith("max_abs") for k in report)
        if kind in ("gpt", "translation"):
            assert report["tokens_identical"] is True


@pytest.mark.parametrize("kind", ["bert", "ner", "squad", "classify"])
def test_dynamic_axes_other_batches_and_lengths(kind, folders, exports):
    """Batches of 1 and 5 and lengths 3..20, none of them the traced (2, 5), agree at real positions."""
    loaded, onnx_model = load_model(folders[kind]), load_onnx(exports(kind)[0])
    torch.manual_seed(1)
    for batch, length in [(1, 3), (5, 20), (3, 11)]:
        ids = torch.randint(5, loaded.model.config.vocab_size, (batch, length))
        mask = torch.ones(batch, length, dtype=torch.long)
        mask[0, length - length // 3:] = 0
        with torch.inference_mode():
            ours, theirs = loaded.model(ids, None, mask), onnx_model(ids, None, mask)
        if kind == "bert":
            ours, theirs = ours.sequence_output, theirs.sequence_output
        elif kind == "squad":
            ours, theirs = torch.stack(ours, -1), torch.stack(theirs, -1)
        real = mask.bool() if ours.dim() >= 2 and ours.shape[:2] == mask.shape else slice(None)
        torch.testing.assert_close(theirs[real], ours[real], atol=1e-4, rtol=0)


def test_gpt_sampling_through_onnxruntime_matches(folders, exports):
    """Seeded top-k sampling draws the same tokens from onnxruntime's logits as from bertlab's."""
    from bertlab.inference.generate import SamplingOptions, generate
    loaded, onnx_model = load_model(folders["gpt"]), load_onnx(exports("gpt")[0])
    prompts = [loaded.tokenizer.encode(t) for t in ("list directory", "create a child process")]
    options = SamplingOptions(max_new_tokens=10, do_sample=True, temperature=0.9, top_k=5)
    ours = generate(loaded.model, prompts, options, generator=torch.Generator().manual_seed(3), prepack=False)
    theirs = generate(onnx_model, prompts, options, generator=torch.Generator().manual_seed(3))
    assert ours == theirs and all(len(o) == 10 for o in ours)


def test_check_fails_loudly_when_the_export_differs(folders, exports, tmp_path):
    """The check is not a formality: a model whose weights moved after the export fails it."""
    from bertlab.inference.onnx_check import check_export
    loaded = load_model(folders["classify"])
    with torch.no_grad():
        loaded.model.classifier.bias.add_(1e-3)
    with pytest.raises(ValueError, match="differs from bertlab beyond 0.0001"):
        check_export(loaded, exports("classify")[0], log=lambda m: None)


def test_minilm_embeddings_through_onnxruntime(tmp_path_factory):
    """The real all-MiniLM-L6-v2: mean-pooled embeddings of 48 real man-page sentences (4-20 words)
    through onnxruntime equal bertlab's within 1e-4."""
    from bertlab.inference.embed import embed_texts
    out = str(tmp_path_factory.mktemp("minilm") / "minilm.onnx")
    report = export_onnx("minilm", out, log=lambda m: None)
    assert report["max_abs sequence_output"] <= 1e-4
    loaded, onnx_model = load_model("minilm"), load_onnx(out)
    texts = man_page_descriptions()
    ours = embed_texts(loaded.model, loaded.tokenizer, texts, batch_size=16)
    theirs = embed_texts(onnx_model, loaded.tokenizer, texts, batch_size=16)
    assert abs(ours - theirs).max() <= 1e-4


def test_not_a_model_folder_is_a_clear_error(tmp_path):
    (tmp_path / "notes.txt").write_text("hello\n")
    assert_error(run_cli("export", str(tmp_path), "--onnx", str(tmp_path / "out")), "not a model folder")
    assert not os.path.exists(tmp_path / "out")


def test_existing_output_is_refused_without_overwrite(folders, tmp_path):
    (tmp_path / "out").mkdir()
    assert_error(run_cli("export", folders["bert"], "--onnx", str(tmp_path / "out")), "exists", "--overwrite")


def test_unknown_kind_is_a_clear_error():
    with pytest.raises(ValueError, match="kind 'word2vec' cannot be exported"):
        graphs_of(LoadedModel("word2vec", torch.nn.Linear(2, 2), None))


def test_missing_onnxruntime_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import onnxruntime now raises ImportError
    with pytest.raises(ValueError, match=r"onnxruntime is missing\): pip install 'bertlab\[export\]'"):
        require_onnx()


def test_plain_path_computes_what_the_packed_path_computes(folders):
    """The plain model the export traces (padded, masked) equals bertlab's packed CPU path at real positions."""
    from bertlab.models.accelerate import plain_model
    model = load_model(folders["bert"]).model
    ids = torch.randint(5, model.config.vocab_size, (3, 9))
    mask = torch.tensor([[1] * 9, [1] * 4 + [0] * 5, [1] * 7 + [0] * 2])
    with torch.no_grad():
        packed = model(ids, attention_mask=mask).sequence_output
        with plain_model(model):
            plain = model(ids, attention_mask=mask).sequence_output
    torch.testing.assert_close(plain[mask.bool()], packed[mask.bool()], atol=1e-6, rtol=0)


def test_int8_export_is_quantised_and_reports_its_cost(folders, tmp_path):
    """--int8: the fp32 graphs pass the 1e-4 check first; the int8 graphs then differ (they are
    quantised) by a reported, small amount, and onnx.json says int8."""
    report = export_onnx(folders["ner"], tmp_path / "ner.onnx", int8=True, log=lambda m: None)
    assert report["max_abs logits"] <= 1e-4
    assert 0 < report["int8"]["max_abs logits"] < 0.1
    assert load_onnx(str(tmp_path / "ner.onnx")).meta["int8"] is True
