"""The routes of Hugging Face's text-embeddings-inference (TEI), beside ours, so a client or a
load balancer written for TEI works unchanged: `POST /embed`, `POST /tokenize`, `GET /info`,
`GET /health`. Errors come in TEI's shape, `{"error": ..., "error_type": ...}` (serve.errors).

TEI serves one model; this server may serve several. A TEI request answers with the first
`--model` that embeds, unless it names another with `"model"` (an extension; `/info?model=NAME`).
`/embed` pools as /v1/embeddings does (mean) and normalises unless `"normalize": false`, as TEI.
An input longer than the model reads is a 413 (TEI's own status) naming it, unless `"truncate":
true`; then `truncation_direction` "Right" (default) keeps its start and "Left" its end, and the
header X-Truncated-Inputs says how many were cut (TEI's answer is a bare list: no room for a field)."""
from importlib.metadata import PackageNotFoundError, version
from typing import Literal

from fastapi import Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, Field

from . import inputs
from .batching import Job
from .errors import APIError
from .handling import answer, check_texts, measure, result, served_model

Inputs = str | list[str]


class TeiEmbedRequest(BaseModel):
    inputs: Inputs
    normalize: bool = True
    truncate: bool = False
    truncation_direction: Literal["Right", "Left", "right", "left"] = "Right"
    model: str | None = Field(None, description="bertlab's extension: the served model (default: the first that embeds)")


class TeiTokenizeRequest(BaseModel):
    inputs: Inputs
    add_special_tokens: bool = True
    model: str | None = None


def _version() -> str | None:
    try:
        return version("bertlab")
    except PackageNotFoundError:
        return None


def default_model(registry, name: str | None, task: str = "embed"):
    """The named model, or the first --model that does `task` (503 while they load)."""
    if name is not None:
        return served_model(registry, name, task)
    for candidate in registry.sources:
        if candidate in registry.models and task in registry.models[candidate].tasks:
            return registry.models[candidate]
    if not registry.loaded.is_set():
        raise APIError(503, "the models are still loading; see /readyz", headers={"Retry-After": "5"})
    raise APIError(404, f"no served model does {task}; loaded models: {', '.join(sorted(registry.models)) or 'none'}")


def _texts(given: Inputs) -> list[str]:
    texts = [given] if isinstance(given, str) else given
    if not texts:
        raise APIError(422, "`inputs` cannot be empty")
    return texts


def add_tei_status_routes(app, registry):
    @app.get("/health", summary="TEI's health check: 200 once the models are loaded and serving, else 503")
    def health():
        if not registry.ready:
            state = "loading" if not registry.loaded.is_set() else "failed: " + "; ".join(registry.errors.values())
            return JSONResponse({"error": f"the models are not ready ({state})", "error_type": "Unhealthy"},
                                status_code=503)
        return Response(status_code=200)

    @app.get("/info", summary="TEI's model information: the model, its input limit, the batching limits")
    def info(model: str | None = None):
        served = default_model(registry, model)
        settings, loaded = app.state.settings, served.loaded
        return {"model_id": served.name, "model_sha": None, "model_source": served.source,
                "model_dtype": str(next(loaded.model.parameters()).dtype).removeprefix("torch."),
                "model_type": {"embedding": {"pooling": "mean"}},
                "max_concurrent_requests": settings["max_concurrent_requests"],
                "max_input_length": inputs.embed_limit(loaded),
                "max_batch_tokens": settings["max_batch_tokens"],
                "max_batch_requests": settings["max_batch_size"],
                "max_client_batch_size": app.state.limits.max_texts,
                "auto_truncate": False, "tokenization_workers": None, "version": _version()}


def add_tei_task_routes(app, registry, limits):
    @app.post("/embed", summary="TEI's embed: one vector per input, normalised by default")
    async def embed(r: TeiEmbedRequest, request: Request):
        served = default_model(registry, r.model)
        texts = _texts(r.inputs)
        check_texts(limits, texts, "inputs", "inputs")
        fitted = await measure(inputs.fit_texts, served.loaded, texts, r.truncate, r.truncation_direction.lower(),
                               lambda i: f"inputs[{i}]", "inputs")
        job = Job(("embed", "mean", r.normalize), {"texts": texts}, len(texts), fitted.tokens,
                  fitted.sequences)
        vectors = (await result(served, request, job))["embeddings"]
        return answer(vectors, fitted.cut if r.truncate else None)

    @app.post("/tokenize", summary="TEI's tokenize: each input's tokens, with their character offsets")
    async def tokenize(r: TeiTokenizeRequest):
        served = default_model(registry, r.model)
        texts = _texts(r.inputs)
        check_texts(limits, texts, "inputs", "inputs")
        return answer(await measure(_tokens, served.loaded.tokenizer, texts, r.add_special_tokens), None)


def _tokens(tokenizer, texts: list[str], special: bool) -> list[list[dict]]:
    """TEI's SimpleToken per token: id, text (the input's characters it came from), special, start and
    stop (character offsets into the input; None for [CLS] and [SEP])."""
    out = []
    for text in texts:
        ids, offsets = tokenizer.tokenize_with_offsets(text)
        tokens = [{"id": i, "text": text[a:b], "special": False, "start": a, "stop": b} for i, (a, b) in zip(ids, offsets)]
        if special:
            cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
            tokens = [_special(tokenizer, cls), *tokens, _special(tokenizer, sep)]
        out.append(tokens)
    return out


def _special(tokenizer, token_id: int) -> dict:
    return {"id": token_id, "text": tokenizer.convert_ids_to_tokens([token_id])[0], "special": True,
            "start": None, "stop": None}
