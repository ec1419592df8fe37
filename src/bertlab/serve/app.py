"""The HTTP JSON API (FastAPI; OpenAPI docs at /docs) and the web page at /.

Every task endpoint takes {"model": NAME, ...}, checks the request against the server's limits,
hands a Job to the model's batcher and waits for its result. Status codes: 404 an unknown model
(the message lists the loaded ones), 400 a model that does not do the task, 413 a request past a
size limit (the message names the flag), 422 malformed JSON, wrong types or input the model
refuses (the library's message), 429 a full queue, 503 while models load.

Request bodies come from untrusted clients: each is read as it arrives and refused (413) as soon as
it passes --max-body-bytes, before any parsing, and parsed as strict JSON (no NaN or Infinity,
nothing nested deeper than a request needs), so bad input is a 4xx answer and never a traceback.
A request whose client disconnects while it waits is cancelled, so its queued job is never
computed."""
import asyncio
import json
import os
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import Literal

import orjson
from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import FileResponse, JSONResponse, Response, StreamingResponse
from fastapi.routing import APIRoute
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, Field

from ..inference.generate import SamplingOptions
from .batching import Cancelled, Job, QueueFull
from .registry import Registry

STATIC = os.path.join(os.path.dirname(__file__), "static")


@dataclass(frozen=True)
class Limits:
    max_chars: int = 10_000      # characters per text
    max_texts: int = 64          # texts per request
    max_new_tokens: int = 256    # tokens one generate request may ask for
    # bytes per request body: room for max_texts x max_chars of non-ASCII text as Python's json.dumps
    # writes it (\uXXXX, 6 bytes a character), and a bound on what a client makes the server read
    max_body_bytes: int = 4 * 1024 * 1024


MAX_JSON_DEPTH = 8  # a request body nests 2 deep; far deeper ones would overflow the 422's encoder
DISCONNECT_POLL_S = 0.5  # how often a waiting request asks whether its client is still there


class FastJSON(Response):
    """JSON by orjson, which writes numpy arrays itself: an embedding goes out without becoming a
    list of Python floats first (measured: json.dumps of 32 MiniLM vectors took ~58 ms on the
    loaded 2-core machine, a serial step between two batches)."""
    media_type = "application/json"

    def render(self, content) -> bytes:
        return orjson.dumps(content, option=orjson.OPT_SERIALIZE_NUMPY)


# --- reading a request body -------------------------------------------------------------------------
class LimitedJSONRequest(Request):
    """The request FastAPI hands the task routes (FastAPI's custom Request/APIRoute pattern): the
    body is read chunk by chunk and refused once it passes the app's max_body_bytes, and JSON is
    parsed by orjson, which refuses NaN, Infinity, 1e999, lone surrogates and invalid UTF-8 that
    Python's json module lets through (they turned into 500s when echoed in a 422, or in an answer)."""

    async def body(self) -> bytes:
        if not hasattr(self, "_body"):
            self._body = await _read_body(self, self.app.state.limits.max_body_bytes)
        return self._body

    async def json(self):
        if not hasattr(self, "_json"):
            self._json = _parse_json(await self.body())
        return self._json


class LimitedJSONRoute(APIRoute):
    """A task route: JSON bodies only, read by LimitedJSONRequest. Another content type is a 415:
    FastAPI would validate its raw bytes and echo them in the 422, a 500 for bytes that are not
    UTF-8 (and accepting form posts would let any web page post to a server on localhost)."""

    def get_route_handler(self):
        handler = super().get_route_handler()

        async def limited(request: Request) -> Response:
            if not _is_json(request.headers.get("content-type", "")):
                raise HTTPException(415, "send the body as JSON, with the header Content-Type: application/json")
            return await handler(LimitedJSONRequest(request.scope, request.receive))
        return limited


def _is_json(content_type: str) -> bool:
    kind = content_type.split(";")[0].strip().lower()
    return kind == "application/json" or (kind.startswith("application/") and kind.endswith("+json"))


