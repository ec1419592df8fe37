"""The commands on a tiny ModernBERT folder: each runs end to end through `bertlab`'s main (or the
public Python API where the command prints what a test cannot compare), checked against
transformers' ModernBERT on the same folder and `tokenizers` on its tokenizer.json."""
import json

import numpy as np
import pytest
import torch

from bertlab.cli import main
from bertlab.inference.embed import embed_texts
from bertlab.interop.load import load_model
from modernbert_fixtures import make_folder
from test_serve import ready

transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

# longer than the local window (6 tokens), so the local layers see part of the sentence only
LONG = "the copyright holder may distribute the software under the license"
PAIR = "free software ||| the quick brown fox jumps over the lazy dog"


pytestmark = pytest.mark.usefixtures("one_thread")  # conftest's: one torch thread per test


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    path = tmp_path_factory.mktemp("mb") / "model"
    make_folder(path, "ModernBertForMaskedLM")
    return path


def hf_model(path, head="ModernBertForMaskedLM"):
    """transformers' class `head` read from `path`, with no missing or unexpected tensor (the bare
    encoder of a head model's folder: none missing)."""
    model, info = getattr(transformers, head).from_pretrained(path, output_loading_info=True,
                                                              attn_implementation="eager")
    assert not info["missing_keys"] and not info["mismatched_keys"]
    assert not info["unexpected_keys"] or head == "ModernBertModel"
    return model.eval()


def hf_ids(path, text, pair=None) -> list[int]:
    """The ids `tokenizers` gives (with the template's [CLS]/[SEP])."""
    tok = tokenizers.Tokenizer.from_file(str(path / "tokenizer.json"))
    return tok.encode(text, pair).ids


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


# ---- fill-mask ----------------------------------------------------------------------------------------
def test_fill_mask_matches_hf_masked_lm(folder, capsys):
    """ModernBERT's [MASK] takes the space before it (lstrip): the ids are tokenizers', and the top
    tokens and probabilities HF's ModernBertForMaskedLM's."""
    texts = ["the copyright [MASK] may distribute", "[MASK] software under the [MASK] license"]
    assert main(["fill-mask", "--model", str(folder), "--device", "cpu", "--json", "--top-k", "3", *texts]) == 0
    results = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    hf = hf_model(folder)
    mask = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json")).token_to_id("[MASK]")
    for text, result in zip(texts, results):
        ids = hf_ids(folder, text)
        with torch.no_grad():
            probabilities = hf(torch.tensor([ids])).logits[0].softmax(-1)
        positions = [i for i, t in enumerate(ids) if t == mask]
        assert len(positions) == len(result["masks"]) == text.count("[MASK]")
        for position, predictions in zip(positions, result["masks"]):
            values, top = probabilities[position].topk(3)
            assert [p["token_id"] for p in predictions] == top.tolist()
            np.testing.assert_allclose([p["probability"] for p in predictions], values.numpy(), atol=1e-5)


def test_fill_mask_without_the_head_is_a_clear_error(tmp_path, capsys):
    make_folder(tmp_path / "bare", "ModernBertModel")
    assert main(["fill-mask", "--model", str(tmp_path / "bare"), "--device", "cpu", "a [MASK] b"]) == 2
    err = capsys.readouterr().err
    assert str(tmp_path / "bare") in err and "ModernBertForMaskedLM" in err and "Traceback" not in err


