"""The served models: loaded in a background thread (so /healthz answers at once and /readyz says
when every model is in), each with its own batcher."""
import threading
import time

from ..interop.load import LoadedModel, load_model
from .batching import Batcher
from .tasks import model_tasks, run_batch


class ServedModel:
    def __init__(self, name: str, loaded: LoadedModel, source: str, batching: dict):
        self.name, self.loaded, self.source = name, loaded, source
        self.tasks = model_tasks(loaded)
        self.batcher = Batcher(lambda key, jobs: run_batch(loaded, key, jobs), name=name, **batching)

    def describe(self) -> dict:
        return {"name": self.name, "kind": self.loaded.kind, "tasks": self.tasks, "source": self.source}


class Registry:
    """name -> ServedModel once loaded; `errors` holds the models that failed to load."""

    def __init__(self, models: dict, batching: dict, device: str = "cpu", int8: bool = False):
        if not models:
            raise ValueError("no models to serve: give at least one --model NAME=DIR")
        self.sources, self.batching, self.device, self.int8 = dict(models), batching, device, int8
        self.models: dict[str, ServedModel] = {}
        self.errors: dict[str, str] = {}
        self.loaded = threading.Event()
        self._thread = None

    def start(self):
        self._thread = threading.Thread(target=self._load_all, name="model-loader", daemon=True)
        self._thread.start()

    def _load_all(self):
        for name, source in self.sources.items():
            try:
                loaded = source if isinstance(source, LoadedModel) else load_model(source, self.device)
                if self.int8:  # every task reads loaded.model: its Linear layers become int8 in place
                    from ..inference.int8 import quantize_int8
                    quantize_int8(loaded.model)
                where = "(in memory)" if isinstance(source, LoadedModel) else str(source)
                self.models[name] = ServedModel(name, loaded, where, self.batching)
            except Exception as e:  # noqa: BLE001 - reported by /readyz and by requests to this model
                self.errors[name] = f"{type(e).__name__}: {e}"
        self.loaded.set()

    @property
    def ready(self) -> bool:
        return self.loaded.is_set() and not self.errors

    def wait(self, timeout: float | None = None) -> bool:
        return self.loaded.wait(timeout)

    def close(self, timeout: float = 30.0):
        """Let every batcher finish its queued jobs (graceful shutdown)."""
        if self._thread is not None:
            self._thread.join(timeout)
        deadline = time.monotonic() + timeout
        for served in list(self.models.values()):
            served.batcher.close(max(deadline - time.monotonic(), 0.1))
