"""`bertlab serve` held under abuse (issue 31, part 6): N clients for T seconds where 10% of requests
are malformed, 5% oversize and 5% disconnect mid-request, then SIGTERM while the load goes on.

    python benchmarks/serve_abuse.py --clients 64 --seconds 60 --threads 2 [--json runs/serve-abuse/abuse.json]

The server is a `bertlab serve --model minilm=minilm --no-access-log` subprocess on a free port of
127.0.0.1 with --threads torch threads. Each client is one keep-alive connection (bench_serve's
request reading) that draws every request:
  good (80%)       1-4 real texts (stdlib docstring summaries and 5-word queries from them) to one of
                   the three embedding routes: OpenAI's /v1/embeddings, TEI's /embed, our /v1/embed
  malformed (10%)  cut-off JSON, wrong types, NaN, nesting 100 deep, invalid UTF-8, an empty body, a
                   form post, an unknown model
  oversize (5%)    a text past the model's 256 tokens, 65 texts, a 10,001-character text, a body
                   that announces 5 MiB (only its first KiB is sent)
  disconnect (5%)  on a connection of its own: half a body, then gone; or a whole request (4
                   paragraphs: work) and gone at once or after 0-50 ms
Checked: no answer is a 5xx; malformed and oversize requests get a 4xx; every good request is
answered 200 with as many vectors as texts, in order, each at cosine >= 0.9999 to the vector
computed in this process (embed_texts, fp32) for the same text ("wrong answers" otherwise); the
server's RSS, sampled every 0.5 s, stays bounded. Then SIGTERM during the load: every good request in
flight at that moment must still be answered, correctly, and the server must exit 0 within 60 s.
(A request sent after SIGTERM may find the connection closed or refused: that is the drain
working, counted apart.) Exit status 1 if any check fails. Prints counts, writes the JSON.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_serve import HOST, REPO, free_port, read_answer, rss_mb, wait_ready  # noqa: E402
from serve_race import mix_texts, minilm_token_counter  # noqa: E402

sys.path.insert(0, os.path.join(REPO, "src"))
SHARES = (("malformed", 0.10), ("oversize", 0.05), ("disconnect", 0.05))  # the rest: good
MIN_COSINE = 0.9999
ROUTES = ("/v1/embeddings", "/embed", "/v1/embed")


def post(path: str, body: bytes, content_type: bytes = b"application/json", length: int | None = None) -> bytes:
    return (b"POST %s HTTP/1.1\r\nHost: abuse\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n%s"
            % (path.encode(), content_type, len(body) if length is None else length, body))


def good_body(route: str, texts: list[str]) -> bytes:
    if route == "/v1/embeddings":
        return json.dumps({"model": "minilm", "input": texts}).encode()
    if route == "/embed":
        return json.dumps({"inputs": texts}).encode()  # TEI: normalised by default
    return json.dumps({"model": "minilm", "texts": texts, "normalize": True}).encode()


def vectors_of(route: str, answer: bytes) -> list:
    data = json.loads(answer)
    if route == "/v1/embeddings":
        if [d["index"] for d in data["data"]] != list(range(len(data["data"]))):
            return []  # out of order: counted wrong
        return [d["embedding"] for d in data["data"]]
    return data if route == "/embed" else data["embeddings"]


def malformed(rng: random.Random) -> bytes:
    return rng.choice([
        post("/v1/embeddings", b'{"model": "minilm", "input": ["cut off'),
        post("/v1/embeddings", b'{"model": "minilm", "input": 5}'),
        post("/v1/embed", b'{"model": "minilm", "texts": [NaN]}'),
        post("/v1/embed", b'{"model": "minilm", "texts": ' + b"[" * 100 + b"]" * 100 + b"}"),
        post("/embed", b'{"inputs": ["\xff\xfe bad utf-8"]}'),
        post("/v1/embeddings", b""),
        post("/v1/embed", b"model=minilm&texts=a", b"application/x-www-form-urlencoded"),
        post("/v1/embeddings", b'{"model": "no-such-model", "input": ["hello"]}'),
        post("/v1/embeddings", b'{"model": "minilm", "input": [["nested"]]}'),
    ])


def oversize(rng: random.Random, long_text: str) -> tuple[bytes, bool]:
    """(the request, whether it is the announced-5-MiB one: the server answers 413 and closes)."""
    kind = rng.randrange(4)
    if kind == 0:
        return post("/v1/embeddings", json.dumps({"model": "minilm", "input": [long_text]}).encode()), False
    if kind == 1:
        return post("/embed", json.dumps({"inputs": ["a short text"] * 65}).encode()), False
    if kind == 2:
        return post("/v1/embed", json.dumps({"model": "minilm", "texts": ["x" * 10_001]}).encode()), False
    return post("/v1/embeddings", b'{"model": "minilm", "input": ["' + b"a" * 1024, length=5 << 20), True


class Tally:
    def __init__(self):
        self.status = {kind: Counter() for kind in ("good", "malformed", "oversize")}
        self.disconnects = 0
        self.wrong = []  # (route, reason) of good requests answered wrongly
        self.broken = Counter()  # kind -> connections broken before an answer (before SIGTERM)
        self.after_sigterm = Counter()  # outcomes of requests sent after SIGTERM
        self.in_flight_at_sigterm = []  # one entry per good request in flight: "ok" or why not
        self.latencies = []


class Client:
    def __init__(self, k: int, port: int, pool: list[str], reference: np.ndarray, long_text: str, heavy: list[str],
                 tally: Tally, seed: int):
        self.port, self.pool, self.reference, self.long_text, self.heavy = port, pool, reference, long_text, heavy
        self.tally, self.rng = tally, random.Random(seed * 1000 + k)
        self.sending = None  # (kind, sent_at) of the request in flight
        self.sigterm_at = None  # set by the driver

    async def run(self, stop_at: float):
        reader = writer = None
        while time.monotonic() < stop_at:
            if writer is None:
                try:
                    reader, writer = await asyncio.open_connection(HOST, self.port)
                except OSError:
                    if self.sigterm_at is not None:
                        self.tally.after_sigterm["refused"] += 1
                        return  # the server is gone or going: done
                    raise
            draw = self.rng.random()
            kind = next((k for k, share in _cumulative() if draw < share), "good")
            if kind == "disconnect":
                await self.disconnect()
                continue
            keep = await self.one(kind, reader, writer)
            if not keep:
                writer.close()
                writer = None
                if self.sigterm_at is not None:
                    return
        if writer is not None:
            writer.close()

    async def one(self, kind: str, reader, writer) -> bool:
        """Send one request of `kind` and check its answer; whether the connection stays open."""
        closes = False
        if kind == "good":
            route = self.rng.choice(ROUTES)
            rows = [self.rng.randrange(len(self.pool)) for _ in range(self.rng.randint(1, 4))]
            data = post(route, good_body(route, [self.pool[i] for i in rows]))
        elif kind == "malformed":
            data = malformed(self.rng)
        else:
            data, closes = oversize(self.rng, self.long_text)
        sent_at = time.monotonic()
        self.sending = (kind, sent_at)
        try:
            writer.write(data)
            await writer.drain()
            status, answer, close = await read_answer(reader)
        except (OSError, asyncio.IncompleteReadError, ValueError, IndexError) as e:
            self.settle(kind, sent_at, f"connection {type(e).__name__}")
            return False
        finally:
            self.sending = None
        if kind == "good":
            why = self.check(route, rows, status, answer)
            if why is None:
                self.tally.latencies.append(time.monotonic() - sent_at)
            else:
                self.tally.wrong.append((route, why))
            self.settle(kind, sent_at, why or "ok", status)
        else:
            self.settle(kind, sent_at, "ok" if 400 <= status < 500 else f"status {status}", status)
        return not (close or closes)

    def settle(self, kind: str, sent_at: float, outcome: str, status: int | None = None):
        after = self.sigterm_at is not None and sent_at >= self.sigterm_at
        if after:
            self.tally.after_sigterm[outcome if status is None else f"{kind} {status}"] += 1
            return
        if status is not None:
            self.tally.status[kind][status] += 1
        else:
            self.tally.broken[kind] += 1
        if kind == "good" and self.sigterm_at is not None:  # sent before SIGTERM, answered after it
            self.tally.in_flight_at_sigterm.append(outcome)

    def check(self, route: str, rows: list[int], status: int, answer: bytes) -> str | None:
        if status != 200:
            return f"status {status}: {answer[:200]!r}"
        got = np.asarray(vectors_of(route, answer), dtype=np.float64)
        if got.shape != (len(rows), self.reference.shape[1]):
            return f"{got.shape} vectors for {len(rows)} texts"
        want = self.reference[rows]
        cos = (got * want).sum(1) / np.linalg.norm(got, axis=1) / np.linalg.norm(want, axis=1)
        if cos.min() < MIN_COSINE:
            return f"cosine {cos.min():.6f}"
        return None

    async def disconnect(self):
        """A request abandoned mid-way, on a connection of its own."""
        self.tally.disconnects += 1
        try:
            reader, writer = await asyncio.open_connection(HOST, self.port)
        except OSError:
            return
        body = good_body("/v1/embeddings", self.heavy)
        data = post("/v1/embeddings", body)
        how = self.rng.randrange(3)
        try:
            writer.write(data[: len(data) - len(body) // 2] if how == 0 else data)
            await writer.drain()
            if how == 2:
                await asyncio.sleep(self.rng.uniform(0, 0.05))
        except OSError:
            pass
        writer.close()


def _cumulative():
    total = 0.0
    for kind, share in SHARES:
        total += share
        yield kind, total


async def sample_rss(pid: int, samples: list, start: float, done: asyncio.Event):
    while not done.is_set():
        try:
            samples.append((round(time.monotonic() - start, 1), rss_mb(pid)))
        except (OSError, StopIteration):
            return
        await asyncio.sleep(0.5)


def reference_vectors(texts: list[str], threads: int) -> np.ndarray:
    import torch

    from bertlab.inference.embed import embed_texts
    from bertlab.interop.load import load_model
    torch.set_num_threads(threads)
    m = load_model("minilm")
    return embed_texts(m.model, m.tokenizer, texts, normalize=True).astype(np.float64)


async def main_async(args) -> dict:
    count = minilm_token_counter()
    pool = mix_texts("sentences", count)[::8] + mix_texts("queries", count)[::24]
    paragraphs = mix_texts("paragraphs", count)
    long_text = " ".join(paragraphs[:2])  # ~450 tokens: past the 256 the model reads
    print(f"reference vectors of {len(pool)} texts in this process...", flush=True)
    reference = reference_vectors(pool, args.threads)
    port = free_port()
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "MKL_NUM_THREADS": str(args.threads),
           "PYTHONPATH": os.path.join(REPO, "src")}
    log = tempfile.NamedTemporaryFile(prefix="serve-abuse-", suffix=".log", delete=False)
    server = subprocess.Popen([sys.executable, "-m", "bertlab", "serve", "--model", "minilm=minilm", "--host", HOST,
                               "--port", str(port), "--no-access-log"], env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        await wait_ready(port, 120, "/readyz", server)
        tally = Tally()
        clients = [Client(k, port, pool, reference, long_text, paragraphs[k % len(paragraphs):][:4], tally, args.seed)
                   for k in range(args.clients)]
        rss, done = [], asyncio.Event()
        start = time.monotonic()
        sampler = asyncio.ensure_future(sample_rss(server.pid, rss, start, done))
        runs = asyncio.gather(*(c.run(start + args.seconds + 90) for c in clients))
        await asyncio.sleep(args.seconds)
        in_flight = sum(1 for c in clients if c.sending and c.sending[0] == "good")
        sigterm_at = time.monotonic()
        for c in clients:
            c.sigterm_at = sigterm_at
        server.send_signal(signal.SIGTERM)
        try:
            code = await asyncio.wait_for(asyncio.to_thread(server.wait), 60)
        except asyncio.TimeoutError:
            code = "still running 60 s after SIGTERM"
        exited_after = time.monotonic() - sigterm_at
        done.set()
        await asyncio.wait_for(runs, 30)
        await sampler
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        log.close()
    with open(log.name, encoding="utf-8", errors="replace") as f:
        server_log = f.read()
    return report(args, tally, rss, in_flight, code, exited_after, server_log, log.name)


def report(args, tally: Tally, rss, in_flight: int, code, exited_after: float, server_log: str, log_path: str) -> dict:
    fivexx = {kind: sum(n for s, n in c.items() if s >= 500) for kind, c in tally.status.items()}
    not_4xx = {kind: sum(n for s, n in tally.status[kind].items() if not 400 <= s < 500)
               for kind in ("malformed", "oversize")}
    drained = Counter(tally.in_flight_at_sigterm)
    mb = [m for _, m in rss]
    third = max(len(mb) // 3, 1)
    tracebacks = server_log.count("Traceback")
    checks = {"zero 5xx": sum(fivexx.values()) == 0,
              "zero wrong answers among good requests": not tally.wrong,
              "malformed and oversize all 4xx": sum(not_4xx.values()) == 0,
              "no broken connection before SIGTERM": sum(tally.broken.values()) == 0,
              "in-flight good requests answered correctly after SIGTERM": set(drained) <= {"ok"},
              "exit status 0 after SIGTERM": code == 0,
              "no traceback in the server's log": tracebacks == 0,
              "RSS bounded (last third's peak within 10% of the first two thirds')":
                  bool(mb) and max(mb[-third:]) <= 1.1 * max(mb[:-third] or mb)}
    result = {"command": " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]), "date": time.strftime("%Y-%m-%d %H:%M"),
              "clients": args.clients, "seconds": args.seconds, "threads": args.threads,
              "status": {k: dict(sorted(c.items())) for k, c in tally.status.items()},
              "disconnects": tally.disconnects, "wrong": tally.wrong[:20], "wrong_count": len(tally.wrong),
              "broken_before_sigterm": dict(tally.broken), "good_p50_ms": 1000 * statistics.median(tally.latencies)
              if tally.latencies else None, "in_flight_good_at_sigterm": in_flight, "in_flight_outcomes": dict(drained),
              "after_sigterm": dict(tally.after_sigterm), "exit_code": code, "exit_seconds_after_sigterm": exited_after,
              "server_log": log_path, "server_log_tracebacks": tracebacks,
              "rss_mb": {"first": mb[0] if mb else None, "peak": max(mb, default=None), "last": mb[-1] if mb else None,
                         "series": rss},
              "checks": checks, "passed": all(checks.values())}
    good = tally.status["good"]
    print(f"\n{args.clients} clients x {args.seconds:g} s, {args.threads} torch thread(s)")
    print(f"good requests: {sum(good.values())} answered ({dict(good)}), {len(tally.wrong)} wrong, p50 "
          f"{result['good_p50_ms'] or 0:.0f} ms")
    for kind in ("malformed", "oversize"):
        print(f"{kind}: {sum(tally.status[kind].values())} answered, statuses {dict(sorted(tally.status[kind].items()))}")
    print(f"disconnected mid-request: {tally.disconnects}; broken connections before SIGTERM: {dict(tally.broken) or 0}")
    print(f"SIGTERM: {in_flight} good requests in flight -> {dict(drained) or 'none'}; after it: "
          f"{dict(tally.after_sigterm) or 'nothing'}; exit {code} after {exited_after:.1f} s")
    series = ", ".join(f"{t:g}s {m:.0f}" for t, m in rss[:: max(len(rss) // 12, 1)])
    print(f"server RSS MB over time: {series}; peak {max(mb, default=0):.0f}")
    if tally.wrong:
        print("first wrong answers:", tally.wrong[:5])
    for name, ok in checks.items():
        print(f"  [{'ok' if ok else 'FAILED'}] {name}")
    return result


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--clients", type=int, default=64)
    p.add_argument("--seconds", type=float, default=60.0, help="seconds of abuse before SIGTERM (60)")
    p.add_argument("--threads", type=int, default=2, help="torch threads of the server (2)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=os.path.join(REPO, "runs", "serve-abuse", "abuse.json"))
    args = p.parse_args()
    if not (1 <= args.clients <= 256 and 0 < args.seconds <= 600):
        raise SystemExit("keep the load bounded: 1-256 clients, at most 600 s")
    result = asyncio.run(main_async(args))
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
    print(f"wrote {args.json}")
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