# ---- extract-features and attention ------------------------------------------------------------------
def test_extract_features_are_hf_hidden_states(folder, tmp_path):
    """Every chosen layer's vectors for a single line and a pair (padded together, packed away)
    equal HF's output_hidden_states within 1e-5; the tokens are tokenizers'."""
    lines = tmp_path / "lines.txt"
    lines.write_text(f"{LONG}\n{PAIR}\n")
    out = tmp_path / "f.npz"
    layers = [-1, 0, 2]
    assert main(["extract-features", "--model", str(folder), "--device", "cpu", "--quiet", str(lines), "-o", str(out),
                 "--layers=" + ",".join(map(str, layers))]) == 0
    saved = np.load(out)
    hf = hf_model(folder, "ModernBertModel")
    tok = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
    for i, (text, pair) in enumerate([(LONG, None), tuple(PAIR.split(" ||| "))]):
        encoding = tok.encode(text, pair)
        with torch.no_grad():
            states = hf(torch.tensor([encoding.ids]), output_hidden_states=True).hidden_states
        want = torch.stack([states[k + 1 if k >= 0 else k][0] for k in layers], 1).numpy()
        rows = slice(saved["offsets"][i], saved["offsets"][i + 1])
        assert list(saved["tokens"][rows]) == encoding.tokens
        np.testing.assert_allclose(saved["values"][rows], want, atol=1e-5)


def test_extract_features_words(folder, tmp_path):
    lines = tmp_path / "lines.txt"
    lines.write_text("the copyright holder's license\n")
    out = tmp_path / "w.jsonl"
    assert main(["extract-features", "--model", str(folder), "--device", "cpu", "--quiet", str(lines), "-o", str(out),
                 "--words", "--layers=-1"]) == 0
    words = [f["word"] for f in json.loads(out.read_text())["features"]]
    assert words == ["[CLS]", "the", "copyright", "holder", "'s", "license", "[SEP]"]


@pytest.mark.parametrize("layer", [0, 1])  # a global layer, then a local one (a window of 6 tokens)
def test_attention_is_hf_eager_attention(folder, layer, capsys):
    from bertlab import api
    report = api.attention(str(folder), LONG, layer=layer, device="cpu")
    ids = hf_ids(folder, LONG)
    with torch.no_grad():
        want = hf_model(folder, "ModernBertModel")(torch.tensor([ids]), output_attentions=True).attentions[layer][0]
    assert report.weights.shape == want.shape == (4, len(ids), len(ids))
    np.testing.assert_allclose(report.weights, want.numpy(), atol=1e-5)
    far = np.abs(np.arange(len(ids))[:, None] - np.arange(len(ids))[None]) > 3
    assert (report.weights[:, far] == 0).all() == (layer == 1)  # local layers see 3 tokens each side
    assert main(["attention", "--model", str(folder), "--device", "cpu", LONG, "--layer", str(layer),
                 "--print-top", "[CLS]", "--top-k", "2"]) == 0
    top = want.mean(0)[0].topk(2).values.tolist()
    printed = [float(line.split()[0]) for line in capsys.readouterr().out.splitlines()[1:]]
    np.testing.assert_allclose(printed, top, atol=1e-4)


# ---- finetune and predict ------------------------------------------------------------------------------
ROWS = [("free software license", "the program is free", "yes"), ("the quick brown fox", "a lazy dog", "no"),
        ("copyright holder", "the copyright of the holder", "yes"), ("version two", "jumps over the moon", "no"),
        ("public license", "the public may copy it", "yes"), ("a brown dog", "nothing at all here", "no")]


def finetune(folder, out, *args):
    assert main(["finetune", "--model", str(folder), "--epochs", "2", "--batch-size", "4", "--lr", "1e-3",
                 "--device", "cpu", "--quiet", "--seed", "0", "-o", str(out), *map(str, args)]) == 0
    return out / "model"


def reloads_as_modernbert(model_dir, head):
    """The fine-tuned folder: load_model gives ModernBERT's task class, and HF reads it whole."""
    loaded = load_model(model_dir)
    assert loaded.kind == "finetuned" and type(loaded.model).__name__ == head
    return loaded, hf_model(model_dir, head)


