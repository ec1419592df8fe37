"""No silent truncation on any task route (413 naming the input and its token count, or with
"truncate": true the count of inputs cut), batches filled by a token budget, 429 at once past
max_concurrent_requests, and 424 when the model itself fails on an input."""
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient
from serve_fixtures import _finetuned, build_models
from test_serve import error, gated, ok, ready, wait_for

from bertlab.finetune.tasks import make_task
from bertlab.interop.load import load_model
from bertlab.serve import create_app

pytestmark = pytest.mark.usefixtures("one_thread")
LONG = " ".join(["good"] * 10 + ["bad"] * 70)  # 80 word pieces: past every tiny model's 64 positions


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    root = tmp_path_factory.mktemp("limits")
    folders = build_models(root)
    # classifiers (single texts, pairs) and a tagger whose max_seq_length (32) is below its positions, so a cut input still fits them
    folders["short"] = _finetuned(root / "short", make_task("classify", labels=["no", "yes"], max_seq_length=32))
    folders["pairs"] = _finetuned(root / "pairs", make_task("classify", labels=["no", "yes"], max_seq_length=32,
                                                            text_b="sentence2"))
    folders["short-tagger"] = _finetuned(root / "short-tagger", make_task("ner", labels=["O", "B-PER"],
                                                                          max_seq_length=32))
    return {name: load_model(folder) for name, folder in folders.items()}


@pytest.fixture(scope="module")
def client(loaded):
    with TestClient(create_app(loaded, max_wait_ms=2)) as c:
        yield ready(c)


def cut(response, n: int) -> dict:
    body = ok(response)
    assert body["truncated_inputs"] == n and response.headers["x-truncated-inputs"] == str(n)
    return body


def test_embed_and_similar_refuse_a_long_text_or_cut_it_and_say_so(client, loaded):
    from bertlab.inference.embed import embed_texts
    m = loaded["mlm"]
    error(client.post("/v1/embed", json={"model": "mlm", "texts": ["a film", LONG]}), 413,
          "texts[1] has 82 tokens", "limit of 64", '"truncate": true')
    got = cut(client.post("/v1/embed", json={"model": "mlm", "texts": ["a film", LONG], "truncate": True}), 1)
    # cut as embed_texts cuts: the first 62 pieces and [SEP]
    np.testing.assert_allclose(got["embeddings"], embed_texts(m.encoder, m.tokenizer, ["a film", LONG]), atol=1e-5)
    plain = ok(client.post("/v1/embed", json={"model": "mlm", "texts": ["a film"]}))
    assert "truncated_inputs" not in plain  # the answer of a request that did not ask is as before
    error(client.post("/v1/similar", json={"model": "mlm", "query": LONG, "texts": ["a"]}), 413, "the query has 82")
    error(client.post("/v1/similar", json={"model": "mlm", "query": "a", "texts": ["b", LONG]}), 413, "texts[1] has 82")
    cut(client.post("/v1/similar", json={"model": "mlm", "query": LONG, "texts": ["a", LONG], "truncate": True}), 2)


def test_classify_qa_translate_and_generate_refuse_or_cut(client):
    error(client.post("/v1/classify", json={"model": "short", "texts": ["a film", LONG]}), 413,
          "texts[1] has 82 tokens", "max_seq_length of 32")
    got = cut(client.post("/v1/classify", json={"model": "short", "texts": [LONG], "truncate": True}), 1)
    assert got["predictions"][0]["label"] in ("no", "yes")
    pair = {"model": "pairs", "texts": ["good " * 20], "texts_b": ["bad " * 20]}
    error(client.post("/v1/classify", json=pair), 413, "texts[0] has 43 tokens")  # both texts and 3 specials
    cut(client.post("/v1/classify", json={**pair, "truncate": True}), 1)
    ok(client.post("/v1/classify", json={**pair, "model": "short"}))  # not trained on pairs: texts_b unread

    question = {"model": "reader", "question": "who " * 70, "context": "peter lives in paris ."}
    error(client.post("/v1/qa", json=question), 413, "the question has 70 tokens", "max_query_length of 64")

    error(client.post("/v1/translate", json={"model": "translator", "texts": ["open the file " * 10]}), 413,
          "texts[0] has", "limit (its positions less one for EOS) of 15")
    got = cut(client.post("/v1/translate", json={"model": "translator", "texts": ["open the file " * 10, "save"],
                                                 "truncate": True}), 1)
    assert len(got["translations"]) == 2

    body = {"model": "gpt", "prompt": "the cat " * 3, "max_new_tokens": 150, "stream": False}
    error(client.post("/v1/generate", json=body), 413, "the prompt has 24 tokens", "room for 10")
    got = cut(client.post("/v1/generate", json={**body, "truncate": True}), 1)
    assert got["tokens"] == 150
    with client.stream("POST", "/v1/generate", json={**body, "stream": True, "truncate": True}) as r:
        assert r.headers["x-truncated-inputs"] == "1"
        r.read()
    assert '"truncated_inputs": 1' in r.text.strip().split("\n\n")[-1]