async def _read_body(request: Request, limit: int) -> bytes:
    """The body, stopping at the first chunk past `limit`: a declared Content-Length over the limit
    is refused before reading, and a chunked body (no Content-Length) or one longer than declared is
    counted as it arrives, so the server never holds more than the limit."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise _too_large(limit)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _too_large(limit)
        chunks.append(chunk)
    return b"".join(chunks)


def _too_large(limit: int) -> HTTPException:
    # Connection: close, so uvicorn drops the rest of the body instead of reading it to find the next request
    return HTTPException(413, f"the request body is larger than the limit of {limit:,} bytes (--max-body-bytes)",
                         headers={"Connection": "close"})


def _parse_json(body: bytes):
    """Strict JSON; a json.JSONDecodeError, which FastAPI answers 422 with our message."""
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError as e:
        if e.doc[e.pos:].lstrip("-").startswith(("NaN", "Infinity")) or "infinity" in e.msg:  # or 1e999
            message = "every number must be finite (no NaN, Infinity or 1e999)"
            raise json.JSONDecodeError(message, e.doc, e.pos) from None
        raise
    if _deeper_than(value, MAX_JSON_DEPTH):
        raise json.JSONDecodeError(f"arrays and objects nested more than {MAX_JSON_DEPTH} deep", "", 0)
    return value


def _deeper_than(value, depth: int) -> bool:
    """Whether arrays and objects nest more than `depth` levels (level by level: no recursion)."""
    level = [value]
    for _ in range(depth):
        level = [item for v in level if isinstance(v, (list, dict))
                 for item in (v.values() if isinstance(v, dict) else v)]
    return any(isinstance(v, (list, dict)) for v in level)


# --- request bodies ---------------------------------------------------------------------------------
class Texts(BaseModel):
    model: str
    texts: list[str] = Field(min_length=1)


class EmbedRequest(Texts):
    normalize: bool = False
    pooling: Literal["mean", "cls", "pooled"] = "mean"


class SimilarRequest(Texts):
    query: str
    top_k: int = Field(5, ge=1)


class ClassifyRequest(Texts):
    texts_b: list[str] | None = Field(None, description="second texts, for a model trained on sentence pairs")


class QaRequest(BaseModel):
    model: str
    question: str
    context: str


class FillMaskRequest(Texts):
    top_k: int = Field(5, ge=1, le=100)


class TranslateRequest(Texts):
    beam: int = Field(4, ge=1, le=16)


class GenerateRequest(BaseModel):
    model: str
    prompt: str
    max_new_tokens: int = Field(64, ge=1)
    temperature: float = Field(0.0, ge=0)
    top_k: int = Field(0, ge=0)
    top_p: float = Field(1.0, gt=0, le=1)
    repetition_penalty: float = Field(1.0, gt=0)
    stop: list[str] = []
    stream: bool = True


class AttentionRequest(BaseModel):
    model: str
    text: str
    layer: int = -1


# --- the app ----------------------------------------------------------------------------------------
def create_app(models: dict, max_batch_size: int = 32, max_wait_ms: float = 5.0, max_queue: int = 256,
               limits: Limits = Limits(), device: str = "cpu", int8: bool = False, keep_going: bool = False) -> FastAPI:
    """The app serving `models` ({name: a folder load_model reads, a packaged name such as
    "minilm", or an already loaded interop.load.LoadedModel}). The models load in a background
    thread when the app starts (unless app.state.registry.load() ran first, as serve() does); /readyz
    answers 200 once all are in. A model that fails to load keeps /readyz at 503 with its reason;
    with keep_going the others are served and /readyz answers 200 "degraded", naming the failed ones.
    int8: their Linear layers run as PyTorch's dynamic int8 (inference.int8.quantize_int8; CPU only)."""
    registry = Registry(models, dict(max_batch_size=max_batch_size, max_wait_ms=max_wait_ms, max_queue=max_queue),
                        device, int8, keep_going)

    @asynccontextmanager
    async def lifespan(app):
        registry.start()
        yield
        # uvicorn has finished the requests in flight; the batchers finish what is queued
        await asyncio.to_thread(registry.close)

    app = FastAPI(title="bertlab serve", lifespan=lifespan,
                  description="BERT, GPT and Transformer models over HTTP, with dynamic batching. "
                              "The web page is at /.")
    app.state.registry, app.state.limits = registry, limits
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    _add_status_routes(app, registry)
    app.router.route_class = LimitedJSONRoute  # every route added from here reads its body within the limit
    _add_task_routes(app, registry, limits)
    return app


