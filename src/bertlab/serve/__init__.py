"""`bertlab serve`: models over HTTP (FastAPI + uvicorn) with dynamic batching and a web page; OpenAI's
/v1/embeddings and TEI's /embed, /tokenize, /info and /health beside our routes; /metrics for Prometheus.

    from bertlab.serve import create_app
    app = create_app({"minilm": "minilm", "tagger": "runs/ner/model"}, max_batch_tokens=16384,
                     max_concurrent_requests=512)
    # uvicorn.run(app, host="127.0.0.1", port=8000)

Needs the [serve] extra (fastapi, uvicorn, orjson, prometheus-client)."""
import contextlib
import signal
import threading

from .app import Limits, create_app

__all__ = ["Limits", "create_app"]


def serve(models: dict, host: str = "127.0.0.1", port: int = 8000, graceful_seconds: float = 30.0,
          access_log: bool = True, **app_options):
    """Run the app with uvicorn until SIGINT/SIGTERM; on either, uvicorn stops accepting connections and
    finishes the requests in flight (at most `graceful_seconds`), then the batchers drain their queues;
    after SIGTERM serve() returns (the command exits 0), after SIGINT KeyboardInterrupt is raised.
    Each folder is checked first (check_models), then every model is loaded before the server
    listens: one that fails is an error now (ValueError naming it and why), not a model that never
    gets ready; with keep_going=True the failures are logged and the others served."""
    import uvicorn

    from ..device import pick_device
    app_options["device"] = str(pick_device(app_options.get("device", "auto")))
    check_models(models, app_options["device"], app_options.get("int8", False))
    app = create_app(models, **app_options)
    load_models(app.state.registry)
    with _sigterm_is_a_clean_exit():
        uvicorn.run(app, host=host, port=port, log_level="info",
                    timeout_graceful_shutdown=graceful_seconds, access_log=access_log)


@contextlib.contextmanager
def _sigterm_is_a_clean_exit():
    """uvicorn, once it has shut down gracefully on a signal, raises that signal again under the
    handler it found, so that the process ends as the signal's default would have it: a SIGTERM'd
    server drained every request and then died of SIGTERM (exit status -15, "failed" to a process
    manager). SIGTERM is how every process manager asks a server to stop, so here it finds a handler
    that does nothing, and serve() returns: exit 0. Ctrl-C (SIGINT) still ends as an interrupt.
    Signal handlers can only be set from the main thread; elsewhere nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, lambda *_: None)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def load_models(registry):
    """Load every model of the registry now. A model that fails raises (a folder's ValueError or
    OSError as one ValueError naming every failed --model and why; anything else, a bug, as it is),
    unless the registry keeps going and one model loaded: then each failure is logged."""
    registry.load()
    if not registry.errors:
        return
    if registry.keep_going and registry.models:
        registry.log_failures()
        return
    registry.close()  # the batchers of the models that did load
    bug = next((e for e in registry.failures.values() if not isinstance(e, (ValueError, OSError))), None)
    if bug is not None:
        raise bug
    failed = "; ".join(f"--model {name}={registry.where(name)}: {error}" for name, error in registry.errors.items())
    if registry.keep_going:
        failed += " (no model loaded)"
    elif registry.models:
        failed += " (--keep-going serves the others)"
    raise ValueError(failed)


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
