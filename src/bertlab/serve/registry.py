"""The served models: loaded in a background thread (so /healthz answers at once and /readyz says
when every model is in), or at once by `load()` (serve() does, so a model that fails stops the server
before it listens), each with its own batcher."""
import logging
import threading
import time

from ..interop.load import LoadedModel, load_model
from .batching import Batcher
from .inputs import embed_limit
from .tasks import TOKEN_BUDGETED, model_tasks, run_batch

log = logging.getLogger("bertlab.serve")


class ServedModel:
    def __init__(self, name: str, loaded: LoadedModel, source: str, batching: dict, metrics=None):
        self.name, self.loaded, self.source = name, loaded, source
        self.tasks = model_tasks(loaded)
        budget = batching.get("max_batch_tokens", 16384)
        check_budget(loaded, self.tasks, budget)
        self.batcher = Batcher(lambda key, jobs: run_batch(loaded, key, jobs, budget), name=name, **batching)
        if metrics is not None:
            metrics.watch(name, self.batcher)

    def describe(self) -> dict:
        return {"name": self.name, "kind": self.loaded.kind, "tasks": self.tasks, "source": self.source}


def check_budget(loaded, tasks: list[str], budget: int):
    """An embedding model's forward passes keep to the token budget by splitting a batch (embed_ids),
    but one input is never split: a budget below the longest input the model reads could not be kept.
    Refused when the model loads, as TEI refuses max_batch_tokens below max_input_length."""
    if any(task in TOKEN_BUDGETED for task in tasks) and budget < embed_limit(loaded):
        raise ValueError(f"--max-batch-tokens {budget} is less than the {embed_limit(loaded)} tokens one input of "
                         f"this model may hold, so a forward pass could not keep within it; give at least "
                         f"{embed_limit(loaded)}")


class Registry:
    """name -> ServedModel once loaded; `errors` holds the models that failed to load (one line
    each), `failures` the errors themselves. keep_going: the models that loaded are enough to be
    ready (a failed one answers 503 with its reason)."""

    def __init__(self, models: dict, batching: dict, device: str = "auto", int8: bool = False,
                 keep_going: bool = False, metrics=None):
        from ..device import pick_device
        if not models:
            raise ValueError("no models to serve: give at least one --model NAME=DIR")
        device = str(pick_device(device))  # "auto": a GPU when there is one, as every command
        self.sources, self.batching, self.device, self.int8 = dict(models), batching, device, int8
        self.keep_going, self.metrics = keep_going, metrics
        self.models: dict[str, ServedModel] = {}
        self.errors: dict[str, str] = {}
        self.failures: dict[str, Exception] = {}
        self.loaded = threading.Event()
        self._thread = None

    def start(self):
        """Load in a background thread, unless load() has run already."""
        if not self.loaded.is_set():
            self._thread = threading.Thread(target=self._load_in_background, name="model-loader", daemon=True)
            self._thread.start()

    def _load_in_background(self):
        self.load()
        self.log_failures()  # the server is already up: the log and /readyz are where a failure shows

    def load(self):
        """Load every model now, in this thread; a model that fails is recorded, never raised."""
        for name, source in self.sources.items():
            try:
                loaded = source if isinstance(source, LoadedModel) else load_model(source, self.device)
                if self.int8:  # every task reads loaded.model: its Linear layers become int8 in place
                    from ..inference.int8 import quantize_int8
                    quantize_int8(loaded.model)
                self.models[name] = ServedModel(name, loaded, self.where(name), self.batching, self.metrics)
            except Exception as e:  # noqa: BLE001 - reported by /readyz, the log and requests to this model
                self.failures[name] = e
                # one line: it goes into a JSON answer and a log line, and names the folder's problem
                self.errors[name] = " ".join(f"{type(e).__name__}: {e}".split())
        self.loaded.set()

    def where(self, name: str) -> str:
        source = self.sources[name]
        return "(in memory)" if isinstance(source, LoadedModel) else str(source)

    def log_failures(self):
        for name, error in self.errors.items():
            log.error("model %r (%s) failed to load: %s", name, self.where(name), error)

    @property
    def ready(self) -> bool:
        """Loaded, and every model in (or, with keep_going, at least one)."""
        return self.loaded.is_set() and (not self.errors or (self.keep_going and bool(self.models)))

    def wait(self, timeout: float | None = None) -> bool:
        return self.loaded.wait(timeout)

    def close(self, timeout: float = 30.0):
        """Let every batcher finish its queued jobs (graceful shutdown)."""
        if self._thread is not None:
            self._thread.join(timeout)
        deadline = time.monotonic() + timeout
        for served in list(self.models.values()):
            served.batcher.close(max(deadline - time.monotonic(), 0.1))