def _add_status_routes(app, registry):
    @app.get("/", include_in_schema=False)
    def page():
        return FileResponse(os.path.join(STATIC, "index.html"))

    @app.get("/healthz", summary="the server process answers")
    def healthz():
        return {"status": "ok"}

    @app.get("/readyz", summary="every model is loaded (503 until then, or if one failed; with --keep-going, "
                                "200 \"degraded\" naming the failed ones)")
    def readyz():
        models = sorted(registry.models)
        if not registry.loaded.is_set():
            return JSONResponse({"status": "loading", "models": models}, status_code=503)
        if not registry.ready:
            return JSONResponse({"status": "failed", "models": models, "errors": registry.errors}, status_code=503)
        return {"status": "degraded" if registry.errors else "ready", "models": models, "errors": registry.errors}

    @app.get("/v1/stats", summary="per model: batched calls run, requests answered, mean batch, queue depth")
    def stats():
        return {name: {"batches": m.batcher.batches, "requests": m.batcher.jobs_done,
                       "mean_batch": m.batcher.jobs_done / max(m.batcher.batches, 1),
                       "cancelled": m.batcher.cancelled, "queued": m.batcher.queue.qsize()}
                for name, m in registry.models.items()}

    @app.get("/v1/models", summary="the loaded models and the tasks each answers")
    def models():
        return {"models": [m.describe() for m in registry.models.values()], "errors": registry.errors,
                "loading": not registry.loaded.is_set()}


def _served(registry, name: str, task: str):
    """The model `name`, checked to be loaded and to do `task`."""
    if name not in registry.models:
        if name in registry.errors:
            raise HTTPException(503, f"model {name!r} failed to load: {registry.errors[name]}")
        if name in registry.sources and not registry.loaded.is_set():
            raise HTTPException(503, f"model {name!r} is still loading; see /readyz")
        raise HTTPException(404, f"unknown model {name!r}; loaded models: {', '.join(sorted(registry.models)) or 'none'}")
    served = registry.models[name]
    if task not in served.tasks:
        able = [n for n, m in registry.models.items() if task in m.tasks]
        raise HTTPException(400, f"model {name!r} ({served.loaded.kind}) does not do {task}; it does "
                                 f"{', '.join(served.tasks) or 'nothing'}. "
                                 f"Models that do {task}: {', '.join(able) or 'none'}")
    return served


def _check_texts(limits: Limits, texts: list[str], what: str = "texts"):
    if len(texts) > limits.max_texts:
        raise HTTPException(413, f"{len(texts)} {what} in one request, more than the limit of {limits.max_texts} "
                                 "(--max-texts)")
    for n, text in enumerate(texts, 1):
        if len(text) > limits.max_chars:
            raise HTTPException(413, f"text {n} has {len(text):,} characters, more than the limit of "
                                     f"{limits.max_chars:,} (--max-chars)")


async def _submit(served, request: Request, job: Job, pick=lambda result: result) -> FastJSON:
    """Queue the job and wait for its result (`pick` takes the part to answer with); errors become
    HTTP answers. The result is JSON types and numpy arrays, written by orjson directly (FastAPI's
    jsonable_encoder would cost more per embedding than the encoding itself)."""
    try:
        served.batcher.submit(job)
    except QueueFull as e:
        raise HTTPException(429, str(e), headers={"Retry-After": "1"}) from None
    try:
        result = await _while_connected(request, job, asyncio.wrap_future(job.future))
    except ValueError as e:  # the library refuses the input and says why
        raise HTTPException(422, str(e)) from None
    return FastJSON(pick(result))


