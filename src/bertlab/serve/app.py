"""The HTTP JSON API (FastAPI; OpenAPI docs at /docs) and the web page at /.

Every task endpoint takes {"model": NAME, ...}, checks the request against the server's limits,
hands a Job to the model's batcher and waits for its result. Status codes: 404 an unknown model
(the message lists the loaded ones), 400 a model that does not do the task, 413 a request past a
size limit (the message names the flag) or an input longer than the model reads (serve.inputs: no
silent truncation), 422 malformed JSON, wrong types or input the model refuses (the library's
message), 424 the model failed on the input, 429 a full queue or too many requests at once, 503
while models load. Beside these routes the OpenAI (openai_api.py) and TEI (tei.py) ones answer the
same models, and /metrics (metrics.py) counts it all.

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

from ..finetune.tasks import task_from_state
from ..inference.generate import SamplingOptions
from . import inputs
from .batching import Cancelled, Job, QueueFull
from .errors import APIError, add_error_handlers
from .handling import (
    GONE,
    TRUNCATED_HEADER,
    check_texts,
    failure,
    measure,
    served_model,
    submit,
    unless_gone,
    while_connected,
)
from .metrics import Metrics, RequestGate
from .openai_api import add_openai_routes
from .registry import Registry
from .tei import add_tei_status_routes, add_tei_task_routes

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
TRUNCATE = Field(False, description="cut an input longer than the model reads instead of refusing it (413); "
                                    "the answer's truncated_inputs and X-Truncated-Inputs say how many were cut")


class Texts(BaseModel):
    model: str
    texts: list[str] = Field(min_length=1)
    truncate: bool = TRUNCATE


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
    truncate: bool = TRUNCATE


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
    truncate: bool = Field(False, description="cut the prompt's start when prompt + max_new_tokens exceed the "
                                              "model's positions, instead of refusing it (413)")


class AttentionRequest(BaseModel):
    model: str
    text: str
    layer: int = -1
    truncate: bool = Field(False, description="accepted for every task alike; attention never cuts (413)")


# --- the app ----------------------------------------------------------------------------------------
def create_app(models: dict, max_batch_size: int = 32, max_wait_ms: float = 5.0, max_queue: int = 256,
               limits: Limits = Limits(), device: str = "cpu", int8: bool = False, keep_going: bool = False,
               max_batch_tokens: int = 16384, max_concurrent_requests: int = 512) -> FastAPI:
    """The app serving `models` ({name: a folder load_model reads, a packaged name such as
    "minilm", or an already loaded interop.load.LoadedModel}). The models load in a background
    thread when the app starts (unless app.state.registry.load() ran first, as serve() does); /readyz
    answers 200 once all are in. A model that fails to load keeps /readyz at 503 with its reason;
    with keep_going the others are served and /readyz answers 200 "degraded", naming the failed ones.
    int8: their Linear layers run as PyTorch's dynamic int8 (inference.int8.quantize_int8; CPU only).
    max_batch_tokens: a batch holds at most this many tokens (and max_batch_size texts);
    max_concurrent_requests: task requests answered at once, past which a new one is a 429 at once."""
    if max_concurrent_requests < 1:
        raise ValueError(f"max_concurrent_requests {max_concurrent_requests} must be >= 1")
    metrics = Metrics()
    registry = Registry(models, dict(max_batch_size=max_batch_size, max_wait_ms=max_wait_ms, max_queue=max_queue,
                                     max_batch_tokens=max_batch_tokens), device, int8, keep_going, metrics)

    @asynccontextmanager
    async def lifespan(app):
        registry.start()
        yield
        # uvicorn has finished the requests in flight; the batchers finish what is queued
        await asyncio.to_thread(registry.close)

    app = FastAPI(title="bertlab serve", lifespan=lifespan,
                  description="BERT, GPT and Transformer models over HTTP, with dynamic batching, an "
                              "OpenAI-compatible /v1/embeddings and TEI-compatible /embed. The web page is at /.")
    app.state.registry, app.state.limits, app.state.metrics = registry, limits, metrics
    app.state.settings = {"max_batch_size": max_batch_size, "max_batch_tokens": max_batch_tokens,
                          "max_queue": max_queue, "max_concurrent_requests": max_concurrent_requests}
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    _add_status_routes(app, registry)
    add_tei_status_routes(app, registry)
    app.router.route_class = LimitedJSONRoute  # every route added from here reads its body within the limit
    first_task_route = len(app.routes)
    _add_task_routes(app, registry, limits)
    add_openai_routes(app, registry, limits)
    add_tei_task_routes(app, registry, limits)
    add_error_handlers(app)
    task_paths = {r.path for r in app.routes[first_task_route:]}
    app.add_middleware(RequestGate, metrics=metrics, routes={r.path for r in app.routes if hasattr(r, "path")},
                       limited=task_paths, max_concurrent_requests=max_concurrent_requests)
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

    @app.get("/metrics", summary="Prometheus metrics: requests by route and status, latency and batch-size "
                                 "histograms, queue depth, tokens embedded")
    def prometheus():
        body, content_type = app.state.metrics.exposition()
        return Response(body, media_type=content_type)

    @app.get("/v1/models", summary="the loaded models and the tasks each answers")
    def models():
        return {"models": [m.describe() for m in registry.models.values()], "errors": registry.errors,
                "loading": not registry.loaded.is_set()}


def _add_task_routes(app, registry, limits):
    @app.post("/v1/embed", summary="one vector per text (mean pooling by default)")
    async def embed(r: EmbedRequest, request: Request):
        served = served_model(registry, r.model, "embed")
        check_texts(limits, r.texts)
        fitted = await measure(inputs.fit_texts, served.loaded, r.texts, r.truncate, "right", _texts_at, "texts")
        job = Job(("embed", r.pooling, r.normalize), {"texts": r.texts}, len(r.texts), fitted.tokens,
                  fitted.sequences)
        return await submit(served, request, job, cut=_cut(r, fitted.cut))

    @app.post("/v1/similar", summary="the texts closest in meaning to the query (cosine similarity)")
    async def similar(r: SimilarRequest, request: Request):
        served = served_model(registry, r.model, "similar")
        check_texts(limits, [r.query, *r.texts])
        if not r.query.strip():
            raise HTTPException(422, "the query is blank; give text to search for")
        fitted = await measure(inputs.fit_texts, served.loaded, [r.query, *r.texts], r.truncate, "right",
                                lambda i: "the query" if i == 0 else f"texts[{i - 1}]", "texts")
        payload = {"query": r.query, "texts": r.texts, "top_k": r.top_k}
        job = Job(("similar",), payload, len(r.texts) + 1, fitted.tokens, fitted.sequences)
        return await submit(served, request, job, cut=_cut(r, fitted.cut))

    @app.post("/v1/classify", summary="a fine-tuned classification or regression model's label per text")
    async def classify(r: ClassifyRequest, request: Request):
        served = served_model(registry, r.model, "classify")
        check_texts(limits, r.texts + (r.texts_b or []))
        if r.texts_b is not None and len(r.texts_b) != len(r.texts):
            raise HTTPException(422, f"{len(r.texts)} texts but {len(r.texts_b)} texts_b; give one second text each")
        tokens, cut = await measure(inputs.fit_classify, task_from_state(served.loaded), served.loaded.tokenizer,
                                     r.texts, r.texts_b, r.truncate)
        inputs_ = [{"text": t} if r.texts_b is None else {"text": t, "text_b": b}
                   for t, b in zip(r.texts, r.texts_b or r.texts)]
        job = Job(("classify",), {"inputs": inputs_}, len(inputs_), tokens)
        return await submit(served, request, job, cut=_cut(r, cut))

    @app.post("/v1/ner", summary="a tag per whitespace-separated word (a fine-tuned ner model)")
    async def ner(r: Texts, request: Request):
        served = served_model(registry, r.model, "ner")
        check_texts(limits, r.texts)  # long sentences are read whole, in windows: nothing is cut
        tokens = sum(map(len, await measure(served.loaded.tokenizer.tokenize_ids_batch, r.texts)))
        job = Job(("ner",), {"inputs": [{"text": t} for t in r.texts]}, len(r.texts), tokens)
        return await submit(served, request, job, cut=_cut(r, 0))

    @app.post("/v1/qa", summary="the answer span in the context (a fine-tuned squad model)")
    async def qa(r: QaRequest, request: Request):
        served = served_model(registry, r.model, "qa")
        check_texts(limits, [r.question, r.context])
        tokens, cut = await measure(inputs.fit_question, task_from_state(served.loaded), served.loaded.tokenizer,
                                     r.question, r.context, r.truncate)
        job = Job(("qa",), {"inputs": [{"question": r.question, "context": r.context}]}, 1, tokens)
        return await submit(served, request, job, lambda result: result["predictions"][0], cut=_cut(r, cut))

    @app.post("/v1/fill-mask", summary="the most probable tokens for each [MASK] (a masked-LM head)")
    async def fill_mask(r: FillMaskRequest, request: Request):
        served = served_model(registry, r.model, "fill-mask")
        check_texts(limits, r.texts)
        tokens = await measure(inputs.fit_fill_mask, served.loaded, r.texts)
        job = Job(("fill-mask", r.top_k), {"texts": r.texts}, len(r.texts), tokens)
        return await submit(served, request, job, cut=_cut(r, 0))

    @app.post("/v1/translate", summary="translations with beam search (beam 1: greedy)")
    async def translate(r: TranslateRequest, request: Request):
        served = served_model(registry, r.model, "translate")
        check_texts(limits, r.texts)
        fitted = await measure(inputs.fit_sources, served.loaded, r.texts, r.truncate)
        job = Job(("translate", r.beam), {"texts": r.texts}, len(r.texts), fitted.tokens, fitted.sequences)
        return await submit(served, request, job, cut=_cut(r, fitted.cut))

    @app.post("/v1/attention", summary="one layer's attention weights, heads x tokens x tokens")
    async def attention(r: AttentionRequest, request: Request):
        served = served_model(registry, r.model, "attention")
        check_texts(limits, [r.text])
        tokens = await measure(inputs.fit_attention, served.loaded, r.text) if r.text.strip() else 0
        job = Job(("attention",), {"text": r.text, "layer": r.layer}, 1, tokens)
        return await submit(served, request, job, cut=_cut(r, 0))

    @app.post("/v1/generate", summary="continue a prompt with a GPT; streamed as server-sent events by default",
              description='With "stream": true (default) the answer is text/event-stream: `data: {"text": PIECE}` '
                          'events as tokens are made, then `data: {"done": true, "text": ALL, "tokens": N}` '
                          '(or `data: {"error": ...}`).')
    async def generate(r: GenerateRequest, request: Request):
        served = served_model(registry, r.model, "generate")
        check_texts(limits, [r.prompt, *r.stop])
        if r.max_new_tokens > limits.max_new_tokens:
            raise HTTPException(413, f"max_new_tokens {r.max_new_tokens} is more than the limit of "
                                     f"{limits.max_new_tokens} (--max-new-tokens)")
        if not r.prompt.strip():
            raise HTTPException(422, "the prompt is blank; give some text to continue")
        options = _sampling_options(r, served.loaded.tokenizer)
        fitted = await measure(inputs.fit_prompt, served.loaded, r.prompt, r.max_new_tokens, r.truncate)
        job = Job(("generate", options), {"prompt": r.prompt}, 1, fitted.tokens + r.max_new_tokens, fitted.sequences)
        if not r.stream:
            return await submit(served, request, job, cut=_cut(r, fitted.cut))
        return await _stream(served, job, request, _cut(r, fitted.cut))


def _texts_at(i: int) -> str:
    return f"texts[{i}]"


def _cut(r, cut: int) -> int | None:
    """How many inputs were cut, told only to a request that allowed cutting."""
    return cut if r.truncate else None


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


async def _stream(served, job: Job, request: Request, cut: int | None = None):
    """Server-sent events of a generate job. The first piece (or the error) is awaited before the
    answer starts, so a refused prompt is a plain 422, not an event in a 200 stream."""
    loop = asyncio.get_running_loop()
    events: asyncio.Queue = asyncio.Queue()
    job.on_item = lambda piece: loop.call_soon_threadsafe(events.put_nowait, piece)
    job.future.add_done_callback(lambda _: loop.call_soon_threadsafe(events.put_nowait, _DONE))
    try:
        served.batcher.submit(job)
    except QueueFull as e:
        raise APIError(429, str(e), headers={"Retry-After": "1"}) from None
    first = await while_connected(request, job, events.get())
    if first is _DONE:
        await _submit_result(job)

    async def body():
        item = first
        try:
            while item is not GONE:
                if item is _DONE:
                    yield _event({**_final(job), **({"truncated_inputs": cut} if cut is not None else {})})
                    return
                yield _event({"text": item})
                item = await unless_gone(request, events.get())
        finally:
            if not job.future.done():  # the client went away mid-stream: stop decoding for it
                job.cancel()

    headers = {"Cache-Control": "no-cache", **({TRUNCATED_HEADER: str(cut)} if cut is not None else {})}
    return StreamingResponse(body(), media_type="text/event-stream", headers=headers)


async def _submit_result(job: Job):
    exc = job.future.exception()
    if exc is not None and not isinstance(exc, Cancelled):
        raise failure(exc)


def _final(job: Job) -> dict:
    exc = job.future.exception()
    if exc is None:
        return {"done": True, **job.future.result()}
    return {"error": str(exc) if not isinstance(exc, Cancelled) else "cancelled"}


def _event(data: dict) -> str:
    return f"data: {json.dumps(data, ensure_ascii=False)}\n\n"
