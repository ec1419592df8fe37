"""`bertlab serve`: every endpoint answers what the library function answers for the same input,
concurrent requests share one batched call, and bad input, a full queue, a client that goes away
mid-stream and a shutdown with requests in flight are each answered while the server keeps serving."""
import json
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
from fastapi.testclient import TestClient  # noqa: E402

from bertlab.finetune.tasks import task_from_state
from bertlab.interop.load import load_model  # noqa: E402
from bertlab.serve import Limits, create_app  # noqa: E402
from serve_fixtures import build_models, free_port, running_server  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: threads only add overhead


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    """Every model once, loaded by load_model: the server and the library calls share them."""
    folders = build_models(tmp_path_factory.mktemp("serve"))
    return {"minilm": load_model("minilm"), **{name: load_model(folder) for name, folder in folders.items()}}


def ready(client, timeout=60):
    deadline = time.monotonic() + timeout
    while client.get("/readyz").status_code != 200:
        assert time.monotonic() < deadline, client.get("/readyz").json()
        time.sleep(0.02)
    return client


@pytest.fixture(scope="module")
def client(loaded):
    app = create_app(loaded, max_batch_size=16, max_wait_ms=2, limits=Limits(max_chars=200, max_texts=8,
                                                                                 max_new_tokens=150))
    with TestClient(app) as c:
        yield ready(c)


def ok(response) -> dict:
    assert response.status_code == 200, response.text
    return response.json()


def error(response, status: int, *words) -> str:
    assert response.status_code == status, response.text
    detail = response.json()["detail"]
    text = detail if isinstance(detail, str) else json.dumps(detail)
    for w in words:
        assert w in text, text
    return text


def still_serving(client):
    assert ok(client.post("/v1/embed", json={"model": "minilm", "texts": ["still here"]}))["embeddings"]


# --- status, docs and the page ------------------------------------------------------------------------
def test_health_readiness_models_docs_and_page(client):
    assert ok(client.get("/healthz")) == {"status": "ok"}
    assert ok(client.get("/readyz"))["models"] == sorted(["minilm", "mlm", "sentiment", "tagger", "reader", "gpt",
                                                          "translator"])
    tasks = {m["name"]: m["tasks"] for m in ok(client.get("/v1/models"))["models"]}
    assert tasks == {"minilm": ["embed", "similar", "attention"], "mlm": ["embed", "similar", "attention", "fill-mask"],
                     "sentiment": ["classify", "attention"], "tagger": ["ner", "attention"],
                     "reader": ["qa", "attention"], "gpt": ["generate"], "translator": ["translate"]}
    page = client.get("/")
    assert page.status_code == 200 and "<title>bertlab serve</title>" in page.text
    assert client.get("/static/app.js").status_code == 200
    assert client.get("/docs").status_code == 200
    paths = ok(client.get("/openapi.json"))["paths"]
    assert {f"/v1/{t}" for t in ("embed", "similar", "classify", "ner", "qa", "fill-mask", "translate", "generate",
                                 "attention")} <= set(paths)


def test_readyz_waits_for_the_models(tmp_path):
    """Until the models are in, /healthz answers and /readyz says 503; a folder that fails to load
    keeps /readyz at 503 with the loader's message."""
    app = create_app({"broken": str(tmp_path)})
    with TestClient(app) as c:
        assert ok(c.get("/healthz"))["status"] == "ok"
        app.state.registry.wait(30)
        r = c.get("/readyz")
        assert r.status_code == 503 and "not a model folder" in r.json()["errors"]["broken"]
        error(c.post("/v1/embed", json={"model": "broken", "texts": ["x"]}), 503, "failed to load")


# --- every endpoint equals the library ----------------------------------------------------------------
def test_embed_and_similar_equal_embed_texts(client, loaded):
    from bertlab.inference.embed import embed_texts, top_k
    m = loaded["minilm"]
    texts = ["The cat sat on the mat.", "A dog ran in the park.", "Stocks fell sharply today."]
    got = ok(client.post("/v1/embed", json={"model": "minilm", "texts": texts}))["embeddings"]
    np.testing.assert_allclose(got, embed_texts(m.model, m.tokenizer, texts), atol=1e-5)
    got = ok(client.post("/v1/embed", json={"model": "minilm", "texts": texts, "normalize": True, "pooling": "cls"}))
    np.testing.assert_allclose(got["embeddings"], embed_texts(m.model, m.tokenizer, texts, "cls", True), atol=1e-5)
    hits = ok(client.post("/v1/similar", json={"model": "minilm", "query": "a kitten", "texts": texts + [" "],
                                               "top_k": 2}))["results"]
    vectors = embed_texts(m.model, m.tokenizer, ["a kitten"] + texts, normalize=True)
    scores, indices = top_k(vectors[:1], vectors[1:], 2)
    assert [h["index"] for h in hits] == indices[0].tolist() and hits[0]["text"] == texts[indices[0][0]]
    np.testing.assert_allclose([h["score"] for h in hits], scores[0], atol=1e-5)


