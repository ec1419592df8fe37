"""What a load balancer and Prometheus read: `GET /metrics` in Prometheus' text format
(prometheus-client), and the gate every request passes (RequestGate), which counts and times it by
route and status and refuses a task request at once (429) past --max-concurrent-requests.

Each app has its own CollectorRegistry, so two apps in one process (the tests) never share counts.
Route labels are the app's own paths (anything else is "other"), so a client sending random paths
cannot grow the number of time series."""
import time

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

from .errors import error_response

LATENCY_BUCKETS = (.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
TOKEN_BUCKETS = (16, 64, 256, 1024, 2048, 4096, 8192, 16384, 32768, 65536)
EMBED_TASKS = ("embed", "similar")  # the job keys whose tokens count as embedded


class Metrics:
    def __init__(self):
        self.registry = r = CollectorRegistry()
        self.requests = Counter("bertlab_requests", "HTTP requests answered, by route, method and status",
                                ["route", "method", "status"], registry=r)
        self.latency = Histogram("bertlab_request_duration_seconds", "time from request to the end of the answer",
                                 ["route"], buckets=LATENCY_BUCKETS, registry=r)
        self.in_flight = Gauge("bertlab_requests_in_flight", "task requests being answered (queued or running)",
                               registry=r)
        self.queue = Gauge("bertlab_queue_depth", "requests waiting in a model's queue", ["model"], registry=r)
        self.batch_size = Histogram("bertlab_batch_size", "inputs per batched model call", ["model", "task"],
                                    buckets=BATCH_BUCKETS, registry=r)
        self.batch_tokens = Histogram("bertlab_batch_tokens", "tokens per batched model call", ["model", "task"],
                                      buckets=TOKEN_BUCKETS, registry=r)
        self.embedded = Counter("bertlab_embedded_tokens", "tokens read by embedding requests", ["model"],
                                registry=r)

    def watch(self, name: str, batcher):
        """The model's queue depth, read at each scrape; its batches observed as they run."""
        self.queue.labels(name).set_function(batcher.queue.qsize)

        def observe(key, jobs):
            texts, tokens = sum(j.size for j in jobs), sum(j.tokens for j in jobs)
            self.batch_size.labels(name, key[0]).observe(texts)
            self.batch_tokens.labels(name, key[0]).observe(tokens)
            if key[0] in EMBED_TASKS:
                self.embedded.labels(name).inc(tokens)
        batcher.observe = observe

    def exposition(self) -> tuple[bytes, str]:
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


class RequestGate:
    """ASGI middleware around the whole app. `limited`: the paths (POST) that count against
    `max_concurrent_requests`; a request past it is answered 429 before its body is read. A
    streamed answer counts until its last event."""

    def __init__(self, app, metrics: Metrics, routes, limited, max_concurrent_requests: int):
        self.app, self.metrics, self.routes, self.limited = app, metrics, routes, limited
        self.max_concurrent = max_concurrent_requests
        self.active = 0  # one event loop: no lock needed

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path, start, status = scope["path"], time.perf_counter(), 500
        route = path if path in self.routes else "other"
        method = scope["method"] if scope["method"] in ("GET", "POST", "HEAD") else "other"
        counted = scope["method"] == "POST" and path in self.limited

        async def send_and_see(message):
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)
        try:
            if counted and self.active >= self.max_concurrent:
                message = (f"the server is answering {self.active} requests already, the limit "
                           f"(--max-concurrent-requests); retry later")
                await error_response(path, 429, message, headers={"Retry-After": "1"})(scope, receive, send_and_see)
                return
            self.active += counted
            self.metrics.in_flight.set(self.active)
            try:
                await self.app(scope, receive, send_and_see)
            finally:
                self.active -= counted
                self.metrics.in_flight.set(self.active)
        finally:
            self.metrics.requests.labels(route, method, str(status)).inc()
            self.metrics.latency.labels(route).observe(time.perf_counter() - start)
