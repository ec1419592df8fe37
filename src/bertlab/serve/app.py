"""The HTTP JSON API (FastAPI; OpenAPI docs at /docs) and the web page at /.

Every task endpoint takes {"model": NAME, ...}, checks the request against the server's limits,
hands a Job to the model's batcher and waits for its result. Status codes: 404 an unknown model
(the message lists the loaded ones), 400 a model that does not do the task, 413 a request past a
size limit (the message names the flag), 422 malformed JSON, wrong types or input the model
refuses (the library's message), 429 a full queue, 503 while models load."""
import asyncio
import json
import os
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import Literal

import orjson
from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import FileResponse, JSONResponse, Response, StreamingResponse
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


class FastJSON(Response):
    """JSON by orjson, which writes numpy arrays itself: an embedding goes out without becoming a
    list of Python floats first (measured: json.dumps of 32 MiniLM vectors took ~58 ms on the
    loaded 2-core machine, a serial step between two batches)."""
    media_type = "application/json"

    def render(self, content) -> bytes:
        return orjson.dumps(content, option=orjson.OPT_SERIALIZE_NUMPY)


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
               limits: Limits = Limits(), device: str = "cpu", int8: bool = False) -> FastAPI:
    """The app serving `models` ({name: a folder load_model reads, a packaged name such as
    "minilm", or an already loaded interop.load.LoadedModel}). The models load in a background
    thread when the app starts; /readyz answers 200 once all are in. int8: their Linear layers run
    as PyTorch's dynamic int8 (inference.int8.quantize_int8; CPU only)."""
    registry = Registry(models, dict(max_batch_size=max_batch_size, max_wait_ms=max_wait_ms, max_queue=max_queue),
                        device, int8)

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
    _add_task_routes(app, registry, limits)
    return app


def _add_status_routes(app, registry):
    @app.get("/", include_in_schema=False)
    def page():
        return FileResponse(os.path.join(STATIC, "index.html"))

    @app.get("/healthz", summary="the server process answers")
    def healthz():
        return {"status": "ok"}

    @app.get("/readyz", summary="every model is loaded (503 until then, or if one failed)")
    def readyz():
        if not registry.loaded.is_set():
            return JSONResponse({"status": "loading", "models": sorted(registry.models)}, status_code=503)
        if registry.errors:
            return JSONResponse({"status": "failed", "errors": registry.errors}, status_code=503)
        return {"status": "ready", "models": sorted(registry.models)}

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


async def _submit(served, job: Job, pick=lambda result: result) -> FastJSON:
    """Queue the job and wait for its result (`pick` takes the part to answer with); errors become
    HTTP answers. The result is JSON types and numpy arrays, written by orjson directly (FastAPI's
    jsonable_encoder would cost more per embedding than the encoding itself)."""
    try:
        served.batcher.submit(job)
    except QueueFull as e:
        raise HTTPException(429, str(e), headers={"Retry-After": "1"}) from None
    try:
        return FastJSON(pick(await asyncio.wrap_future(job.future)))
    except asyncio.CancelledError:
        job.cancelled.set()
        raise
    except ValueError as e:  # the library refuses the input and says why
        raise HTTPException(422, str(e)) from None


def _add_task_routes(app, registry, limits):
    @app.post("/v1/embed", summary="one vector per text (mean pooling by default)")
    async def embed(r: EmbedRequest):
        served = _served(registry, r.model, "embed")
        _check_texts(limits, r.texts)
        return await _submit(served, Job(("embed", r.pooling, r.normalize), {"texts": r.texts}, len(r.texts)))

    @app.post("/v1/similar", summary="the texts closest in meaning to the query (cosine similarity)")
    async def similar(r: SimilarRequest):
        served = _served(registry, r.model, "similar")
        _check_texts(limits, [r.query, *r.texts])
        if not r.query.strip():
            raise HTTPException(422, "the query is blank; give text to search for")
        payload = {"query": r.query, "texts": r.texts, "top_k": r.top_k}
        return await _submit(served, Job(("similar",), payload, len(r.texts) + 1))

    @app.post("/v1/classify", summary="a fine-tuned classification or regression model's label per text")
    async def classify(r: ClassifyRequest):
        served = _served(registry, r.model, "classify")
        _check_texts(limits, r.texts + (r.texts_b or []))
        if r.texts_b is not None and len(r.texts_b) != len(r.texts):
            raise HTTPException(422, f"{len(r.texts)} texts but {len(r.texts_b)} texts_b; give one second text each")
        inputs = [{"text": t} if r.texts_b is None else {"text": t, "text_b": b}
                  for t, b in zip(r.texts, r.texts_b or r.texts)]
        return await _submit(served, Job(("classify",), {"inputs": inputs}, len(inputs)))

    @app.post("/v1/ner", summary="a tag per whitespace-separated word (a fine-tuned ner model)")
    async def ner(r: Texts):
        served = _served(registry, r.model, "ner")
        _check_texts(limits, r.texts)
        return await _submit(served, Job(("ner",), {"inputs": [{"text": t} for t in r.texts]}, len(r.texts)))

    @app.post("/v1/qa", summary="the answer span in the context (a fine-tuned squad model)")
    async def qa(r: QaRequest):
        served = _served(registry, r.model, "qa")
        _check_texts(limits, [r.question, r.context])
        job = Job(("qa",), {"inputs": [{"question": r.question, "context": r.context}]})
        return await _submit(served, job, lambda result: result["predictions"][0])

    @app.post("/v1/fill-mask", summary="the most probable tokens for each [MASK] (a masked-LM head)")
    async def fill_mask(r: FillMaskRequest):
        served = _served(registry, r.model, "fill-mask")
        _check_texts(limits, r.texts)
        return await _submit(served, Job(("fill-mask", r.top_k), {"texts": r.texts}, len(r.texts)))

    @app.post("/v1/translate", summary="translations with beam search (beam 1: greedy)")
    async def translate(r: TranslateRequest):
        served = _served(registry, r.model, "translate")
        _check_texts(limits, r.texts)
        return await _submit(served, Job(("translate", r.beam), {"texts": r.texts}, len(r.texts)))

    @app.post("/v1/attention", summary="one layer's attention weights, heads x tokens x tokens")
    async def attention(r: AttentionRequest):
        served = _served(registry, r.model, "attention")
        _check_texts(limits, [r.text])
        return await _submit(served, Job(("attention",), {"text": r.text, "layer": r.layer}))

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
            return await _submit(served, Job(("generate", options), {"prompt": r.prompt}))
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
    first = await events.get()
    if first is _DONE:
        await _submit_result(job)

    async def body():
        item = first
        try:
            while item is not None:
                if item is _DONE:
                    yield _event(_final(job))
                    return
                yield _event({"text": item})
                item = await _next_event(events, request)
        finally:
            if not job.future.done():  # the client went away mid-stream: stop decoding for it
                job.cancelled.set()

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


async def _next_event(events: asyncio.Queue, request: Request):
    """The next piece, or None once the client has disconnected (checked while waiting)."""
    while True:
        try:
            return await asyncio.wait_for(events.get(), 0.5)
        except asyncio.TimeoutError:
            if await request.is_disconnected():
                return None


def _event(data: dict) -> str:
    return f"data: {json.dumps(data, ensure_ascii=False)}\n\n"