def test_classify_ner_and_qa_equal_predict_examples(client, loaded):
    from bertlab.finetune.predict import examples_from_inputs, predict_examples

    def library(name, inputs):
        m = loaded[name]
        task = task_from_state(m)
        rows = predict_examples(task, m.model, m.tokenizer, examples_from_inputs(task, inputs))
        return [{k: v for k, v in r.items() if k != "id"} for r in rows]

    texts = ["a good film", "not a very bad plot at all"]
    got = ok(client.post("/v1/classify", json={"model": "sentiment", "texts": texts}))["predictions"]
    assert got == library("sentiment", [{"text": t} for t in texts])
    assert {p["label"] for p in got} <= {"negative", "positive"}
    got = ok(client.post("/v1/ner", json={"model": "tagger", "texts": ["peter lives in paris"]}))["predictions"]
    assert got == library("tagger", [{"text": "peter lives in paris"}])
    assert got[0]["words"] == ["peter", "lives", "in", "paris"] and len(got[0]["tags"]) == 4
    question = {"question": "where does peter live ?", "context": "peter lives in paris ."}
    got = ok(client.post("/v1/qa", json={"model": "reader", **question}))
    assert got == library("reader", [question])[0]
    assert got["answer"] in question["context"]


def test_fill_mask_equals_the_library(client, loaded):
    from bertlab.inference.fill_mask import fill_mask
    m = loaded["mlm"]
    texts = ["the cat [MASK] on the mat .", "a [MASK] film was [MASK] ."]
    got = ok(client.post("/v1/fill-mask", json={"model": "mlm", "texts": texts, "top_k": 3}))["results"]
    expected = [[[vars(p) for p in mask] for mask in text] for text in fill_mask(m.model, m.tokenizer, texts, 3)]
    assert [[[p["token"] for p in mask] for mask in t] for t in got] == \
        [[[p["token"] for p in mask] for mask in t] for t in expected]
    np.testing.assert_allclose([p["probability"] for t in got for mask in t for p in mask],
                               [p["probability"] for t in expected for mask in t for p in mask], rtol=1e-5)


def test_translate_equals_translate_ids(client, loaded):
    from bertlab.inference.translate import translate_ids
    m = loaded["translator"]
    texts = ["open the file", "save"]
    for beam in (1, 3):
        got = ok(client.post("/v1/translate", json={"model": "translator", "texts": texts, "beam": beam}))
        hyps = translate_ids(m.model, [m.tokenizer.encode(t) for t in texts], beam_size=beam)
        assert got["translations"] == [m.extra["target_tokenizer"].decode(h[0].tokens) for h in hyps]


def sse(response) -> list[dict]:
    return [json.loads(block.removeprefix("data: ")) for block in response.text.split("\n\n") if block]


def test_generate_streams_the_library_greedy_text(client, loaded):
    from bertlab.inference.generate import SamplingOptions, generate
    m = loaded["gpt"]
    ids = generate(m.model, [m.tokenizer.encode("the cat")], SamplingOptions(max_new_tokens=20), prepack=False)[0]
    expected = m.tokenizer.decode(ids)
    body = {"model": "gpt", "prompt": "the cat", "max_new_tokens": 20}
    with client.stream("POST", "/v1/generate", json=body) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        r.read()
    events = sse(r)
    assert len(events) > 2 and events[-1]["done"] and events[-1]["tokens"] == 20
    assert "".join(e["text"] for e in events[:-1]) == events[-1]["text"] == expected
    assert ok(client.post("/v1/generate", json={**body, "stream": False}))["text"] == expected
    stop = expected[5:7]  # a stop string cuts the text before it, streamed or not
    cut = ok(client.post("/v1/generate", json={**body, "stream": False, "stop": [stop]}))["text"]
    assert cut == expected[:expected.find(stop)]