@pytest.mark.parametrize("pairs", [False, True])
def test_finetune_classify_then_predict(folder, tmp_path, pairs):
    table = tmp_path / "train.tsv"
    header, rows = ("sentence\ttext_b\tlabel" if pairs else "sentence\tlabel"), [
        "\t".join(r if pairs else (r[0], r[2])) for r in ROWS]
    table.write_text("\n".join([header, *rows]) + "\n", encoding="utf-8")
    model_dir = finetune(folder, tmp_path / "run", "--task", "classify", "--train", table, "--dev", table,
                         *(["--text-b", "text_b"] if pairs else []))
    loaded, hf = reloads_as_modernbert(model_dir, "ModernBertForSequenceClassification")
    out = tmp_path / "p.jsonl"
    assert main(["predict", "--model", str(model_dir), str(table), "-o", str(out), "--quiet"]) == 0
    predicted = [json.loads(line) for line in out.read_text().splitlines()]
    for (a, b, _), p in zip(ROWS, predicted):
        ids = hf_ids(folder, a, b if pairs else None)  # [CLS] a [SEP] b [SEP]: ModernBERT has no segments
        with torch.no_grad():
            probabilities = hf(torch.tensor([ids])).logits[0].softmax(-1)
        assert p["label"] == hf.config.id2label[int(probabilities.argmax())]
        assert abs(p["probability"] - float(probabilities.max())) < 1e-5
    from bertlab.finetune.tasks import task_from_state
    task = task_from_state(loaded)
    features = task.featurize(task.read(table), loaded.tokenizer)
    assert [f["input_ids"] for f in features] == [hf_ids(folder, a, b if pairs else None) for a, b, _ in ROWS]


CONLL = ("The O\ncopyright O\nholder O\nFree B-ORG\nSoftware I-ORG\nFoundation I-ORG\nmay O\ncopy O\n\n"
         "GNU B-MISC\nGeneral I-MISC\nPublic I-MISC\nLicense I-MISC\nversion O\n2 O\n\n"
         "Richard B-PER\nStallman I-PER\nwrote O\nit O\n")


def test_finetune_ner_then_predict(folder, tmp_path):
    train = tmp_path / "train.txt"
    train.write_text(CONLL, encoding="utf-8")
    model_dir = finetune(folder, tmp_path / "run", "--task", "ner", "--train", train, "--dev", train,
                         "--max-seq-length", "32")
    loaded, hf = reloads_as_modernbert(model_dir, "ModernBertForTokenClassification")
    out = tmp_path / "p.jsonl"
    assert main(["predict", "--model", str(model_dir), str(train), "-o", str(out), "--quiet"]) == 0
    predicted = [json.loads(line) for line in out.read_text().splitlines()]
    assert [p["words"] for p in predicted] == [s.split()[::2] for s in CONLL.strip().split("\n\n")]
    # each tag is HF's argmax at the word's first piece, in a sentence that fits one window
    from bertlab.finetune.tasks import task_from_state
    task = task_from_state(loaded)
    features = task.featurize(task.read(train), loaded.tokenizer)
    last = [f for f in features if f["example_index"] == 2]
    assert len(last) == 1
    with torch.no_grad():
        logits = hf(torch.tensor([last[0]["input_ids"]])).logits[0]
    want = [task.labels[int(logits[i].argmax())] for i, word in enumerate(last[0]["token_to_word"]) if word >= 0]
    assert predicted[2]["tags"] == want


