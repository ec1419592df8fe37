"""Load test of `bertlab serve` on loopback: N concurrent clients for T seconds, each sending one real
sentence per request to /v1/embed (MiniLM), against two servers of the same model: dynamic batching
(--max-batch-size 32) and one request at a time (--max-batch-size 1).

    python benchmarks/bench_serve.py [--clients 32] [--seconds 10] [--rounds 2] [--threads 1]
                                     [--texts sentences|queries] [--ceiling]

Both servers run as `bertlab serve` subprocesses on 127.0.0.1 (nothing else is reached) with
--threads torch threads each; rounds alternate between them so that load from other processes
affects both alike. The clients are one asyncio process speaking plain HTTP/1.1 with keep-alive
(light, so the server and not the client is measured). Reported per round: requests/s, p50 and p99
latency, errors (any answer but 200, or a broken connection), and the server's RSS sampled every
0.25 s (min and max over the round: a flat line means no leak). Bounded: clients x seconds x rounds.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOST = "127.0.0.1"


def texts_of(kind: str) -> list[str]:
    """"sentences": the shipped stdlib docstring summaries (23 tokens on average with [CLS] and
    [SEP]); "queries": the first five words of each summary's description (9 tokens), the length of
    a search query."""
    with open(os.path.join(REPO, "data", "python-docs", "summaries.txt"), encoding="utf-8") as f:
        lines = [line.strip() for line in f if line.strip()]
    if kind == "sentences":
        return lines
    return [" ".join(line.split(": ", 1)[-1].split()[:5]) for line in lines]


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def start_server(max_batch_size: int, max_wait_ms: float, threads: int, max_queue: int):
    port = free_port()
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
           "PYTHONPATH": os.path.join(REPO, "src")}
    process = subprocess.Popen([sys.executable, "-m", "bertlab", "serve", "--model", "minilm=minilm", "--host", HOST,
                                "--port", str(port), "--max-batch-size", str(max_batch_size), "--max-wait-ms",
                                str(max_wait_ms), "--max-queue", str(max_queue), "--no-access-log"],
                               env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return process, port


async def request(reader, writer, body: bytes, path: str = "/v1/embed") -> tuple[int, bytes]:
    """POST `body` (JSON) to `path` on a keep-alive connection: (status, answer body)."""
    writer.write(b"POST %s HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n%s" % (path.encode(), len(body), body))
    await writer.drain()
    status, answer, _ = await read_answer(reader)
    return status, answer


async def read_answer(reader) -> tuple[int, bytes, bool]:
    """(status, body, whether the server closes the connection) of one HTTP/1.1 answer. Reads a
    Content-Length body or a chunked one (peers differ)."""
    status = int((await reader.readline()).split()[1])
    length, chunked, close = 0, False, False
    while (line := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"content-length":
            length = int(value)
        elif name == b"transfer-encoding" and b"chunked" in value.lower():
            chunked = True
        elif name == b"connection" and b"close" in value.lower():
            close = True
    if not chunked:
        return status, await reader.readexactly(length), close
    parts = []
    while size := int((await reader.readline()).split(b";")[0], 16):
        parts.append(await reader.readexactly(size))
        await reader.readline()
    await reader.readline()  # the empty line after the last chunk
    return status, b"".join(parts), close


async def wait_ready(port: int, timeout: float = 120, path: str = "/readyz", process=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            reader, writer = await asyncio.open_connection(HOST, port)
            writer.write(f"GET {path} HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n".encode())
            await writer.drain()
            ready = b" 200 " in await reader.readline()
            writer.close()
            if ready:
                return
        except OSError:
            pass
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"the server on port {port} exited with status {process.returncode} before it was ready")
        await asyncio.sleep(0.2)
    raise RuntimeError(f"the server on port {port} did not get ready in {timeout} s")


async def client(port, texts, offset, stop_at, latencies, errors):
    """One keep-alive client of this benchmark: one text per request to /v1/embed."""
    def next_request(i):
        return "/v1/embed", json.dumps({"model": "minilm", "texts": [texts[i % len(texts)]]}).encode()

    def on_answer(i, status, body, seconds):
        if status == 200:
            latencies.append(seconds)
        else:
            errors.append(status)
    await keep_alive_client(port, stop_at, next_request, on_answer, errors, offset)


async def keep_alive_client(port, stop_at, next_request, on_answer, errors, i=0, stride=7919):
    """Send requests on one keep-alive connection until `stop_at` (time.monotonic): next_request(i)
    gives (path, body) of the i-th; on_answer(i, status, body, seconds) takes its answer. A broken
    connection is recorded in `errors` as "connection" and reopened. `stride`, a prime, makes
    clients that start at different i send different texts."""
    reader, writer = await asyncio.open_connection(HOST, port)
    try:
        while time.monotonic() < stop_at:
            path, body = next_request(i)
            start = time.perf_counter()
            try:
                status, answer = await request(reader, writer, body, path)
            except (OSError, asyncio.IncompleteReadError, ValueError, IndexError):
                errors.append("connection")
                writer.close()
                reader, writer = await asyncio.open_connection(HOST, port)
                continue
            on_answer(i, status, answer, time.perf_counter() - start)
            i += stride
    finally:
        writer.close()


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS")) / 1024


async def sample_rss(pid, stop_at, samples):
    while time.monotonic() < stop_at:
        samples.append(rss_mb(pid))
        await asyncio.sleep(0.25)


async def get_json(port: int, path: str) -> dict:
    reader, writer = await asyncio.open_connection(HOST, port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n".encode())
    await writer.drain()
    data = await reader.read()
    writer.close()
    return json.loads(data.split(b"\r\n\r\n", 1)[1])


async def one_round(port, pid, texts, clients: int, seconds: float) -> dict:
    latencies, errors, rss = [], [], []
    await asyncio.gather(*(client(port, texts, k * 31, time.monotonic() + 1.0, [], []) for k in range(clients)))
    before = (await get_json(port, "/v1/stats"))["minilm"]
    start = time.monotonic()  # after a 1 s warm-up at full load
    stop_at = start + seconds
    await asyncio.gather(sample_rss(pid, stop_at, rss),
                         *(client(port, texts, k * 101, stop_at, latencies, errors) for k in range(clients)))
    elapsed = time.monotonic() - start
    after = (await get_json(port, "/v1/stats"))["minilm"]
    mean_batch = (after["requests"] - before["requests"]) / max(after["batches"] - before["batches"], 1)
    latencies.sort()
    return {"requests_per_s": len(latencies) / elapsed, "p50_ms": 1000 * statistics.median(latencies),
            "p99_ms": 1000 * latencies[int(0.99 * (len(latencies) - 1))], "requests": len(latencies),
            "errors": len(errors), "rss_mb": (min(rss), max(rss)), "mean_batch": mean_batch}


async def main_async(args):
    texts = texts_of(args.texts)
    servers = {f"batching (--max-batch-size {args.max_batch_size}, --max-wait-ms {args.max_wait_ms:g})":
               start_server(args.max_batch_size, args.max_wait_ms, args.threads, args.max_queue),
               "one at a time (--max-batch-size 1)": start_server(1, 0, args.threads, args.max_queue)}
    try:
        for _, port in servers.values():
            await wait_ready(port)
        results = {name: [] for name in servers}
        for r in range(args.rounds):
            for name, (process, port) in servers.items():
                result = await one_round(port, process.pid, texts, args.clients, args.seconds)
                results[name].append(result)
                print(f"round {r + 1} {name}: {result['requests_per_s']:.1f} req/s, p50 {result['p50_ms']:.1f} ms, "
                      f"p99 {result['p99_ms']:.1f} ms, mean batch {result['mean_batch']:.1f}, "
                      f"{result['errors']} errors, RSS {result['rss_mb'][0]:.0f}-"
                      f"{result['rss_mb'][1]:.0f} MB", flush=True)
    finally:
        for process, _ in servers.values():
            process.terminate()
            process.wait(30)
    print(f"\n{args.clients} clients x {args.seconds:g} s x {args.rounds} rounds, MiniLM /v1/embed, one text "
          f"({args.texts}) per request, {args.threads} torch thread(s) per server\n")
    print("| server | requests/s (median of rounds) | p50 ms | p99 ms | mean batch | errors | server RSS MB (min-max) |")
    print("|---|---:|---:|---:|---:|---:|---|")
    medians = {}
    for name, rounds in results.items():
        med = lambda key: statistics.median(r[key] for r in rounds)  # noqa: E731
        medians[name] = med("requests_per_s")
        rss = (min(r["rss_mb"][0] for r in rounds), max(r["rss_mb"][1] for r in rounds))
        print(f"| {name} | {medians[name]:.1f} | {med('p50_ms'):.1f} | {med('p99_ms'):.1f} | {med('mean_batch'):.1f} | "
              f"{sum(r['errors'] for r in rounds)} | {rss[0]:.0f}-{rss[1]:.0f} |")
    batched, single = results.values()
    paired = [b["requests_per_s"] / s["requests_per_s"] for b, s in zip(batched, single)]
    print(f"\ndynamic batching / one at a time, round by round: {', '.join(f'{r:.2f}x' for r in paired)}; "
          f"median {statistics.median(paired):.2f}x requests/s")


def library_ceiling(texts: list[str], threads: int, batches: int = 6):
    """The same texts through embed_texts in this process, 32 at a time vs one at a time: the most
    any batching server could gain over a one-at-a-time one on this machine right now."""
    import torch

    from bertlab.inference.embed import embed_texts
    from bertlab.interop.load import load_model
    torch.set_num_threads(threads)
    m = load_model("minilm")
    texts = texts[:32 * batches]
    embed_texts(m.model, m.tokenizer, texts[:32], batch_size=32)  # warm-up
    start = time.perf_counter()
    for i in range(0, len(texts), 32):
        embed_texts(m.model, m.tokenizer, texts[i:i + 32], batch_size=32)
    batched = len(texts) / (time.perf_counter() - start)
    start = time.perf_counter()
    for text in texts[:64]:
        embed_texts(m.model, m.tokenizer, [text], batch_size=1)
    single = 64 / (time.perf_counter() - start)
    print(f"\nlibrary ceiling (embed_texts in one process, {threads} thread(s)): {batched:.1f} texts/s in batches of "
          f"32, {single:.1f} one at a time: {batched / single:.2f}x")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--clients", type=int, default=32)
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--threads", type=int, default=1, help="torch threads of each server (1)")
    p.add_argument("--max-batch-size", type=int, default=32)
    p.add_argument("--max-wait-ms", type=float, default=5.0)
    p.add_argument("--max-queue", type=int, default=256)
    p.add_argument("--texts", choices=["sentences", "queries"], default="sentences",
                   help="what each request embeds: a real sentence (23 tokens) or a 5-word query (9 tokens)")
    p.add_argument("--ceiling", action="store_true",
                   help="then also time embed_texts itself, batches of 32 vs one text at a time (the ratio's ceiling)")
    args = p.parse_args()
    if not (1 <= args.clients <= 256 and 0 < args.seconds <= 120 and 1 <= args.rounds <= 10):
        raise SystemExit("keep the load bounded: 1-256 clients, at most 120 s a round, 1-10 rounds")
    asyncio.run(main_async(args))
    if args.ceiling:
        sys.path.insert(0, os.path.join(REPO, "src"))
        library_ceiling(texts_of(args.texts), args.threads)


if __name__ == "__main__":
    main()