_GONE = object()


async def _while_connected(request: Request, job: Job, waiting):
    """What `waiting` gives, or an HTTP 499 (for nobody: the connection is closed) as soon as the
    client has disconnected, asked every DISCONNECT_POLL_S. uvicorn does not cancel a handler whose
    client hung up, so without this an abandoned request kept its place in the queue and was
    computed in full. Either way the job is cancelled: a queued one is never run."""
    try:
        result = await _unless_gone(request, waiting)
    except asyncio.CancelledError:  # the handler itself is cancelled (shutdown): so is its job
        job.cancel()
        raise
    if result is _GONE:
        job.cancel()
        raise HTTPException(499, "the client went away")
    return result


async def _unless_gone(request: Request, waiting):
    """What `waiting` gives, or _GONE once the client has disconnected."""
    task = asyncio.ensure_future(waiting)
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=DISCONNECT_POLL_S)
            if done:
                return task.result()
            if await request.is_disconnected():
                return _GONE
    finally:
        task.cancel()  # done: no effect; else nobody waits for it any more


def _add_task_routes(app, registry, limits):
    @app.post("/v1/embed", summary="one vector per text (mean pooling by default)")
    async def embed(r: EmbedRequest, request: Request):
        served = _served(registry, r.model, "embed")
        _check_texts(limits, r.texts)
        return await _submit(served, request, Job(("embed", r.pooling, r.normalize), {"texts": r.texts}, len(r.texts)))

    @app.post("/v1/similar", summary="the texts closest in meaning to the query (cosine similarity)")
    async def similar(r: SimilarRequest, request: Request):
        served = _served(registry, r.model, "similar")
        _check_texts(limits, [r.query, *r.texts])
        if not r.query.strip():
            raise HTTPException(422, "the query is blank; give text to search for")
        payload = {"query": r.query, "texts": r.texts, "top_k": r.top_k}
        return await _submit(served, request, Job(("similar",), payload, len(r.texts) + 1))

    @app.post("/v1/classify", summary="a fine-tuned classification or regression model's label per text")
    async def classify(r: ClassifyRequest, request: Request):
        served = _served(registry, r.model, "classify")
        _check_texts(limits, r.texts + (r.texts_b or []))
        if r.texts_b is not None and len(r.texts_b) != len(r.texts):
            raise HTTPException(422, f"{len(r.texts)} texts but {len(r.texts_b)} texts_b; give one second text each")
        inputs = [{"text": t} if r.texts_b is None else {"text": t, "text_b": b}
                  for t, b in zip(r.texts, r.texts_b or r.texts)]
        return await _submit(served, request, Job(("classify",), {"inputs": inputs}, len(inputs)))

    @app.post("/v1/ner", summary="a tag per whitespace-separated word (a fine-tuned ner model)")
    async def ner(r: Texts, request: Request):
        served = _served(registry, r.model, "ner")
        _check_texts(limits, r.texts)
        return await _submit(served, request, Job(("ner",), {"inputs": [{"text": t} for t in r.texts]}, len(r.texts)))

    @app.post("/v1/qa", summary="the answer span in the context (a fine-tuned squad model)")
    async def qa(r: QaRequest, request: Request):
        served = _served(registry, r.model, "qa")
        _check_texts(limits, [r.question, r.context])
        job = Job(("qa",), {"inputs": [{"question": r.question, "context": r.context}]})
        return await _submit(served, request, job, lambda result: result["predictions"][0])

    @app.post("/v1/fill-mask", summary="the most probable tokens for each [MASK] (a masked-LM head)")
    async def fill_mask(r: FillMaskRequest, request: Request):
        served = _served(registry, r.model, "fill-mask")
        _check_texts(limits, r.texts)
        return await _submit(served, request, Job(("fill-mask", r.top_k), {"texts": r.texts}, len(r.texts)))

    @app.post("/v1/translate", summary="translations with beam search (beam 1: greedy)")
    async def translate(r: TranslateRequest, request: Request):
        served = _served(registry, r.model, "translate")
        _check_texts(limits, r.texts)
        return await _submit(served, request, Job(("translate", r.beam), {"texts": r.texts}, len(r.texts)))

    @app.post("/v1/attention", summary="one layer's attention weights, heads x tokens x tokens")
    async def attention(r: AttentionRequest, request: Request):
        served = _served(registry, r.model, "attention")
        _check_texts(limits, [r.text])
        return await _submit(served, request, Job(("attention",), {"text": r.text, "layer": r.layer}))

    @app.post("/v1/generate", summary="continue a prompt with a GPT; streamed as server-sent events by default",
              description='With "stream": true (default) the answer is text/event-stream: `data: {"text": PIECE}` '
                          'events as tokens are made, then `data: {"done": true, "text": ALL, "tokens": N}` '
                          '(or `data: {"error": ...}`).')
    async def generate(r: GenerateRequest, request: Request):
        served = _served(registry, r.model, "generate")
        _check_texts(limits, [r.prompt, *r.stop])
        if r.max_new_tokens > limits.max_new_tokens:
            raise HTTPException(413, f"max_new_tokens {r.max_new_tokens} is more than the limit of "
                                     f"{limits.max_new_tokens} (--max-new-tokens)")
        if not r.prompt.strip():
            raise HTTPException(422, "the prompt is blank; give some text to continue")
        options = _sampling_options(r, served.loaded.tokenizer)
        if not r.stream:
            return await _submit(served, request, Job(("generate", options), {"prompt": r.prompt}))
        return await _stream(served, Job(("generate", options), {"prompt": r.prompt}), request)