def test_finetune_squad_then_predict(folder, tmp_path):
    context = "the copyright holder is the Free Software Foundation, which may publish revised versions"
    qas = [{"id": str(i), "question": q, "answers": [{"text": a, "answer_start": context.index(a)}]}
           for i, (q, a) in enumerate([("who holds the copyright?", "the Free Software Foundation"),
                                       ("what may it publish?", "revised versions")])]
    train = tmp_path / "train.json"
    train.write_text(json.dumps({"data": [{"title": "t", "paragraphs": [{"context": context, "qas": qas}]}]}))
    model_dir = finetune(folder, tmp_path / "run", "--task", "squad", "--train", train, "--dev", train,
                         "--max-seq-length", "40", "--doc-stride", "8")
    loaded, hf = reloads_as_modernbert(model_dir, "ModernBertForQuestionAnswering")
    from bertlab.finetune.tasks import task_from_state
    task = task_from_state(loaded)
    features = task.featurize(task.read(train), loaded.tokenizer)
    assert len(features) > 2  # the context is read in windows
    for f in features:
        # [CLS] question [SEP] window [SEP], as tokenizers' pair template lays it out
        n = f["token_type_ids"].index(1)
        assert f["input_ids"][:n] == hf_ids(folder, qas[0]["question"] if f["example_index"] == 0
                                            else qas[1]["question"])[:n]
        if f["start_position"] > 0:  # the window holds the answer: its offsets cut out the answer's text
            start, end = f["token_offsets"][f["start_position"]][0], f["token_offsets"][f["end_position"]][1]
            assert context[start:end] == qas[f["example_index"]]["answers"][0]["text"]
    with torch.no_grad():
        want = hf(torch.tensor([features[0]["input_ids"]])).start_logits[0]
        got = loaded.model(torch.tensor([features[0]["input_ids"]]))[0][0]
    assert (got - want).abs().max() < 1e-5
    out = tmp_path / "p.jsonl"
    assert main(["predict", "--model", str(model_dir), str(train), "-o", str(out), "--quiet"]) == 0
    for line in out.read_text().splitlines():
        answer = json.loads(line)["answer"]
        assert answer == answer.strip() and answer in context


# ---- int8, serve -------------------------------------------------------------------------------------------
def test_embed_int8(folder, tmp_path, capsys):
    """--int8 swaps ModernBERT's linear layers (qkv, GeGLU, output) for dynamic int8 ones too: the
    vectors are the library's int8 model's, close to fp32's."""
    from bertlab.inference.int8 import quantize_int8
    texts = tmp_path / "in.txt"
    texts.write_text(f"{LONG}\nthe quick brown fox\n")
    out = tmp_path / "out.npy"
    assert main(["embed", "--model", str(folder), "--device", "cpu", "--quiet", "--int8", str(texts), "-o",
                 str(out)]) == 0
    got, loaded = np.load(out), load_model(folder)
    with torch.no_grad():
        fp32 = embed_texts(loaded.encoder, loaded.tokenizer, [LONG, "the quick brown fox"])
        int8 = embed_texts(quantize_int8(loaded.encoder), loaded.tokenizer, [LONG, "the quick brown fox"])
    np.testing.assert_allclose(got, int8, atol=1e-5)
    cosine = (got * fp32).sum(1) / np.linalg.norm(got, axis=1) / np.linalg.norm(fp32, axis=1)
    assert cosine.min() > 0.95 and np.abs(got - fp32).max() > 1e-6


@pytest.mark.parametrize("int8", [False, True])
def test_serve_embed_fill_mask_and_attention(folder, int8):
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from bertlab.inference.fill_mask import fill_mask
    from bertlab.inference.int8 import quantize_int8
    from bertlab.serve import create_app
    loaded = load_model(folder)
    if int8:
        quantize_int8(loaded.model)
    with TestClient(create_app({"mb": str(folder)}, int8=int8)) as client:
        served = ready(client).get("/v1/models").json()["models"][0]
        assert served["kind"] == "modernbert" and set(served["tasks"]) == {"embed", "similar", "attention", "fill-mask"}
        embedded = client.post("/v1/embed", json={"model": "mb", "texts": [LONG]})
        filled = client.post("/v1/fill-mask", json={"model": "mb", "texts": ["the copyright [MASK] may"]})
        attention = client.post("/v1/attention", json={"model": "mb", "text": LONG, "layer": 1})
    assert embedded.status_code == filled.status_code == attention.status_code == 200, (embedded.text, filled.text)
    with torch.no_grad():
        want = embed_texts(loaded.encoder, loaded.tokenizer, [LONG])
        masks = fill_mask(loaded.model, loaded.tokenizer, ["the copyright [MASK] may"], top_k=5)
    np.testing.assert_allclose(embedded.json()["embeddings"], want, atol=1e-5)
    assert [p["token_id"] for p in filled.json()["results"][0][0]] == [p.token_id for p in masks[0][0]]
    assert attention.json()["tokens"] == tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json")).encode(
        LONG).tokens


