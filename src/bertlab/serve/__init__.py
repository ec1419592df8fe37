"""`bertlab serve`: models over HTTP (FastAPI + uvicorn) with dynamic batching and a web page.

    from bertlab.serve import create_app
    app = create_app({"minilm": "minilm", "tagger": "runs/ner/model"})
    # uvicorn.run(app, host="127.0.0.1", port=8000)

Needs the [serve] extra (fastapi, uvicorn)."""
from .app import Limits, create_app

__all__ = ["Limits", "create_app"]


def serve(models: dict, host: str = "127.0.0.1", port: int = 8000, graceful_seconds: float = 30.0,
          access_log: bool = True, **app_options):
    """Run the app with uvicorn until SIGINT/SIGTERM; on either, uvicorn stops accepting connections and
    finishes the requests in flight (at most `graceful_seconds`), then the batchers drain their queues.
    Each folder is checked first (check_models), so a bad one is an error now, not a model that
    never gets ready."""
    import uvicorn
    check_models(models, app_options.get("device", "cpu"), app_options.get("int8", False))
    uvicorn.run(create_app(models, **app_options), host=host, port=port, log_level="info",
                timeout_graceful_shutdown=graceful_seconds, access_log=access_log)


def check_models(models: dict, device: str = "cpu", int8: bool = False):
    """Every NAME's folder exists (a packaged name such as "minilm" resolves; a model already loaded
    is taken as it is); int8 runs on the CPU."""
    import os

    from ..interop.pretrained import resolve
    if int8:
        from ..inference.int8 import check_int8_settings
        check_int8_settings(device)
    for name, folder in models.items():
        if not isinstance(folder, (str, os.PathLike)):
            continue
        try:
            resolve(folder)
        except FileNotFoundError as e:
            raise ValueError(f"--model {name}={folder}: {e}") from None