def test_tasks_that_never_cut_refuse_even_with_truncate_and_ner_reads_everything(client):
    for truncate in (False, True):
        error(client.post("/v1/fill-mask", json={"model": "mlm", "texts": [LONG + " [MASK]"], "truncate": truncate}),
              413, "texts[0] has 83 tokens", "could drop a [MASK]")
        error(client.post("/v1/attention", json={"model": "mlm", "text": LONG, "truncate": truncate}), 413,
              "the text has 82 tokens")
    got = cut(client.post("/v1/ner", json={"model": "short-tagger", "texts": [LONG], "truncate": True}), 0)
    assert len(got["predictions"][0]["tags"]) == 80  # read in windows: every word tagged


def test_batches_fill_by_tokens_and_a_job_past_the_budget_runs_alone():
    from bertlab.serve.batching import Batcher, Job
    seen = []

    def run_batch(key, jobs):
        seen.append([j.payload for j in jobs])
        return [None] * len(jobs)
    batcher = Batcher(run_batch, max_batch_size=100, max_batch_tokens=10, max_wait_ms=200)
    gate = gated(batcher)
    jobs = [batcher.submit(Job(("x",), "first", tokens=1))]
    gate.entered.wait(30)
    jobs += [batcher.submit(Job(("x",), name, tokens=n)) for name, n in
             [("a", 4), ("b", 4), ("c", 4), ("big", 30), ("d", 3), ("e", 3), ("f", 3), ("g", 3)]]
    gate.set()
    for job in jobs:
        job.future.result(30)
    batcher.close(30)
    assert seen == [["first"], ["a", "b"], ["c"], ["big"], ["d", "e", "f"], ["g"]]


def test_one_request_past_max_batch_tokens_runs_in_forward_passes_within_it(loaded):
    """--max-batch-tokens caps every forward pass, also of one request larger than it: the request
    runs alone and its texts are split into passes (embed_ids), answering what each text alone gives."""
    from bertlab.inference.embed import embed_texts
    from bertlab.serve.inputs import embed_limit
    model = loaded["mlm"]
    budget = embed_limit(model)
    texts = [" ".join(["good"] * n) for n in (5, 40, 12, 60, 3, 25, 33, 8)]
    shapes = []
    hook = model.encoder.register_forward_pre_hook(lambda module, args: shapes.append(tuple(args[0].shape)))
    try:
        with TestClient(create_app({"mlm": model}, max_batch_tokens=budget, max_wait_ms=0)) as c:
            got = ok(ready(c).post("/v1/embeddings", json={"model": "mlm", "input": texts}))
    finally:
        hook.remove()
    assert got["usage"]["prompt_tokens"] > budget and len(shapes) > 1
    assert all(rows * width <= budget for rows, width in shapes), (budget, shapes)
    alone = np.concatenate([embed_texts(model.encoder, model.tokenizer, [t], normalize=True) for t in texts])
    np.testing.assert_allclose([d["embedding"] for d in got["data"]], alone, atol=1e-5)


def test_max_batch_tokens_below_one_input_is_refused_at_start(loaded, capsys):
    """One input is never split, so a budget smaller than the longest input the model reads could
    not be kept: the model does not load (the command: exit 2 naming the flag), as TEI refuses to start."""
    from bertlab.cli import main
    from bertlab.serve.inputs import embed_limit
    model = loaded["mlm"]
    app = create_app({"mlm": model}, max_batch_tokens=embed_limit(model) - 1)
    with TestClient(app) as c:
        app.state.registry.wait(60)
        assert c.get("/readyz").status_code == 503
        assert f"--max-batch-tokens {embed_limit(model) - 1} is less than the {embed_limit(model)} tokens" in \
            c.get("/readyz").json()["errors"]["mlm"]
    assert main(["serve", "--model", "m=minilm", "--max-batch-tokens", "255"]) == 2
    assert "--max-batch-tokens 255 is less than the 256 tokens one input" in capsys.readouterr().err


