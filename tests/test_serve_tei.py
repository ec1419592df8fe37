"""The TEI-compatible routes beside ours (/embed, /tokenize, /info, /health) answer as
text-embeddings-inference does, in its error shape; /metrics is Prometheus' text format, scraped
and parsed here with prometheus-client's own parser."""
import time

import numpy as np
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("prometheus_client")
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from serve_fixtures import build_models

from bertlab.interop.load import load_model
from bertlab.serve import create_app

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    folders = build_models(tmp_path_factory.mktemp("tei"))
    return {name: load_model(folders[name]) for name in ("tagger", "mlm")}


def ready(client, timeout=60):
    deadline = time.monotonic() + timeout
    while client.get("/readyz").status_code != 200:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    return client


@pytest.fixture(scope="module")
def client(loaded):
    # the tagger does not embed: TEI's routes answer with the first --model that does, the mlm
    with TestClient(create_app(loaded, max_wait_ms=2, max_batch_size=16, max_batch_tokens=4096,
                               max_concurrent_requests=20)) as c:
        yield ready(c)


def ok(response):
    assert response.status_code == 200, response.text
    return response.json()


def ours(client, texts, normalize=True):
    return np.array(ok(client.post("/v1/embed", json={"model": "mlm", "texts": texts, "normalize": normalize}))
                    ["embeddings"])


def test_embed_answers_as_our_embed_normalised_by_default(client):
    texts = ["the cat sat on the mat", "a good film"]
    got = ok(client.post("/embed", json={"inputs": texts}))
    np.testing.assert_allclose(got, ours(client, texts), atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1, atol=1e-6)
    one = ok(client.post("/embed", json={"inputs": texts[0]}))  # one string: still a list of vectors
    np.testing.assert_allclose(one, ours(client, texts[:1]), atol=1e-6)
    raw = ok(client.post("/embed", json={"inputs": texts, "normalize": False}))
    np.testing.assert_allclose(raw, ours(client, texts, normalize=False), atol=1e-6)
    named = ok(client.post("/embed", json={"inputs": texts, "model": "mlm"}))
    np.testing.assert_allclose(named, got, atol=1e-6)


def test_embed_refuses_a_long_input_unless_truncate_then_cuts_either_end(client):
    long = " ".join(["good"] * 10 + ["bad"] * 70)  # 80 pieces + [CLS], [SEP]: past the model's 64
    r = client.post("/embed", json={"inputs": ["a film", long]})
    assert r.status_code == 413 and r.json()["error_type"] == "Validation", r.text
    assert "inputs[1] has 82 tokens" in r.json()["error"] and "64" in r.json()["error"]
    right = client.post("/embed", json={"inputs": ["a film", long], "truncate": True})
    assert right.status_code == 200 and right.headers["x-truncated-inputs"] == "1"
    kept_start = " ".join(["good"] * 10 + ["bad"] * 52)
    np.testing.assert_allclose(right.json(), ours(client, ["a film", kept_start]), atol=1e-6)
    left = ok(client.post("/embed", json={"inputs": long, "truncate": True, "truncation_direction": "Left"}))
    np.testing.assert_allclose(left, ours(client, [" ".join(["bad"] * 62)]), atol=1e-6)
    short = client.post("/embed", json={"inputs": "a film", "truncate": True})
    assert short.headers["x-truncated-inputs"] == "0"


def test_tokenize_gives_ids_texts_and_offsets(client, loaded):
    got = ok(client.post("/tokenize", json={"inputs": "The cat  sat"}))
    tokenizer = loaded["mlm"].tokenizer
    assert [t["id"] for t in got[0]] == tokenizer.tokenize_ids_batch(["The cat  sat"])[0]
    assert [(t["text"], t["special"], t["start"], t["stop"]) for t in got[0]] == [
        ("[CLS]", True, None, None), ("The", False, 0, 3), ("cat", False, 4, 7), ("sat", False, 9, 12),
        ("[SEP]", True, None, None)]
    plain = ok(client.post("/tokenize", json={"inputs": ["a film", "who"], "add_special_tokens": False}))
    assert [[t["text"] for t in text] for text in plain] == [["a", "film"], ["who"]]


