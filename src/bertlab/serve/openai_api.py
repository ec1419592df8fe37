"""`POST /v1/embeddings`, as OpenAI's API answers it, so the `openai` package (and anything built on
it) embeds with a served BERT by changing only its base_url:

    client = openai.OpenAI(base_url="http://127.0.0.1:8000/v1", api_key="unused")
    client.embeddings.create(model="minilm", input=["hello world"]).data[0].embedding

`input`: a string, a list of strings, a list of token ids (the model's own word-piece ids, without
[CLS]/[SEP]) or a list of such lists. The vectors are mean-pooled and normalised to length 1, as
OpenAI's are (for all-MiniLM-L6-v2 this is sentence-transformers' own output). `encoding_format`
"base64" sends each vector as little-endian float32 bytes, which the client decodes itself (and asks
for by default). `dimensions` must be the model's own width: none of these models was trained to be
shortened (Matryoshka), and cutting such a vector would silently make it worse, so any other value
is a 400 naming the width. `usage` counts the tokens the model read, [CLS] and [SEP] included.
An input longer than the model reads is a 413 naming it, unless the request adds `"truncate": true`
(an extension, `extra_body` in the client). Errors come in OpenAI's shape (serve.errors)."""
import base64
from typing import Literal

import numpy as np
from fastapi import Request
from pydantic import BaseModel, Field

from . import inputs
from .batching import Job
from .errors import APIError
from .handling import answer, check_texts, measure, result, served_model


class EmbeddingsRequest(BaseModel):
    input: str | list[str] | list[int] | list[list[int]]
    model: str
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: int | None = Field(None, ge=1)
    user: str | None = None  # accepted and ignored, as a self-hosted server has no users to tell apart
    truncate: bool = Field(False, description="bertlab's extension: cut an input longer than the model reads "
                                              "instead of refusing it (413)")


def _inputs(r: EmbeddingsRequest) -> tuple[list[str] | None, list[list[int]] | None]:
    """(texts, None) or (None, token id lists); an empty input or list is a 400, as OpenAI's."""
    given = [r.input] if isinstance(r.input, str) else r.input
    if not given:
        raise APIError(400, "input is empty; give a string, a list of strings or a list of token ids", "input")
    if isinstance(given[0], int):
        given = [given]
    if isinstance(given[0], str):
        empty = next((i for i, text in enumerate(given) if not text), None)
        if empty is not None:
            raise APIError(400, f"input[{empty}] is an empty string; every input needs text", "input")
        return given, None
    empty = next((i for i, ids in enumerate(given) if not ids), None)
    if empty is not None:
        raise APIError(400, f"input[{empty}] is an empty list of token ids", "input")
    return None, given


def _encode(vector: np.ndarray, encoding_format: str):
    if encoding_format == "base64":  # little-endian float32, as the openai client decodes it (np.frombuffer)
        return base64.b64encode(vector.astype("<f4").tobytes()).decode("ascii")
    return vector


def add_openai_routes(app, registry, limits):
    @app.post("/v1/embeddings", summary="OpenAI-compatible embeddings (the openai client's embeddings.create)")
    async def embeddings(r: EmbeddingsRequest, request: Request):
        served = served_model(registry, r.model, "embed")
        texts, ids = _inputs(r)
        loaded = served.loaded
        width = loaded.encoder.config.hidden_size
        if r.dimensions is not None and r.dimensions != width:
            raise APIError(400, f"model {r.model!r} gives {width}-dimensional embeddings and was not trained to be "
                                f"shortened (Matryoshka); leave dimensions out or give {width}", "dimensions")
        name = lambda i: f"input[{i}]"
        if texts is not None:
            check_texts(limits, texts, "inputs", "input")
            fitted = await measure(inputs.fit_texts, loaded, texts, r.truncate, "right", name)
        else:
            if len(ids) > limits.max_texts:
                raise APIError(413, f"{len(ids)} inputs in one request, more than the limit of {limits.max_texts} "
                                    "(--max-texts)", "input")
            inputs.check_token_ids(loaded, ids)
            fitted = inputs.fit_pieces(loaded, ids, r.truncate, "right", name)
        job = Job(("embed", "mean", True), {"input": texts or ids}, len(fitted.sequences), fitted.tokens,
                  fitted.sequences)
        vectors = (await result(served, request, job))["embeddings"]
        data = [{"object": "embedding", "index": i, "embedding": _encode(v, r.encoding_format)}
                for i, v in enumerate(vectors)]
        usage = {"prompt_tokens": fitted.tokens, "total_tokens": fitted.tokens}
        return answer({"object": "list", "data": data, "model": r.model, "usage": usage},
                       fitted.cut if r.truncate else None)