def test_attention_equals_attention_weights(client, loaded):
    from bertlab.inference.attention import attention_weights
    m = loaded["minilm"]
    text = "the animal didn't cross the street because it was too tired"
    got = ok(client.post("/v1/attention", json={"model": "minilm", "text": text, "layer": -1}))
    tokens, weights = attention_weights(m.model, m.tokenizer, text, 5)
    assert got["tokens"] == tokens and got["layer"] == 5 and got["layers"] == 6
    np.testing.assert_allclose(got["weights"], weights, atol=1e-5)
    got = ok(client.post("/v1/attention", json={"model": "sentiment", "text": "a good film", "layer": 0}))
    assert np.asarray(got["weights"]).shape == (2, 5, 5)  # the fine-tuned model's encoder: 2 heads


# --- dynamic batching ---------------------------------------------------------------------------------
def test_concurrent_requests_run_as_one_batch_with_their_own_answers(loaded):
    """Eight requests arriving together (within --max-wait-ms) are one forward pass, and each gets
    exactly the vectors its texts get alone."""
    from bertlab.inference.embed import embed_texts
    m = loaded["minilm"]
    texts = [f"sentence number {i} " + "word " * i for i in range(8)]
    app = create_app({"minilm": m}, max_batch_size=64, max_wait_ms=500)
    with TestClient(app) as c:
        ready(c)
        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(lambda t: c.post("/v1/embed", json={"model": "minilm", "texts": [t]}), texts))
        batcher = app.state.registry.models["minilm"].batcher
        assert batcher.jobs_done == 8 and batcher.batches < 4
    for text, r in zip(texts, answers):
        np.testing.assert_allclose(ok(r)["embeddings"][0], embed_texts(m.model, m.tokenizer, [text])[0], atol=1e-5)


def test_max_batch_size_one_runs_one_request_at_a_time(loaded):
    app = create_app({"minilm": loaded["minilm"]}, max_batch_size=1, max_wait_ms=500)
    with TestClient(app) as c:
        ready(c)
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(lambda t: ok(c.post("/v1/embed", json={"model": "minilm", "texts": [t]})), "abcd"))
        assert app.state.registry.models["minilm"].batcher.batches == 4


# --- faults and bad input: each answered, and the server still serves after it -------------------------
def test_malformed_json_and_wrong_types_are_422(client):
    r = client.post("/v1/embed", content=b'{"model": "minilm", "texts": [', headers={"content-type": "application/json"})
    error(r, 422, "JSON decode error")
    error(client.post("/v1/embed", json={"model": "minilm", "texts": "one text, not a list"}), 422, "texts")
    error(client.post("/v1/embed", json={"model": "minilm", "texts": [1, 2]}), 422, "string")
    error(client.post("/v1/embed", json={"model": "minilm", "texts": []}), 422, "texts")
    error(client.post("/v1/fill-mask", json={"model": "mlm", "texts": ["x [MASK]"], "top_k": "many"}), 422, "top_k")
    error(client.post("/v1/generate", json={"model": "gpt", "prompt": "a", "top_p": 0}), 422, "top_p")
    error(client.post("/v1/embed", json={"texts": ["no model named"]}), 422, "model")
    still_serving(client)


def test_limits_are_413_naming_the_limit(client):
    error(client.post("/v1/embed", json={"model": "minilm", "texts": ["x" * 201]}), 413, "201 characters",
          "limit of 200", "--max-chars")
    error(client.post("/v1/embed", json={"model": "minilm", "texts": ["x"] * 9}), 413, "9 texts", "limit of 8",
          "--max-texts")
    error(client.post("/v1/generate", json={"model": "gpt", "prompt": "a", "max_new_tokens": 151}), 413,
          "limit of 150", "--max-new-tokens")
    still_serving(client)


def test_unknown_model_is_404_naming_the_loaded_ones_and_a_wrong_task_is_400(client):
    error(client.post("/v1/embed", json={"model": "bert-large", "texts": ["x"]}), 404, "unknown model 'bert-large'",
          "loaded models: gpt, minilm, mlm, reader, sentiment, tagger, translator")
    error(client.post("/v1/fill-mask", json={"model": "minilm", "texts": ["a [MASK]"]}), 400,
          "does not do fill-mask", "Models that do fill-mask: mlm")
    still_serving(client)