def test_past_max_concurrent_requests_the_answer_is_429_at_once(loaded):
    app = create_app({"mlm": loaded["mlm"]}, max_batch_size=1, max_wait_ms=0, max_concurrent_requests=2)
    with TestClient(app) as c:
        ready(c)
        gate = gated(app.state.registry.models["mlm"].batcher)
        with ThreadPoolExecutor(2) as pool:
            held = [pool.submit(c.post, "/v1/embed", json={"model": "mlm", "texts": [f"text {i}"]}) for i in range(2)]
            wait_for(lambda: gate.entered.is_set() and app.state.registry.models["mlm"].batcher.queue.qsize() == 1)
            refused = c.post("/v1/embed", json={"model": "mlm", "texts": ["one more"]})
            refused_openai = c.post("/v1/embeddings", json={"model": "mlm", "input": "one more"})
            assert c.get("/healthz").status_code == 200  # status routes do not count
            gate.set()
            assert [f.result().status_code for f in held] == [200, 200]
        error(refused, 429, "--max-concurrent-requests")
        assert refused.headers["retry-after"] == "1"
        assert refused_openai.status_code == 429 and refused_openai.json()["error"]["type"] == "rate_limit_error"
        ok(c.post("/v1/embed", json={"model": "mlm", "texts": ["served again"]}))


def test_a_model_that_fails_on_an_input_is_424_and_the_others_are_answered(loaded):
    app = create_app({"mlm": loaded["mlm"]}, max_wait_ms=300)
    with TestClient(app) as c:
        ready(c)
        batcher = app.state.registry.models["mlm"].batcher
        inner = batcher.run_batch

        def run_batch(key, jobs):
            if any("boom" in j.payload["texts"][0] for j in jobs):
                raise RuntimeError("CUDA error: device-side assert triggered")
            return inner(key, jobs)
        batcher.run_batch = run_batch
        texts, barrier = ["fine", "boom", "also fine"], threading.Barrier(3)

        def post(text):
            barrier.wait()
            return c.post("/v1/embed", json={"model": "mlm", "texts": [text]})
        with ThreadPoolExecutor(3) as pool:
            answers = list(pool.map(post, texts))
        error(answers[1], 424, "the model failed on this input", "RuntimeError")
        assert [a.status_code for a in answers] == [200, 424, 200]
        r = c.post("/embed", json={"inputs": "boom"})
        assert r.status_code == 424 and r.json()["error_type"] == "Backend"


def test_the_command_line_gives_create_app_every_setting(monkeypatch):
    """Each create_app keyword is one `bertlab serve` flag (the limits through Limits)."""
    import inspect

    import bertlab.serve
    from bertlab.cli import main
    got = {}
    monkeypatch.setattr(bertlab.serve, "serve", lambda models, host, port, **options: got.update(options))
    assert main(["serve", "--model", "m=minilm", "--max-batch-tokens", "2048", "--max-concurrent-requests", "7",
                 "--max-queue", "5", "--max-texts", "3"]) == 0
    assert got["max_batch_tokens"] == 2048 and got["max_concurrent_requests"] == 7 and got["max_queue"] == 5
    assert got["limits"].max_texts == 3
    settings = set(inspect.signature(bertlab.serve.create_app).parameters) - {"models"}
    assert settings <= set(got), settings - set(got)


def test_nan_from_the_model_is_424_not_a_422_for_the_input(loaded):
    """check_finite's ValueError is the model failing (an overflow, broken weights), not bad input."""
    import copy

    import torch
    broken = copy.deepcopy(loaded["mlm"])
    with torch.no_grad():
        broken.encoder.embeddings.word_embeddings.weight[broken.tokenizer.tokenize_ids("cat")[0]] = float("nan")
    with TestClient(create_app({"broken": broken}, max_wait_ms=0)) as c:
        ready(c)
        error(c.post("/v1/embed", json={"model": "broken", "texts": ["the cat sat"]}), 424, "NaN or infinity")
        ok(c.post("/v1/embed", json={"model": "broken", "texts": ["the dog ran"]}))
