"""`bertlab serve` against untrusted input: a model folder that does not load stops the server with
the reason (or, with --keep-going, is named by /readyz while the others serve), a bad --port or
--host is refused by the command line, a body past --max-body-bytes is refused while it arrives,
NaN / Infinity / deep nesting / wrong types are a 4xx naming the problem (never a 500 or a
traceback), and a request whose client hangs up is dropped from the queue, never computed."""
import json
import shutil
import socket
import threading

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
from fastapi.testclient import TestClient  # noqa: E402

from bertlab.interop.load import load_model  # noqa: E402
from bertlab.serve import Limits, create_app  # noqa: E402
from serve_fixtures import build_models, running_server  # noqa: E402
from test_serve import gated, wait_for  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: threads only add overhead


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    return build_models(tmp_path_factory.mktemp("hardening_serve"))


@pytest.fixture(scope="module")
def loaded(folders):
    return {name: load_model(folders[name]) for name in ("mlm", "gpt")}


def detail(response, status: int) -> str:
    assert response.status_code == status, response.text
    found = response.json()["detail"]
    return found if isinstance(found, str) else json.dumps(found)


def broken_copy(folders, tmp_path) -> str:
    """The tiny BERT with its weights file cut short, as an interrupted copy leaves it."""
    folder = tmp_path / "truncated"
    shutil.copytree(folders["mlm"], folder)
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    return str(folder)


# --- a model that fails to load ------------------------------------------------------------------------
@pytest.fixture
def no_listening(monkeypatch):
    """uvicorn.run replaced: records the app it would have served, and listens nowhere."""
    import uvicorn
    served = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **options: served.append(app))
    return served


