"""What every task route does with a request: find the model, check the request's size, queue its
job and turn the result, or the failure, into the answer. Shared by our routes (app.py), the OpenAI
route (openai_api.py) and the TEI routes (tei.py)."""
import asyncio

import orjson
from fastapi import HTTPException, Request
from fastapi.responses import Response

from .batching import Cancelled, Job, QueueFull
from .errors import APIError

DISCONNECT_POLL_S = 0.5  # how often a waiting request asks whether its client is still there
TRUNCATED_HEADER = "X-Truncated-Inputs"  # how many inputs a request with "truncate": true had cut


class FastJSON(Response):
    """JSON by orjson, which writes numpy arrays itself: an embedding goes out without becoming a
    list of Python floats first (measured: json.dumps of 32 MiniLM vectors took ~58 ms on the
    loaded 2-core machine, a serial step between two batches)."""
    media_type = "application/json"

    def render(self, content) -> bytes:
        return orjson.dumps(content, option=orjson.OPT_SERIALIZE_NUMPY)


def served_model(registry, name: str, task: str):
    """The model `name`, checked to be loaded and to do `task`."""
    if name not in registry.models:
        if name in registry.errors:
            raise APIError(503, f"model {name!r} failed to load: {registry.errors[name]}", "model")
        if name in registry.sources and not registry.loaded.is_set():
            raise APIError(503, f"model {name!r} is still loading; see /readyz", "model", headers={"Retry-After": "5"})
        raise APIError(404, f"unknown model {name!r}; loaded models: {', '.join(sorted(registry.models)) or 'none'}",
                       "model", "model_not_found")
    served = registry.models[name]
    if task not in served.tasks:
        able = [n for n, m in registry.models.items() if task in m.tasks]
        raise APIError(400, f"model {name!r} ({served.loaded.kind}) does not do {task}; it does "
                            f"{', '.join(served.tasks) or 'nothing'}. Models that do {task}: {', '.join(able) or 'none'}",
                       "model")
    return served


def check_texts(limits, texts: list[str], what: str = "texts", param: str | None = None):
    if len(texts) > limits.max_texts:
        raise APIError(413, f"{len(texts)} {what} in one request, more than the limit of {limits.max_texts} "
                            "(--max-texts)", param)
    for n, text in enumerate(texts, 1):
        if len(text) > limits.max_chars:
            raise APIError(413, f"text {n} has {len(text):,} characters, more than the limit of "
                                f"{limits.max_chars:,} (--max-chars)", param)


async def submit(served, request: Request, job: Job, pick=lambda result: result, cut: int | None = None) -> FastJSON:
    """Queue the job and wait for its result (`pick` takes the part to answer with); errors become
    HTTP answers. The result is JSON types and numpy arrays, written by orjson directly (FastAPI's
    jsonable_encoder would cost more per embedding than the encoding itself). `cut`: how many inputs
    were cut (a request with "truncate": true), told in the answer's truncated_inputs and a header."""
    return answer(pick(await result(served, request, job)), cut)


def answer(content, cut: int | None) -> FastJSON:
    if cut is None:
        return FastJSON(content)
    if isinstance(content, dict):
        content = {**content, "truncated_inputs": cut}
    return FastJSON(content, headers={TRUNCATED_HEADER: str(cut)})


async def result(served, request: Request, job: Job):
    """The job's result once the batcher has run it; the failures as HTTP errors."""
    try:
        served.batcher.submit(job)
    except QueueFull as e:
        raise APIError(429, str(e), headers={"Retry-After": "1"}) from None
    try:
        return await while_connected(request, job, asyncio.wrap_future(job.future))
    except (HTTPException, Cancelled, asyncio.CancelledError):
        raise
    except Exception as e:  # noqa: BLE001 - the model's run raised: each kind is an answer
        raise failure(e) from None


def failure(e: Exception) -> HTTPException:
    """A ValueError the library raised for the input is a 422 with its message; anything else the
    model's run raised (a RuntimeError, NaN or infinity in its output) is the model failing: 424.
    NaN is told apart by inference.embed.check_finite's message: the library raises it as a
    ValueError, like the input refusals."""
    if isinstance(e, ValueError) and "NaN or infinity" not in str(e):
        return APIError(422, str(e))
    return APIError(424, f"the model failed on this input: {' '.join(f'{type(e).__name__}: {e}'.split())}")


async def measure(fn, *args):
    """Tokenize off the event loop, so one request of many long texts does not hold up every other
    request's reading and answering."""
    return await asyncio.to_thread(fn, *args)


GONE = object()


async def while_connected(request: Request, job: Job, waiting):
    """What `waiting` gives, or an HTTP 499 (for nobody: the connection is closed) as soon as the
    client has disconnected, asked every DISCONNECT_POLL_S. uvicorn does not cancel a handler whose
    client hung up, so without this an abandoned request kept its place in the queue and was
    computed in full. Either way the job is cancelled: a queued one is never run."""
    try:
        result = await unless_gone(request, waiting)
    except asyncio.CancelledError:  # the handler itself is cancelled (shutdown): so is its job
        job.cancel()
        raise
    if result is GONE:
        job.cancel()
        raise HTTPException(499, "the client went away")
    return result


async def unless_gone(request: Request, waiting):
    """What `waiting` gives, or GONE once the client has disconnected."""
    task = asyncio.ensure_future(waiting)
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=DISCONNECT_POLL_S)
            if done:
                return task.result()
            if await request.is_disconnected():
                return GONE
    finally:
        task.cancel()  # done: no effect; else nobody waits for it any more