def test_serve_a_finetuned_modernbert(folder, tmp_path):
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from bertlab.serve import create_app
    table = tmp_path / "train.tsv"
    table.write_text("sentence\tlabel\n" + "".join(f"{a}\t{label}\n" for a, _, label in ROWS), encoding="utf-8")
    model_dir = finetune(folder, tmp_path / "run", "--task", "classify", "--train", table, "--epochs", "1")
    with TestClient(create_app({"cls": str(model_dir)})) as client:
        answer = ready(client).post("/v1/classify", json={"model": "cls", "texts": [ROWS[0][0]]})
    assert answer.status_code == 200, answer.text
    assert answer.json()["predictions"][0]["label"] in ("yes", "no")


# ---- export (ONNX) --------------------------------------------------------------------------------------
# Real-ish texts of 4 to 30+ tokens: the longest runs far past the local window (6), the shortest within it.
EXPORT_TEXTS = [LONG + ", provided that the copyright notice and this permission notice are kept", "free software",
                "the quick brown fox jumps over the lazy dog", "GNU General Public License, version 2", LONG]


def onnx_inputs(loaded, texts=EXPORT_TEXTS):
    """A padded batch of `texts` (ids and mask; ModernBERT has no segments), checked to be padded and
    to hold a row longer than the local window."""
    from bertlab.inference.onnx_check import bert_inputs
    ids, mask, _ = bert_inputs(loaded.tokenizer, texts, loaded.model.config)
    lengths = mask.sum(1)
    assert lengths.max() > 3 * loaded.model.config.local_attention and lengths.min() < lengths.max()
    return ids, mask