def test_input_the_model_refuses_is_422_with_the_library_message(client):
    error(client.post("/v1/fill-mask", json={"model": "mlm", "texts": ["no mask here"]}), 422, "no [MASK] in the text")
    # no silent truncation (issue 31): a prompt that does not fit is a 413 naming its token count
    error(client.post("/v1/generate", json={"model": "gpt", "prompt": "the cat " * 3, "max_new_tokens": 150}), 413,
          "24 tokens", "exceeds the model's 160 positions")
    error(client.post("/v1/attention", json={"model": "minilm", "text": "  "}), 422, "blank")
    error(client.post("/v1/attention", json={"model": "minilm", "text": "x", "layer": 6}), 422, "layer")
    error(client.post("/v1/generate", json={"model": "gpt", "prompt": " "}), 422, "blank")
    still_serving(client)


def test_a_bad_request_batched_with_good_ones_fails_alone(loaded):
    from bertlab.inference.fill_mask import fill_mask
    m = loaded["mlm"]
    app = create_app({"mlm": m}, max_batch_size=64, max_wait_ms=300)
    texts = ["the cat [MASK] .", "no mask", "a [MASK] film ."]
    with TestClient(app) as c:
        ready(c)
        with ThreadPoolExecutor(3) as pool:
            answers = list(pool.map(lambda t: c.post("/v1/fill-mask", json={"model": "mlm", "texts": [t]}), texts))
    error(answers[1], 422, "no [MASK]")
    for i in (0, 2):
        expected = fill_mask(m.model, m.tokenizer, [texts[i]])[0][0][0].token
        assert ok(answers[i])["results"][0][0][0]["token"] == expected


def gated(batcher):
    """Hold the model's worker at its next batch until the returned gate is set; `gate.entered` is
    set once the worker is held."""
    gate, inner = threading.Event(), batcher.run_batch
    gate.entered = threading.Event()

    def run_batch(key, jobs):
        gate.entered.set()
        gate.wait(30)
        return inner(key, jobs)
    batcher.run_batch = run_batch
    return gate


def wait_for(condition, timeout=30):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_a_burst_past_the_queue_is_429_not_a_crash(loaded):
    app = create_app({"minilm": loaded["minilm"]}, max_batch_size=1, max_wait_ms=0, max_queue=3)
    with TestClient(app) as c:
        ready(c)
        batcher = app.state.registry.models["minilm"].batcher
        gate = gated(batcher)
        post = lambda i: c.post("/v1/embed", json={"model": "minilm", "texts": [f"text {i}"]})  # noqa: E731
        with ThreadPoolExecutor(12) as pool:
            futures = [pool.submit(post, 0)]
            gate.entered.wait(30)  # the first request is running (held), so the queue is empty
            futures += [pool.submit(post, i) for i in range(1, 12)]
            wait_for(lambda: sum(f.done() for f in futures) == 8)  # 3 queue up; the other 8 are refused at once
            gate.set()
            codes = sorted(f.result().status_code for f in futures)
        assert codes == [200] * 4 + [429] * 8, codes
        refused = next(f.result() for f in futures if f.result().status_code == 429)
        assert "--max-queue" in refused.json()["detail"] and refused.headers["retry-after"] == "1"
        still_serving(c)


