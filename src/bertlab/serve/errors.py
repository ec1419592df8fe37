"""Error answers in the shape each API's own clients read.

One server speaks three dialects: our routes answer FastAPI's `{"detail": ...}`, the OpenAI route
`/v1/embeddings` answers OpenAI's `{"error": {"message", "type", "param", "code"}}` (what the
`openai` package turns into its exceptions), and the TEI routes answer TEI's
`{"error": ..., "error_type": ...}`. The status code means the same in all three (docs/guide/serve.md
has the table); only the body's shape follows the route."""
from fastapi import HTTPException
from fastapi.exception_handlers import (
    http_exception_handler,
    request_validation_exception_handler,
)
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

OPENAI_ROUTES = frozenset({"/v1/embeddings"})
TEI_ROUTES = frozenset({"/embed", "/tokenize", "/info", "/health"})
# TEI's error_type per status (text-embeddings-inference, router/src/http/server.rs)
TEI_TYPES = {413: "Validation", 422: "Validation", 424: "Backend", 429: "Overloaded", 503: "Unhealthy"}


class APIError(HTTPException):
    """An HTTPException that also names the request field at fault (OpenAI's `param`) and a code
    (OpenAI's `code`, e.g. "model_not_found")."""

    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None,
                 headers: dict | None = None):
        super().__init__(status, message, headers=headers)
        self.param, self.code = param, code


def error_body(path: str, status: int, message: str, param: str | None = None, code: str | None = None) -> dict:
    if path in OPENAI_ROUTES:
        kind = "rate_limit_error" if status == 429 else "server_error" if status >= 424 and status != 429 \
            else "invalid_request_error"
        return {"error": {"message": message, "type": kind, "param": param, "code": code}}
    if path in TEI_ROUTES:
        return {"error": message, "error_type": TEI_TYPES.get(status, "Validation" if status < 500 else "Backend")}
    return {"detail": message}


def error_response(path: str, status: int, message: str, headers: dict | None = None, **fields) -> JSONResponse:
    return JSONResponse(error_body(path, status, message, **fields), status_code=status, headers=headers)


def add_error_handlers(app):
    """HTTP errors and invalid requests answered in the route's dialect. Our routes keep FastAPI's
    answers exactly; an invalid OpenAI request is a 400 (as OpenAI answers it: the client raises
    BadRequestError), an invalid TEI request a 422 (TEI's JSON rejection)."""

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request, exc):
        path = request.url.path
        if path not in OPENAI_ROUTES | TEI_ROUTES:
            return await http_exception_handler(request, exc)
        return error_response(path, exc.status_code, str(exc.detail), headers=exc.headers,
                              **({"param": exc.param, "code": exc.code} if isinstance(exc, APIError) else {}))

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request, exc):
        path = request.url.path
        if path not in OPENAI_ROUTES | TEI_ROUTES:
            return await request_validation_exception_handler(request, exc)
        first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid request"}
        where = [str(part) for part in first.get("loc", ()) if part != "body"]
        message = f"{'.'.join(where) + ': ' if where else ''}{first.get('msg', 'invalid request')}"
        more = len(exc.errors()) - 1
        message += f" (and {more} more problem{'s' if more > 1 else ''})" if more > 0 else ""
        status = 400 if path in OPENAI_ROUTES else 422
        return error_response(path, status, message, param=where[0] if where else None)