def test_export_onnx_matches_the_encoder(folder, tmp_path, capsys):
    """`bertlab export` of a ModernBERT folder: its encoder as model.onnx with inputs input_ids and
    attention_mask and output sequence_output (no segments, no pooler); onnxruntime gives our
    hidden states within 1e-4 at every real position of a padded batch, and our embeddings through
    embed_texts, which runs on the export as on the model."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnxscript")
    from bertlab.inference.onnx_runtime import load_onnx
    out = tmp_path / "mb.onnx"
    assert main(["export", str(folder), "--onnx", str(out)]) == 0
    assert "check max_abs sequence_output" in capsys.readouterr().err
    loaded, onnx_model = load_model(folder), load_onnx(out)
    graph = onnx_model.meta["graphs"]["model.onnx"]
    assert onnx_model.meta["kind"] == "modernbert" and type(onnx_model.config).__name__ == "ModernBertConfig"
    assert graph == {"inputs": ["input_ids", "attention_mask"], "outputs": ["sequence_output"]}
    ids, mask = onnx_inputs(loaded)
    with torch.inference_mode():
        ours = loaded.encoder(ids, attention_mask=mask)
        theirs = onnx_model(ids, attention_mask=mask)
        assert theirs.pooled_output is None
        torch.testing.assert_close(theirs.sequence_output[mask.bool()], ours.sequence_output[mask.bool()],
                                   atol=1e-4, rtol=0)
        vectors = embed_texts(onnx_model, loaded.tokenizer, EXPORT_TEXTS)
        want = embed_texts(loaded.encoder, loaded.tokenizer, EXPORT_TEXTS)
    np.testing.assert_allclose(vectors, want, atol=1e-4, rtol=0)


def finetuned_folder(folder, path, task_name):
    """A folder as `bertlab finetune` writes it from `folder` (its head new, untrained)."""
    from bertlab.finetune.setup import load_base_model
    from bertlab.finetune.tasks import make_task
    from bertlab.interop.finetuned import save_finetuned
    labels = {"classify": ["no", "yes"], "ner": ["O", "B-X", "I-X"], "squad": None}[task_name]
    task = make_task(task_name, labels=labels)
    built = load_base_model(task, folder, quiet=True)
    model, tokenizer = built.model, built.tokenizer
    save_finetuned(path, model.eval(), tokenizer, task.state())
    return path


@pytest.mark.parametrize("task_name", ["classify", "ner", "squad"])
def test_export_onnx_of_a_finetuned_modernbert(folder, tmp_path, task_name):
    """A fine-tuned ModernBERT folder exports its head's logits (squad: start and end) from
    input_ids and attention_mask; equal to ours within 1e-4 at the real positions of a padded batch.
    --int8 (classify) quantises the graph after that check and reports its cost, small and nonzero."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnxscript")
    from bertlab.inference.onnx_export import export_onnx
    from bertlab.inference.onnx_runtime import load_onnx
    model_dir = finetuned_folder(folder, tmp_path / "model", task_name)
    int8 = task_name == "classify"
    report = export_onnx(model_dir, tmp_path / "out", int8=int8, log=lambda m: None)
    names = ["start_logits", "end_logits"] if task_name == "squad" else ["logits"]
    assert all(report[f"max_abs {name}"] <= 1e-4 for name in names), report
    onnx_model = load_onnx(tmp_path / "out")
    assert onnx_model.meta["graphs"]["model.onnx"] == {"inputs": ["input_ids", "attention_mask"], "outputs": names}
    if int8:
        assert 0 < report["int8"]["max_abs logits"] < 0.1 and onnx_model.meta["int8"] is True
        return
    loaded = load_model(model_dir)
    ids, mask = onnx_inputs(loaded)
    with torch.inference_mode():
        ours, theirs = loaded.model(ids, attention_mask=mask), onnx_model(ids, attention_mask=mask)
    ours, theirs = (torch.stack(t, -1) if isinstance(t, tuple) else t for t in (ours, theirs))
    real = mask.bool() if task_name != "classify" else slice(None)
    torch.testing.assert_close(theirs[real], ours[real], atol=1e-4, rtol=0)


# ---- distill ------------------------------------------------------------------------------------------
def test_distill_a_finetuned_modernbert_into_fewer_layers(folder, tmp_path, capsys):
    """Task distillation ModernBERT -> ModernBERT: a fine-tuned 4-layer teacher (global layers 0
    and 2) into 2 layers copied from teacher layers 0 and 2, both kept global (layer_types) though
    global_attn_every_n_layers would make the second local; the student trains on all three terms,
    is a ModernBERT folder that predict reads and transformers reads to the same logits."""
    table = tmp_path / "train.tsv"
    table.write_text("sentence\tlabel\n" + "".join(f"{a}\t{label}\n" for a, _, label in ROWS), encoding="utf-8")
    teacher = finetune(folder, tmp_path / "teacher", "--task", "classify", "--train", table, "--epochs", "1")
    out = tmp_path / "student"
    code = main(["distill", "--teacher", str(teacher), "--student-layers", "2", "--train", str(table), "--dev",
                 str(table), "--lr", "3e-3", "--epochs", "2", "--batch-size", "3", "--device", "cpu", "--quiet",
                 "-o", str(out)])
    assert code == 0, capsys.readouterr().err
    train = [r for r in map(json.loads, open(out / "metrics.jsonl")) if r["kind"] == "train"]
    assert len(train) == 4 and all({"soft_loss", "hard_loss", "cos_loss"} <= set(r) for r in train)
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["teacher_layers"], summary["student_layers"]) == (4, 2)
    loaded, hf = reloads_as_modernbert(out / "model", "ModernBertForSequenceClassification")
    assert loaded.model.config.layer_types == ["full_attention", "full_attention"]
    assert [layer.attention.window for layer in loaded.model.modernbert.layers] == [None, None]
    ids = hf_ids(folder, LONG)  # past the local window: a local layer would see less of it
    with torch.no_grad():
        torch.testing.assert_close(loaded.model(torch.tensor([ids])), hf(torch.tensor([ids])).logits,
                                   atol=1e-5, rtol=0)
    assert main(["predict", "--model", str(out / "model"), str(table), "-o", str(tmp_path / "p.jsonl"),
                 "--quiet"]) == 0
    assert len((tmp_path / "p.jsonl").read_text().splitlines()) == len(ROWS)


