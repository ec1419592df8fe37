"""Dynamic batching: one worker thread per model gathers the requests that arrive close together and
runs them as one batched call of the library function.

The worker takes the first waiting job, then keeps taking jobs until it holds `max_batch_size` texts
or `max_batch_tokens` tokens (TEI's --max-batch-tokens: a batch fills by its work, not only by its
count; a job larger than the budget runs alone) or `max_wait_ms` have passed since the first; jobs with the same key (same task, same options) run
together, so a batch is one forward pass over every request's texts. One thread per model also means
a model is never run by two threads at once. A full queue refuses new jobs (QueueFull, the server's
429) instead of letting the backlog and the latency grow without bound. A job whose client has gone
(Job.cancel) is dropped when the worker reaches it, never computed, and takes no room in a batch.
`close()` finishes every job already queued before the thread ends (graceful shutdown).

Each job's future follows concurrent.futures' protocol: the worker marks it running
(set_running_or_notify_cancel) when it takes the job, so a future cancelled while queued is skipped,
and one already taken can no longer be cancelled under the worker's set_result."""
import concurrent.futures
import itertools
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from .memory import HeapTrimmer

_STOP = object()


class QueueFull(Exception):
    """The model's queue holds `max_queue` jobs already."""


class Cancelled(Exception):
    """Every job of a batch was given up by its client (raised inside a streaming callback)."""


@dataclass(eq=False)
class Job:
    """One request's work. `key` decides which jobs may share a call; `size` is how many texts it
    adds to a batch, `tokens` how many tokens (0: not counted); `ids` the token ids the model reads,
    one list per input, when the request measured and fitted them (serve.inputs) beside its
    `payload`; `on_item(job_row, item)` receives streamed pieces, in the worker thread."""
    key: tuple
    payload: object
    size: int = 1
    tokens: int = 0
    ids: list | None = None
    on_item: Callable | None = None
    future: concurrent.futures.Future = field(default_factory=concurrent.futures.Future)
    cancelled: threading.Event = field(default_factory=threading.Event)

    def cancel(self):
        """The client has gone: a job still queued is never run (its future is cancelled); a job the
        worker already holds is skipped before its batch runs, or stops mid-generation (`cancelled`
        is read at every token)."""
        self.cancelled.set()
        self.future.cancel()


class Batcher:
    """Runs `run_batch(key, jobs) -> results` (one result per job, in order) on batches of jobs.
    A run that raises an error for a batch of several jobs is retried job by job, so a bad request
    fails alone and never takes the other requests of its batch with it."""

    def __init__(self, run_batch: Callable, max_batch_size: int = 32, max_wait_ms: float = 5.0,
                 max_queue: int = 256, name: str = "model", max_batch_tokens: int = 16384,
                 observe: Callable | None = None):
        if max_batch_size < 1 or max_queue < 1 or max_batch_tokens < 1 or max_wait_ms < 0:
            raise ValueError(f"max_batch_size {max_batch_size}, max_batch_tokens {max_batch_tokens} and max_queue "
                             f"{max_queue} must be >= 1, max_wait_ms {max_wait_ms} >= 0")
        self.run_batch, self.max_batch_size, self.max_wait = run_batch, max_batch_size, max_wait_ms / 1000
        self.max_batch_tokens = max_batch_tokens
        self.observe = observe  # observe(key, jobs) before each batched call: the server's metrics
        self.queue = queue.Queue(maxsize=max_queue)
        self.batches = 0  # how many batched calls ran (for tests and /metrics-like reporting)
        self.jobs_done = 0
        self.cancelled = 0  # jobs given up because their client went away
        self._held = None  # a job taken from the queue that did not fit the last batch
        self._trimmer = HeapTrimmer()
        self._thread = threading.Thread(target=self._loop, name=f"batcher-{name}", daemon=True)
        self._thread.start()

    def submit(self, job: Job) -> Job:
        try:
            self.queue.put_nowait(job)
        except queue.Full:
            raise QueueFull(f"the queue is full ({self.queue.maxsize} requests waiting, --max-queue); "
                            "retry later") from None
        return job

    def close(self, timeout: float | None = None):
        """Finish the jobs already queued, then stop the thread."""
        self.queue.put(_STOP)
        self._thread.join(timeout)

    def _loop(self):
        while True:
            batch = self._gather()
            if batch is None:
                return
            for key, jobs in itertools.groupby(sorted(batch, key=_order(batch)), key=lambda j: j.key):
                jobs = list(jobs)
                for job in jobs:
                    if job.cancelled.is_set():  # its client is gone: no work, but no future left pending
                        self.cancelled += 1
                        job.future.set_exception(Cancelled("the client went away"))
                self._run([j for j in jobs if not j.cancelled.is_set()], key)
            self._trimmer.maybe_trim()  # after the answers are out, so no request waits for it

    def _gather(self) -> list[Job] | None:
        first = self._held if self._held is not None else self._next()
        self._held = None
        if first is _STOP:
            return None
        batch, size, tokens = [first], first.size, first.tokens
        deadline = time.monotonic() + self.max_wait
        while size < self.max_batch_size and tokens < self.max_batch_tokens:
            try:
                job = self._next(deadline)
            except queue.Empty:
                break
            if job is _STOP or size + job.size > self.max_batch_size or tokens + job.tokens > self.max_batch_tokens:
                self._held = job  # next round: stop, or start the next batch
                break
            batch.append(job)
            size, tokens = size + job.size, tokens + job.tokens
        return batch

    def _next(self, deadline: float | None = None):
        """The next job whose client still waits (or _STOP), marked running; a job cancelled while it
        was queued is dropped here unrun. queue.Empty once `deadline` (time.monotonic) has passed."""
        while True:
            timeout = None if deadline is None else max(deadline - time.monotonic(), 0)
            job = self.queue.get(timeout=timeout)
            if job is _STOP or job.future.set_running_or_notify_cancel():
                return job
            self.cancelled += 1

    def _run(self, jobs: list[Job], key):
        if not jobs:
            return
        try:
            self.batches += 1
            if self.observe is not None:
                self.observe(key, jobs)
            results = self.run_batch(key, jobs)
        except Cancelled:
            self.cancelled += len(jobs)
            results = [Cancelled("the client went away")] * len(jobs)
        except Exception as e:  # noqa: BLE001 - handed to the waiting request, never lost
            if len(jobs) > 1:
                for job in jobs:
                    self._run([job], key)
                return
            results = [e]
        for job, result in zip(jobs, results):
            self.jobs_done += 1
            if isinstance(result, BaseException):
                job.future.set_exception(result)
            else:
                job.future.set_result(result)


def _order(batch):
    """Sort key grouping equal keys together while keeping arrival order (keys need not be ordered)."""
    first_seen = {}
    for i, job in enumerate(batch):
        first_seen.setdefault(job.key, i)
    return lambda job: first_seen[job.key]