def test_info_and_health(client, loaded):
    info = ok(client.get("/info"))
    assert info["model_id"] == "mlm" and info["model_dtype"] == "float32"
    assert info["max_input_length"] == 64 and info["max_batch_tokens"] == 4096
    assert info["max_batch_requests"] == 16 and info["max_concurrent_requests"] == 20
    assert info["model_type"] == {"embedding": {"pooling": "mean"}}
    r = client.get("/info", params={"model": "tagger"})
    assert r.status_code == 400 and r.json()["error_type"] == "Validation" and "does not do embed" in r.json()["error"]
    r = client.post("/embed", json={"inputs": []})
    assert r.status_code == 422 and r.json() == {"error": "`inputs` cannot be empty", "error_type": "Validation"}
    r = client.post("/embed", json={"inputs": 3})
    assert r.status_code == 422 and r.json()["error_type"] == "Validation" and "inputs" in r.json()["error"]
    assert client.get("/health").status_code == 200


def test_while_loading_every_route_is_503_in_its_own_shape(loaded):
    client = TestClient(create_app({"mlm": loaded["mlm"]}))  # no `with`: the app never starts loading
    r = client.get("/health")
    assert r.status_code == 503 and r.json()["error_type"] == "Unhealthy"
    r = client.post("/embed", json={"inputs": "x"})
    assert r.status_code == 503 and r.json()["error_type"] == "Unhealthy" and r.headers["retry-after"]
    r = client.post("/v1/embed", json={"model": "mlm", "texts": ["x"]})
    assert r.status_code == 503 and "still loading" in r.json()["detail"]
    r = client.post("/v1/embeddings", json={"model": "mlm", "input": "x"})
    assert r.status_code == 503 and r.json()["error"]["type"] == "server_error"


def scrape(client) -> dict:
    """{(name, labels as a sorted tuple): value} of every sample /metrics exposes."""
    r = client.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(r.text) for s in family.samples}


def test_metrics_are_prometheus_text_counting_requests_batches_and_tokens(loaded):
    tokenizer = loaded["mlm"].tokenizer
    texts = ["the cat sat", "a good film was not bad"]
    with TestClient(create_app({"mlm": loaded["mlm"]}, max_wait_ms=0)) as c:
        ready(c)
        for _ in range(3):
            ok(c.post("/embed", json={"inputs": texts}))
        assert c.post("/embed", json={"inputs": "good " * 80}).status_code == 413
        assert c.post("/v1/embed", json={"model": "nope", "texts": ["x"]}).status_code == 404
        c.get("/no/such/path")
        m = scrape(c)
    assert m[("bertlab_requests_total", (("method", "POST"), ("route", "/embed"), ("status", "200")))] == 3
    assert m[("bertlab_requests_total", (("method", "POST"), ("route", "/embed"), ("status", "413")))] == 1
    assert m[("bertlab_requests_total", (("method", "POST"), ("route", "/v1/embed"), ("status", "404")))] == 1
    assert m[("bertlab_requests_total", (("method", "GET"), ("route", "other"), ("status", "404")))] == 1
    assert m[("bertlab_request_duration_seconds_count", (("route", "/embed"),))] == 4
    assert m[("bertlab_batch_size_count", (("model", "mlm"), ("task", "embed")))] == 3
    assert m[("bertlab_batch_size_sum", (("model", "mlm"), ("task", "embed")))] == 6
    assert m[("bertlab_queue_depth", (("model", "mlm"),))] == 0
    assert m[("bertlab_requests_in_flight", ())] == 0
    tokens = sum(len(ids) for ids in tokenizer.tokenize_ids_batch(texts))
    assert m[("bertlab_embedded_tokens_total", (("model", "mlm"),))] == 3 * tokens
    assert m[("bertlab_batch_tokens_sum", (("model", "mlm"), ("task", "embed")))] == 3 * tokens