def test_distill_between_bert_and_modernbert_is_refused(folder, tmp_path, capsys):
    """BERT and ModernBERT read text with different tokenizers and distillation compares the two
    models on the same token ids, so a BERT teacher with a ModernBERT student, or the other way
    round, is refused before any work, naming both folders and the reason; so is a ModernBERT
    student whose tokenizer.json differs from its ModernBERT teacher's."""
    import shutil

    from bertlab import BertConfig, BertModel, BertTokenizer, save_pretrained
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "free", "software", "the", "quick", "fox"]
    bert = tmp_path / "bert"
    save_pretrained(BertModel(BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2,
                                         num_attention_heads=4, intermediate_size=40)),
                    bert, BertTokenizer({t: i for i, t in enumerate(vocab)}))
    other = tmp_path / "other"
    shutil.copytree(folder, other)
    spec = json.loads((other / "tokenizer.json").read_text())
    words = [w for w in spec["model"]["vocab"] if w.isalpha()][:2]
    spec["model"]["vocab"][words[0]], spec["model"]["vocab"][words[1]] = (spec["model"]["vocab"][words[1]],
                                                                          spec["model"]["vocab"][words[0]])
    (other / "tokenizer.json").write_text(json.dumps(spec))
    table = tmp_path / "train.tsv"
    table.write_text("sentence\tlabel\n" + "".join(f"{a}\t{label}\n" for a, _, label in ROWS), encoding="utf-8")
    text = tmp_path / "text.txt"
    text.write_text("free software\n" * 20)
    cases = [(bert, folder, ["--data", text], "share a tokenizer"), (folder, bert, ["--train", table], "share a tokenizer"),
             (bert, folder, ["--train", table], "share a tokenizer"),
             (finetuned_folder(folder, tmp_path / "teacher", "classify"), other, ["--train", table],
              "different tokenizer.json")]
    for teacher, student, data, message in cases:
        out = tmp_path / "out"
        assert main(["distill", "--teacher", str(teacher), "--student", str(student), *map(str, data),
                     "--device", "cpu", "--quiet", "-o", str(out)]) == 2, (teacher, student, data)
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, err
        if message == "share a tokenizer":
            assert str(bert) in err and str(folder) in err and "WordPiece" in err and "byte-level BPE" in err, err
        assert not out.exists()


def wordpiece_bert_and_modernbert(root):
    """A tiny BERT folder and a tiny ModernBERT folder of one WordPiece vocabulary, the ModernBERT
    written as `pretrain --recipe modernbert` writes it (vocab.txt beside tokenizer.json)."""
    from bertlab import BertConfig, BertModel, BertTokenizer, save_pretrained
    from bertlab.interop.hf_modernbert import save_modernbert
    from bertlab.models.modernbert import ModernBertForMaskedLM
    from bertlab.models.modernbert_config import ModernBertConfig
    words = sorted({w for row in ROWS for text in row[:2] for w in text.split()})
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]
    tokenizer = BertTokenizer({t: i for i, t in enumerate(vocab)})
    torch.manual_seed(0)
    bert, modern = root / "bert", root / "modernbert"
    save_pretrained(BertModel(BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2,
                                         num_attention_heads=4, intermediate_size=40)), bert, tokenizer)
    config = ModernBertConfig(vocab_size=len(vocab), hidden_size=32, intermediate_size=40, num_hidden_layers=2,
                              num_attention_heads=4, local_attention=6, global_attn_every_n_layers=2,
                              max_position_embeddings=64, pad_token_id=0, cls_token_id=2, sep_token_id=3,
                              bos_token_id=2, eos_token_id=3)
    save_modernbert(ModernBertForMaskedLM(config), modern, tokenizer)
    return bert, modern


