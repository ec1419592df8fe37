"""A race against a real peer: `bertlab serve` and infinity-emb (michaelfeil/infinity) serving the
same all-MiniLM-L6-v2 folder on 127.0.0.1, driven by one load generator with the same requests.

    python benchmarks/serve_race.py --clients 1,8,32,64 --seconds 30 \\
        --mixes queries,sentences,paragraphs --threads 2 --int8 [--json runs/serve-race/race.json]

infinity runs from its own virtual environment (benchmarks/infinity/README.md: it pins transformers
4.x), `--infinity PATH` names its `infinity_emb` (default benchmarks/.venv-infinity/bin/infinity_emb).
Each server is a subprocess on a free port of 127.0.0.1, started with OMP_NUM_THREADS=MKL_NUM_THREADS=
--threads, so both run torch with the same thread count, and both log no line per request. Nothing
but loopback is reached (HF_HUB_OFFLINE=1, telemetry off).

Both sides get OpenAI-shaped requests, `{"model": "minilm", "input": [TEXT]}`, one text per request,
at their OpenAI-compatible route: bertlab `POST /v1/embeddings`, infinity `POST /embeddings` (it has
no /v1 prefix by default). Both answer mean-pooled vectors normalised to length 1, in fp32, cutting
at 256 tokens (sentence-transformers' max_seq_length); no text sent here is that long, so neither
side cuts. infinity runs with its defaults for a CPU (batch size 32, no torch.compile, no
BetterTransformer: optimum is not installed) and its result cache off (--no-vector-disk-cache, also
its default: a cache would answer repeated texts without computing them); bertlab with its defaults
(--max-batch-size 32, --max-batch-tokens 16384, --max-wait-ms 5).

The mixes, all real text the repo ships (data/python-docs/summaries.txt, the stdlib's docstring
summaries), lengths counted with the MiniLM tokenizer, [CLS] and [SEP] included:
  queries     the first five words of each summary's description (5 words, ~7-12 tokens)
  sentences   the summaries of 20-30 tokens
  paragraphs  consecutive summaries joined until they hold 128-256 tokens

Per cell (mix x clients) each side gets a 1 s warm-up at full load, then --seconds of measurement;
the sides run one after the other, their order alternating cell by cell, so that load from elsewhere
falls on both alike. Reported per cell and side: requests/s, embedded tokens/s (the tokens of the
texts answered 200), p50 and p99 latency, errors (an answer other than 200, or a broken connection)
and the server's RSS. Before the load, each side embeds --parity-texts (64) texts of each mix and is compared
with bertlab fp32 (cosine per text: min and mean): the parity check, and the cost of --int8.
Prints one markdown table and writes the JSON. Bounded: cells x sides x (seconds + 1).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_serve import HOST, REPO, free_port, keep_alive_client, request, rss_mb, wait_ready  # noqa: E402

sys.path.insert(0, os.path.join(REPO, "src"))
MIXES = ("queries", "sentences", "paragraphs")
INFINITY = os.path.join(REPO, "benchmarks", ".venv-infinity", "bin", "infinity_emb")
MODEL = "minilm"  # the name both servers answer to


# --- the texts ---------------------------------------------------------------------------------------
def summaries() -> list[str]:
    with open(os.path.join(REPO, "data", "python-docs", "summaries.txt"), encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip()]


def mix_texts(mix: str, count_tokens) -> list[str]:
    """The texts of a mix; count_tokens(texts) -> tokens of each, [CLS] and [SEP] included."""
    lines = summaries()
    if mix == "queries":
        return [" ".join(line.split(": ", 1)[-1].split()[:5]) for line in lines]
    if mix == "sentences":
        return [t for t, n in zip(lines, count_tokens(lines)) if 20 <= n <= 30]
    if mix == "paragraphs":
        return paragraphs(lines, count_tokens(lines))
    raise ValueError(f"unknown mix {mix!r}; the mixes are {', '.join(MIXES)}")


def paragraphs(lines: list[str], tokens: list[int], least: int = 128, most: int = 256) -> list[str]:
    """Consecutive lines (a module's summaries follow each other) joined while they fit `most`
    tokens; kept if they reach `least`. A line counts its own [CLS]/[SEP] (2), the paragraph once."""
    out, part, n = [], [], 2
    for line, count in zip(lines, tokens):
        if part and n + count - 2 > most:
            if n >= least:
                out.append(" ".join(part))
            part, n = [], 2
        if count <= most:
            part.append(line)
            n += count - 2
    if n >= least:
        out.append(" ".join(part))
    return out


def minilm_token_counter():
    from bertlab.interop.load import load_model
    tokenizer = load_model(MODEL).tokenizer
    return lambda texts: [len(ids) + 2 for ids in tokenizer.tokenize_ids_batch(texts)]


# --- the servers -------------------------------------------------------------------------------------
@dataclass
class Side:
    name: str
    command: list[str]
    route: str  # its OpenAI-compatible embeddings route
    ready_path: str
    port: int = 0
    process: subprocess.Popen | None = None
    log: str = ""
    cosine: dict = field(default_factory=dict)  # mix -> (min, mean) cosine to bertlab fp32


def bertlab_side(folder: str, int8: bool) -> Side:
    command = [sys.executable, "-m", "bertlab", "serve", "--model", f"{MODEL}={folder}", "--host", HOST,
               "--port", "{port}", "--no-access-log"] + (["--int8"] if int8 else [])
    return Side("bertlab --int8" if int8 else "bertlab", command, "/v1/embeddings", "/readyz")


def infinity_side(folder: str, executable: str) -> Side:
    command = [executable, "v2", "--model-id", folder, "--served-model-name", MODEL, "--engine", "torch",
               "--device", "cpu", "--dtype", "float32", "--batch-size", "32", "--no-compile",
               "--no-vector-disk-cache", "--no-model-warmup", "--log-level", "warning", "--host", HOST,
               "--port", "{port}"]
    return Side("infinity", command, "/embeddings", "/health")


def start(side: Side, threads: int, logs: str):
    side.port = free_port()
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
           "PYTHONPATH": os.path.join(REPO, "src"), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "DO_NOT_TRACK": "1", "INFINITY_ANONYMOUS_USAGE_STATS": "0", "TOKENIZERS_PARALLELISM": "false"}
    side.log = os.path.join(logs, side.name.replace(" --", "-") + ".log")
    with open(side.log, "wb") as log:
        side.process = subprocess.Popen([a.replace("{port}", str(side.port)) for a in side.command], env=env,
                                        stdout=log, stderr=subprocess.STDOUT, cwd=REPO)


def stop(side: Side) -> int | None:
    if side.process is None or side.process.poll() is not None:
        return None if side.process is None else side.process.returncode
    side.process.terminate()
    try:
        return side.process.wait(30)
    except subprocess.TimeoutExpired:
        side.process.kill()
        return side.process.wait()


def log_tail(side: Side, lines: int = 15) -> str:
    with open(side.log, encoding="utf-8", errors="replace") as f:
        return "".join(f.readlines()[-lines:])


# --- the load ----------------------------------------------------------------------------------------
def body_of(text: str) -> bytes:
    return json.dumps({"model": MODEL, "input": [text]}).encode()


async def embeddings(side: Side, texts: list[str], per_request: int = 16) -> np.ndarray:
    reader, writer = await asyncio.open_connection(HOST, side.port)
    rows = []
    try:
        for i in range(0, len(texts), per_request):
            status, answer = await request(reader, writer, json.dumps({"model": MODEL, "input": texts[i:i + per_request]}).encode(),
                                           side.route)
            if status != 200:
                raise RuntimeError(f"{side.name} answered {status} to the parity request: {answer[:300]!r}")
            rows += [d["embedding"] for d in sorted(json.loads(answer)["data"], key=lambda d: d["index"])]
    finally:
        writer.close()
    return np.asarray(rows, dtype=np.float64)


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


async def sample_rss(pid: int, stop_at: float, samples: list):
    while time.monotonic() < stop_at:
        samples.append(rss_mb(pid))
        await asyncio.sleep(0.5)


async def cell(side: Side, texts: list[str], tokens: list[int], clients: int, seconds: float, warmup: float) -> dict:
    bodies = [body_of(t) for t in texts]
    latencies, done_tokens, errors, rss = [], [], [], []

    def next_request(i):
        return side.route, bodies[i % len(bodies)]

    def measured(i, status, body, took):
        if status == 200:
            latencies.append(took)
            done_tokens.append(tokens[i % len(tokens)])
        else:
            errors.append(status)
    if warmup > 0:
        stop_at = time.monotonic() + warmup
        await asyncio.gather(*(keep_alive_client(side.port, stop_at, next_request, lambda *a: None, [], k * 31)
                               for k in range(clients)))
    start = time.monotonic()
    stop_at = start + seconds
    await asyncio.gather(sample_rss(side.process.pid, stop_at, rss),
                         *(keep_alive_client(side.port, stop_at, next_request, measured, errors, k * 101)
                           for k in range(clients)))
    elapsed = time.monotonic() - start
    latencies.sort()
    pick = lambda q: 1000 * latencies[int(q * (len(latencies) - 1))] if latencies else float("nan")  # noqa: E731
    return {"side": side.name, "clients": clients, "seconds": elapsed, "requests": len(latencies),
            "requests_per_s": len(latencies) / elapsed, "tokens_per_s": sum(done_tokens) / elapsed,
            "p50_ms": 1000 * statistics.median(latencies) if latencies else float("nan"), "p99_ms": pick(0.99),
            "errors": len(errors), "error_kinds": sorted({str(e) for e in errors}),
            "rss_mb": [min(rss, default=0), max(rss, default=0)]}


# --- the report --------------------------------------------------------------------------------------
def table(cells: list[dict], sides: list[Side], goal_clients: int = 32) -> str:
    rows = ["| mix | clients | server | requests/s | tokens/s | p50 ms | p99 ms | errors | cosine to bertlab fp32 "
            "(min / mean) | vs infinity |", "|---|---:|---|---:|---:|---:|---:|---:|---|---|"]
    verdicts = []
    by_side = {s.name: s for s in sides}
    for c in cells:
        peer = c["results"].get("infinity")
        for name, r in c["results"].items():
            low, mean = by_side[name].cosine.get(c["mix"], (float("nan"), float("nan")))
            versus = ""
            if peer and name != "infinity" and peer["requests_per_s"] > 0:
                ratio = r["requests_per_s"] / peer["requests_per_s"]
                versus = f"{ratio:.2f}x req/s, p99 {'<=' if r['p99_ms'] <= peer['p99_ms'] else '>'} infinity's"
                if c["clients"] == goal_clients and name == "bertlab":
                    met = ratio >= 1.5 and r["p99_ms"] <= peer["p99_ms"]
                    verdicts.append(f"{c['mix']}: {ratio:.2f}x at p99 {r['p99_ms']:.0f} vs {peer['p99_ms']:.0f} ms: "
                                    f"{'met' if met else 'NOT met'}")
            rows.append(f"| {c['mix']} | {c['clients']} | {name} | {r['requests_per_s']:.1f} | {r['tokens_per_s']:.0f} | "
                        f"{r['p50_ms']:.1f} | {r['p99_ms']:.1f} | {r['errors']} | {low:.7f} / {mean:.7f} | {versus} |")
    if verdicts:
        rows.append(f"\ngoal (>= 1.5x infinity's requests/s at an equal or lower p99, {goal_clients} clients, fp32): "
                    + "; ".join(verdicts))
    return "\n".join(rows)


async def main_async(args) -> dict:
    from bertlab.interop.pretrained import resolve
    folder = str(resolve(MODEL))
    count_tokens = minilm_token_counter()
    mixes = {mix: mix_texts(mix, count_tokens) for mix in args.mixes}
    tokens = {mix: count_tokens(texts) for mix, texts in mixes.items()}
    sides = [bertlab_side(folder, False), infinity_side(folder, args.infinity)]
    if args.int8:
        sides.insert(1, bertlab_side(folder, True))
    logs = tempfile.mkdtemp(prefix="serve-race-")
    cells = []
    try:
        for side in sides:
            start(side, args.threads, logs)
        for side in sides:
            try:
                await wait_ready(side.port, 300, side.ready_path, side.process)
            except RuntimeError as e:
                raise SystemExit(f"{side.name}: {e}\n{log_tail(side)}") from None
        for mix, texts in mixes.items():  # parity, before any load
            sample = texts[:: max(len(texts) // args.parity_texts, 1)][:args.parity_texts]
            reference = await embeddings(sides[0], sample)
            for side in sides:
                c = cosines(await embeddings(side, sample), reference)
                side.cosine[mix] = (float(c.min()), float(c.mean()))
                print(f"parity {mix} ({len(sample)} texts), {side.name} vs bertlab fp32: cosine min {c.min():.7f}, "
                      f"mean {c.mean():.7f}", flush=True)
        for mix, texts in mixes.items() if not args.parity_only else ():
            n = tokens[mix]
            print(f"{mix}: {len(texts)} texts, {min(n)}-{max(n)} tokens (mean {statistics.mean(n):.1f})", flush=True)
            for clients in args.clients:
                turn = len(cells) % len(sides)
                results = {}
                for side in sides[turn:] + sides[:turn]:  # alternate which side goes first
                    r = await cell(side, texts, n, clients, args.seconds, args.warmup)
                    results[side.name] = r
                    print(f"  {clients:>3} clients {side.name:>14}: {r['requests_per_s']:7.1f} req/s "
                          f"{r['tokens_per_s']:8.0f} tok/s p50 {r['p50_ms']:7.1f} p99 {r['p99_ms']:7.1f} ms "
                          f"{r['errors']} errors RSS {r['rss_mb'][0]:.0f}-{r['rss_mb'][1]:.0f} MB", flush=True)
                    if side.process.poll() is not None:
                        raise SystemExit(f"{side.name} exited ({side.process.returncode}):\n{log_tail(side)}")
                cells.append({"mix": mix, "clients": clients, "results": dict(sorted(results.items(),
                              key=lambda kv: [s.name for s in sides].index(kv[0])))})
    finally:
        exits = {side.name: stop(side) for side in sides}
    report = {"command": " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]), "date": time.strftime("%Y-%m-%d %H:%M"),
              "threads": args.threads, "seconds": args.seconds, "model": folder, "logs": logs, "exit_codes": exits,
              "mixes": {mix: {"texts": len(t), "tokens_min": min(tokens[mix]), "tokens_max": max(tokens[mix]),
                              "tokens_mean": statistics.mean(tokens[mix])} for mix, t in mixes.items()},
              "cosine_to_bertlab_fp32": {s.name: s.cosine for s in sides}, "cells": cells,
              "versions": versions(args.infinity)}
    print("\n" + table(cells, sides))
    return report


def versions(infinity: str) -> dict:
    import torch
    peer = subprocess.run([os.path.join(os.path.dirname(infinity), "python"), "-c",
                           "import importlib.metadata as m; print(' '.join(p + '=' + m.version(p) for p in "
                           "('infinity-emb', 'torch', 'transformers', 'sentence-transformers')))"],
                          capture_output=True, text=True).stdout.strip()
    return {"bertlab side": f"torch={torch.__version__}", "infinity side": peer}


def number_list(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--clients", type=number_list, default=[1, 8, 32, 64], help="comma-separated (1,8,32,64)")
    p.add_argument("--seconds", type=float, default=30.0, help="measured seconds per cell and side (30)")
    p.add_argument("--warmup", type=float, default=1.0, help="seconds at full load before each measurement (1)")
    p.add_argument("--mixes", type=lambda t: t.split(","), default=list(MIXES), help="comma-separated: " + ",".join(MIXES))
    p.add_argument("--threads", type=int, default=2, help="torch threads of each server (2)")
    p.add_argument("--int8", action="store_true", help="also race bertlab serve --int8")
    p.add_argument("--parity-texts", type=int, default=64, help="texts of each mix compared before the load (64)")
    p.add_argument("--parity-only", action="store_true", help="only the parity check: no load")
    p.add_argument("--infinity", default=INFINITY, help="the infinity_emb executable of its own venv")
    p.add_argument("--json", default=os.path.join(REPO, "runs", "serve-race", "race.json"))
    args = p.parse_args()
    if unknown := set(args.mixes) - set(MIXES):
        raise SystemExit(f"unknown mix {', '.join(sorted(unknown))}; the mixes are {', '.join(MIXES)}")
    if not (all(1 <= c <= 256 for c in args.clients) and 0 < args.seconds <= 120 and 1 <= args.threads <= 64):
        raise SystemExit("keep the load bounded: 1-256 clients, at most 120 s a cell, 1-64 threads")
    if not os.path.exists(args.infinity):
        raise SystemExit(f"{args.infinity} does not exist: make infinity's venv first (benchmarks/infinity/README.md)")
    report = asyncio.run(main_async(args))
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=1)
    print(f"\nwrote {args.json}")


if __name__ == "__main__":
    main()