def _sampling_options(r: GenerateRequest, tokenizer) -> SamplingOptions:
    sampling = r.temperature > 0 or r.top_k > 0 or r.top_p < 1
    try:
        options = SamplingOptions(max_new_tokens=r.max_new_tokens, do_sample=sampling,
                                  temperature=r.temperature if sampling else 1.0, top_k=r.top_k, top_p=r.top_p,
                                  repetition_penalty=r.repetition_penalty, stop=tuple(r.stop))
    except ValueError as e:
        raise HTTPException(422, str(e)) from None
    return replace(options, eos_token_id=getattr(tokenizer, "eos_token_id", None))


_DONE = object()


async def _stream(served, job: Job, request: Request):
    """Server-sent events of a generate job. The first piece (or the error) is awaited before the
    answer starts, so a refused prompt is a plain 422, not an event in a 200 stream."""
    loop = asyncio.get_running_loop()
    events: asyncio.Queue = asyncio.Queue()
    job.on_item = lambda piece: loop.call_soon_threadsafe(events.put_nowait, piece)
    job.future.add_done_callback(lambda _: loop.call_soon_threadsafe(events.put_nowait, _DONE))
    try:
        served.batcher.submit(job)
    except QueueFull as e:
        raise HTTPException(429, str(e), headers={"Retry-After": "1"}) from None
    first = await _while_connected(request, job, events.get())
    if first is _DONE:
        await _submit_result(job)

    async def body():
        item = first
        try:
            while item is not _GONE:
                if item is _DONE:
                    yield _event(_final(job))
                    return
                yield _event({"text": item})
                item = await _unless_gone(request, events.get())
        finally:
            if not job.future.done():  # the client went away mid-stream: stop decoding for it
                job.cancel()

    return StreamingResponse(body(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})


async def _submit_result(job: Job):
    exc = job.future.exception()
    if isinstance(exc, ValueError):
        raise HTTPException(422, str(exc))
    if exc is not None:
        raise exc


def _final(job: Job) -> dict:
    exc = job.future.exception()
    if exc is None:
        return {"done": True, **job.future.result()}
    return {"error": str(exc) if not isinstance(exc, Cancelled) else "cancelled"}


def _event(data: dict) -> str:
    return f"data: {json.dumps(data, ensure_ascii=False)}\n\n"