@pytest.mark.parametrize("teacher_kind", ["bert", "modernbert"])
def test_distill_between_bert_and_modernbert_of_one_wordpiece_vocabulary(tmp_path, capsys, teacher_kind):
    """A BERT and a ModernBERT that read text with the same WordPiece vocabulary distil into each
    other, either way round, on all three terms; the student is a folder of its own family that
    predict reads. A student of another vocabulary is still refused (check_same_vocabulary)."""
    bert, modern = wordpiece_bert_and_modernbert(tmp_path)
    teacher_base, student = (bert, modern) if teacher_kind == "bert" else (modern, bert)
    table = tmp_path / "train.tsv"
    table.write_text("sentence\tlabel\n" + "".join(f"{a}\t{label}\n" for a, _, label in ROWS), encoding="utf-8")
    teacher = finetune(teacher_base, tmp_path / "teacher", "--task", "classify", "--train", table)
    out = tmp_path / "student"
    code = main(["distill", "--teacher", str(teacher), "--student", str(student), "--train", str(table), "--dev",
                 str(table), "--lr", "3e-3", "--epochs", "2", "--batch-size", "3", "--device", "cpu", "--quiet",
                 "-o", str(out)])
    assert code == 0, capsys.readouterr().err
    train = [r for r in map(json.loads, open(out / "metrics.jsonl")) if r["kind"] == "train"]
    assert len(train) == 4 and all({"soft_loss", "hard_loss", "cos_loss"} <= set(r) for r in train)
    loaded = load_model(out / "model")
    want = "ModernBertForSequenceClassification" if student == modern else "BertForSequenceClassification"
    assert type(loaded.model).__name__ == want
    assert main(["predict", "--model", str(out / "model"), str(table), "-o", str(tmp_path / "p.jsonl"),
                 "--quiet"]) == 0
    assert len((tmp_path / "p.jsonl").read_text().splitlines()) == len(ROWS)
    other = tmp_path / "other"  # the same model with two words' ids swapped: another vocabulary
    import shutil
    shutil.copytree(student, other)
    lines = (other / "vocab.txt").read_text().splitlines()
    lines[5], lines[6] = lines[6], lines[5]
    (other / "vocab.txt").write_text("\n".join(lines) + "\n")
    assert main(["distill", "--teacher", str(teacher), "--student", str(other), "--train", str(table),
                 "--device", "cpu", "--quiet", "-o", str(tmp_path / "refused")]) == 2
    err = capsys.readouterr().err
    assert "different vocabularies" in err and "Traceback" not in err, err


# ---- what does not take ModernBERT yet says so -----------------------------------------------------------
def test_commands_without_modernbert_refuse_it_by_name(folder, tmp_path, capsys):
    from test_relation import synthetic_semeval
    text = tmp_path / "text.txt"
    text.write_text("free software\n" * 20)
    relations = tmp_path / "relations.txt"
    relations.write_text(synthetic_semeval(4), encoding="utf-8")
    runs = {"distill": ["distill", "--teacher", str(folder), "--student-layers", "1", "--data", str(text),
                        "-o", str(tmp_path / "d")],
            "finetune": ["finetune", "--task", "relation", "--model", str(folder), "--train", str(relations),
                         "-o", str(tmp_path / "r")]}
    for command, argv in runs.items():
        assert main(argv) == 2, command
        err = capsys.readouterr().err
        assert str(folder) in err and "ModernBERT" in err and "Traceback" not in err, (command, err)