# --- a real server: a client gone mid-stream, graceful shutdown -----------------------------------------
def test_a_client_that_disconnects_mid_stream_stops_its_decoding(loaded):
    app = create_app({"gpt": loaded["gpt"], "minilm": loaded["minilm"]})
    with running_server(app) as (url, _):
        import httpx
        port = int(url.rsplit(":", 1)[1])
        body = json.dumps({"model": "gpt", "prompt": "the cat", "max_new_tokens": 150}).encode()
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.sendall(b"POST /v1/generate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
            assert b"200 OK" in s.recv(4096)  # the headers and the first event, then hang up
        batcher = app.state.registry.models["gpt"].batcher
        deadline = time.monotonic() + 20
        while batcher.jobs_done < 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert batcher.cancelled == 1  # decoding stopped: the job ended as Cancelled, not finished
        answer = httpx.post(url + "/v1/generate", json={"model": "gpt", "prompt": "a", "max_new_tokens": 5,
                                                         "stream": False}, timeout=30)
        assert answer.status_code == 200 and answer.json()["tokens"] == 5
        assert httpx.post(url + "/v1/embed", json={"model": "minilm", "texts": ["ok"]}, timeout=30).status_code == 200


def test_shutdown_finishes_the_requests_in_flight(loaded):
    """SIGTERM's path (uvicorn's should_exit): no new connections, but the requests already queued
    are answered in full before the server ends."""
    import httpx
    app = create_app({"minilm": loaded["minilm"]}, max_batch_size=1, max_wait_ms=0)
    with running_server(app) as (url, server):
        gate = gated(app.state.registry.models["minilm"].batcher)
        with ThreadPoolExecutor(3) as pool:
            futures = [pool.submit(httpx.post, url + "/v1/embed", json={"model": "minilm", "texts": [t]}, timeout=30)
                       for t in ("one", "two", "three")]
            batcher = app.state.registry.models["minilm"].batcher
            wait_for(lambda: gate.entered.is_set() and batcher.queue.qsize() == 2)  # one held, two queued
            server.handle_exit(15, None)  # what uvicorn does on SIGTERM
            time.sleep(0.3)
            gate.set()
            assert [f.result().status_code for f in futures] == [200, 200, 200]
    assert not app.state.registry.models["minilm"].batcher._thread.is_alive()


def test_sigterm_ends_bertlab_serve_with_exit_status_0():
    """uvicorn, after its graceful shutdown, raises the signal that stopped it again, so a SIGTERM'd
    `bertlab serve` had drained its requests and then died of SIGTERM (exit -15): a process manager
    counts that as a crash. Found by benchmarks/serve_abuse.py; the command must end with 0."""
    import os
    import signal
    import subprocess
    import sys

    import httpx
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "bertlab", "serve", "--model", "m=minilm", "--port", str(port),
                                "--no-access-log"], env={**os.environ, "OMP_NUM_THREADS": "1"},
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert process.poll() is None and time.monotonic() < deadline, process.stdout.read().decode()[-2000:]
            try:
                if httpx.get(url + "/readyz", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        assert httpx.post(url + "/v1/embed", json={"model": "m", "texts": ["ok"]}, timeout=30).status_code == 200
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0, process.stdout.read().decode()[-2000:]
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


# --- the batcher and the command line -------------------------------------------------------------------
def test_batches_hold_at_most_max_batch_size_texts_in_arrival_order():
    from bertlab.serve.batching import Batcher, Job
    seen = []

    def run_batch(key, jobs):
        seen.append((key[0], [j.payload for j in jobs]))
        return [j.payload * 10 for j in jobs]
    batcher = Batcher(run_batch, max_batch_size=7, max_wait_ms=200)
    gate = gated(batcher)
    jobs = [batcher.submit(Job(("first",), 0, size=1))]
    gate.entered.wait(30)
    jobs += [batcher.submit(Job(("a" if i % 3 else "b",), i, size=3)) for i in range(1, 8)]
    gate.set()
    assert [j.future.result(30) for j in jobs] == [10 * i for i in range(8)]
    batcher.close(30)
    # 3-text jobs under a 7-text limit: two per gathering ([1, 2], [3, 4], [5, 6], [7]), each gathering
    # run as one call per key, keys in the order they arrived
    assert seen == [("first", [0]), ("a", [1, 2]), ("b", [3]), ("a", [4]), ("a", [5]), ("b", [6]), ("a", [7])]


def test_the_command_line_refuses_bad_model_arguments(tmp_path, capsys):
    from bertlab.cli import main
    with pytest.raises(SystemExit) as e:
        main(["serve", "--model", "no-equals-sign"])
    assert e.value.code == 2 and "expected NAME=DIR" in capsys.readouterr().err
    assert main(["serve", "--model", "a=minilm", "--model", "a=minilm"]) == 2
    assert "a NAME is given twice" in capsys.readouterr().err
    assert main(["serve", "--model", f"m={tmp_path / 'nowhere'}"]) == 2
    assert "--model m=" in capsys.readouterr().err


def test_int8_serves_the_int8_model(tmp_path):
    """create_app(int8=True) quantizes each model as it loads: the answer is the library's int8
    model's, close to (not equal to) fp32's."""
    from bertlab.inference.embed import embed_texts
    from bertlab.inference.int8 import is_int8, quantize_int8
    texts = ["The cat sat on the mat.", "Stocks fell sharply today."]
    with TestClient(create_app({"minilm": "minilm"}, int8=True)) as c:
        got = np.array(ok(ready(c).post("/v1/embed", json={"model": "minilm", "texts": texts}))["embeddings"])
        assert is_int8(c.app.state.registry.models["minilm"].loaded.model)
    reference = load_model("minilm")
    fp32 = embed_texts(reference.model, reference.tokenizer, texts)
    int8 = embed_texts(quantize_int8(reference.model), reference.tokenizer, texts)
    np.testing.assert_allclose(got, int8, atol=1e-5)
    cosine = (got * fp32).sum(1) / np.linalg.norm(got, axis=1) / np.linalg.norm(fp32, axis=1)
    assert cosine.min() > 0.95 and np.abs(got - fp32).max() > 1e-6