def test_a_model_that_fails_to_load_stops_the_server_before_it_listens(folders, tmp_path, no_listening, capsys):
    from bertlab.cli import main
    truncated = broken_copy(folders, tmp_path)
    assert main(["serve", "--model", f"good={folders['mlm']}", "--model", f"bad={truncated}"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"bertlab serve: error: --model bad={truncated}: ") and "not a readable safetensors" in err
    assert "--keep-going serves the others" in err
    (tmp_path / "empty").mkdir()  # a folder with nothing in it: not a model folder
    assert main(["serve", "--model", f"bad={tmp_path / 'empty'}"]) == 2
    assert "not a model folder" in capsys.readouterr().err
    assert no_listening == []  # uvicorn never started


def test_keep_going_serves_the_models_that_loaded_and_readyz_names_the_failed(folders, tmp_path, no_listening,
                                                                              capsys, caplog):
    from bertlab.cli import main
    truncated = broken_copy(folders, tmp_path)
    with caplog.at_level("ERROR", logger="bertlab.serve"):
        assert main(["serve", "--model", f"good={folders['mlm']}", "--model", f"bad={truncated}", "--keep-going"]) == 0
    [record] = caplog.records
    assert "'bad'" in record.getMessage() and truncated in record.getMessage() and record.exc_info is None
    with TestClient(no_listening[0]) as c:
        ready = c.get("/readyz")
        assert ready.status_code == 200, ready.text
        body = ready.json()
        assert body["status"] == "degraded" and body["models"] == ["good"]
        assert "not a readable safetensors" in body["errors"]["bad"]
        assert c.post("/v1/embed", json={"model": "good", "texts": ["a cat"]}).status_code == 200
        assert "failed to load" in detail(c.post("/v1/embed", json={"model": "bad", "texts": ["a cat"]}), 503)
    # keeping going with nothing loaded is still an error
    assert main(["serve", "--model", f"bad={truncated}", "--keep-going"]) == 2
    assert "(no model loaded)" in capsys.readouterr().err


# --- --port and --host -------------------------------------------------------------------------------------
@pytest.mark.parametrize("flag, value, message", [
    ("--port", "70000", "is not a port: give a whole number from 0 to 65535"),
    ("--port", "-1", "is not a port"),
    ("--port", "80.5", "is not a port"),
    ("--host", "", "is not an IP address or a host name"),
    ("--host", "256.1.1.1", "is not an IP address or a host name"),
    ("--host", "http://localhost", "is not an IP address or a host name"),
    ("--host", "host name", "is not an IP address or a host name"),
])
def test_a_bad_port_or_host_is_refused_by_the_command_line(flag, value, message, no_listening, capsys):
    from bertlab.cli import main
    with pytest.raises(SystemExit) as e:
        main(["serve", "--model", "m=minilm", flag, value])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {flag}: {value!r} {message}" in err, err
    assert no_listening == []


def test_good_ports_and_hosts_parse():
    from bertlab.cli import build_parser
    for host, port in (("127.0.0.1", "0"), ("0.0.0.0", "65535"), ("::1", "8000"), ("localhost", "80"),
                       ("my-host.example.com", "8080")):
        args = build_parser().parse_args(["serve", "--model", "m=minilm", "--host", host, "--port", port])
        assert (args.host, args.port) == (host, int(port))


# --- the body size limit, on a real server -----------------------------------------------------------------
LIMIT = 64 * 1024


@pytest.fixture(scope="module")
def small_server(loaded):
    app = create_app({"mlm": loaded["mlm"]}, limits=Limits(max_body_bytes=LIMIT))
    with running_server(app) as (url, _):
        yield url, int(url.rsplit(":", 1)[1])


def answer(s: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    s.settimeout(10)
    data = b""
    while chunk := s.recv(65536):
        data += chunk
    return data


def test_a_declared_content_length_past_the_limit_is_413_before_reading(small_server, capfd):
    _, port = small_server
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(b"POST /v1/embed HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 200000000\r\n\r\n")  # 200 MB announced, none of it sent
        reply = answer(s)  # the server answers and closes without waiting for the body
    assert reply.startswith(b"HTTP/1.1 413") and b"--max-body-bytes" in reply and b"connection: close" in reply.lower()
    assert "Traceback" not in capfd.readouterr().err


def test_a_chunked_body_is_refused_as_soon_as_it_passes_the_limit(small_server, capfd):
    """No Content-Length to trust: the server counts the chunks and answers 413 while the client is
    still sending (the body's last chunk is never sent)."""
    _, port = small_server
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(b"POST /v1/embed HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Transfer-Encoding: chunked\r\n\r\n")
        chunk = b'{"model": "mlm", "texts": ["' + b"x" * 16_000
        for _ in range(LIMIT // len(chunk) + 1):
            s.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        reply = answer(s)
    assert reply.startswith(b"HTTP/1.1 413") and b"limit of 65,536 bytes (--max-body-bytes)" in reply
    assert "Traceback" not in capfd.readouterr().err


def test_a_body_within_the_limit_is_answered(small_server):
    import httpx
    url, _ = small_server
    body = b'{"model": "mlm", "texts": ["a cat sat"]}' + b" " * (LIMIT - 100)  # padding is still JSON
    r = httpx.post(url + "/v1/embed", content=body, headers={"content-type": "application/json"}, timeout=30)
    assert r.status_code == 200 and len(r.json()["embeddings"]) == 1


# --- NaN, Infinity, nesting, wrong types: a 4xx naming the problem, never a traceback ----------------------
@pytest.fixture(scope="module")
def client(loaded):
    with TestClient(create_app(loaded)) as c:  # a 500 would raise here, in the test
        app = c.app
        assert app.state.registry.wait(60)
        yield c


def post(client, path: str, body: bytes, content_type="application/json"):
    return client.post(path, content=body, headers={"content-type": content_type})


@pytest.mark.parametrize("path, body", [
    ("/v1/embed", b'{"model": "mlm", "texts": [NaN]}'),
    ("/v1/embed", b'{"model": "mlm", "texts": ["a"], "normalize": Infinity}'),
    ("/v1/generate", b'{"model": "gpt", "prompt": "a", "temperature": NaN}'),
    ("/v1/generate", b'{"model": "gpt", "prompt": "a", "repetition_penalty": Infinity}'),
    ("/v1/generate", b'{"model": "gpt", "prompt": "a", "top_p": -Infinity}'),
    ("/v1/generate", b'{"model": "gpt", "prompt": "a", "temperature": 1e999}'),
])
def test_non_finite_numbers_are_422(client, path, body, caplog):
    with caplog.at_level("DEBUG"):
        assert "every number must be finite" in detail(post(client, path, body), 422)
    assert not [r for r in caplog.records if r.exc_info or r.levelname == "ERROR"]


@pytest.mark.parametrize("body, words", [
    (b'{"model": "mlm", "texts": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", ["depth limit"]),
    (b'{"model": "mlm", "texts": ' + b"[" * 1000 + b"]" * 1000 + b"}", ["nested more than 8 deep"]),
    (b'{"model": "mlm", "texts": ["\\ud800"]}', ["surrogate"]),
    (b'{"model": "mlm", "texts": ["\xff\xfe"]}', ["UTF-8"]),
    (b'{"model": "mlm", "texts": [{"text": "a"}]}', ["texts", "valid string"]),
    (b'{"model": ["mlm"], "texts": ["a"]}', ["model", "valid string"]),
    (b'{"model": "mlm", "texts": ["a"], "normalize": "very"}', ["normalize", "boolean"]),
    (b'{"model": "mlm", "texts": ["a"], "pooling": 7}', ["pooling"]),
    (b'["mlm", ["a"]]', ["body", "dictionary"]),
])
def test_malformed_nested_or_mistyped_bodies_are_422_naming_the_problem(client, body, words, caplog):
    with caplog.at_level("DEBUG"):
        text = detail(post(client, "/v1/embed", body), 422)
    for word in words:
        assert word in text, text
    assert not [r for r in caplog.records if r.exc_info or r.levelname == "ERROR"]


def test_a_body_that_is_not_json_is_415(client):
    """Form posts (what any web page may send to a server on localhost) and raw bytes are refused
    before FastAPI would validate, and echo, their bytes."""
    assert "Content-Type: application/json" in detail(post(client, "/v1/embed", b"\xff\xfe", "text/plain"), 415)
    form = client.post("/v1/embed", data={"model": "mlm", "texts": "a"})
    assert form.status_code == 415
    assert client.post("/v1/embed", json={"model": "mlm", "texts": ["still serving"]}).status_code == 200


# --- a client that hangs up while its request waits ---------------------------------------------------------
def send_and_hang_up(port: int, path: str, body: dict) -> socket.socket:
    data = json.dumps(body).encode()
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
              % (path.encode(), len(data), data))
    return s


def recording(batcher) -> list:
    """The payload of every job the model actually computes."""
    computed, inner = [], batcher.run_batch

    def run_batch(key, jobs):
        computed.extend(j.payload for j in jobs)
        return inner(key, jobs)
    batcher.run_batch = run_batch
    return computed


def test_requests_whose_clients_hang_up_are_dropped_from_the_queue(loaded, capfd):
    """Ten embed requests and a streamed generate request queue behind a held batch, then their
    clients hang up: none of them is computed, and the next request is answered at once."""
    import httpx
    app = create_app(loaded, max_batch_size=1, max_wait_ms=0)
    with running_server(app) as (url, _):
        port = int(url.rsplit(":", 1)[1])
        models = app.state.registry.models
        embed, generate = models["mlm"].batcher, models["gpt"].batcher
        computed = recording(embed)
        gates = [gated(embed), gated(generate)]  # recording(embed) runs inside the gate: only jobs let through
        held = [threading.Thread(target=httpx.post, args=(url + path,), kwargs=dict(json=body, timeout=60))
                for path, body in (("/v1/embed", {"model": "mlm", "texts": ["held"]}),
                                   ("/v1/generate", {"model": "gpt", "prompt": "held", "max_new_tokens": 3}))]
        try:
            for thread, gate in zip(held, gates):
                thread.start()
                gate.entered.wait(30)  # each worker holds one request; what comes next waits in the queue
            sockets = [send_and_hang_up(port, "/v1/embed", {"model": "mlm", "texts": [f"abandoned {i}"]})
                       for i in range(10)]
            sockets.append(send_and_hang_up(port, "/v1/generate", {"model": "gpt", "prompt": "abandoned"}))
            wait_for(lambda: embed.queue.qsize() == 10 and generate.queue.qsize() == 1)
            for s in sockets:
                s.close()
            queued = list(embed.queue.queue) + list(generate.queue.queue)
            wait_for(lambda: all(job.future.cancelled() for job in queued), timeout=10)  # each handler noticed
        finally:
            for gate, thread in zip(gates, held):
                gate.set()
                thread.join(60)
        answer = httpx.post(url + "/v1/embed", json={"model": "mlm", "texts": ["next"]}, timeout=30)
        assert answer.status_code == 200
        assert computed == [{"texts": ["held"]}, {"texts": ["next"]}]  # the ten abandoned ones never ran
        assert (embed.cancelled, generate.cancelled) == (10, 1) and generate.jobs_done == 1
    err = capfd.readouterr().err
    assert "Traceback" not in err and "Exception" not in err, err


def test_the_batcher_skips_a_job_cancelled_in_the_queue_and_survives_a_late_cancel():
    """A job cancelled while queued takes no room in a batch and is never run; cancelling the job the
    worker already holds (a client gone mid-compute) does not break the worker's set_result."""
    from bertlab.serve.batching import Batcher, Job
    seen = []

    def run_batch(key, jobs):
        seen.append([j.payload for j in jobs])
        return [j.payload * 10 for j in jobs]
    batcher = Batcher(run_batch, max_batch_size=2, max_wait_ms=200)
    gate = gated(batcher)
    first = batcher.submit(Job(("k",), 0))
    gate.entered.wait(30)
    gone, *rest = [batcher.submit(Job(("k",), i)) for i in (1, 2, 3)]
    gone.cancel()
    first.cancel()  # already running: too late to skip, and harmless
    gate.set()
    assert [j.future.result(30) for j in rest] == [20, 30] and first.future.result(30) == 0
    assert seen == [[0], [2, 3]] and batcher.cancelled == 1 and gone.future.cancelled()
    batcher.close(30)
