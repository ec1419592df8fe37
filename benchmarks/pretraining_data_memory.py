"""Does `bertlab create-pretraining-data` keep memory flat as the corpus grows, and scale with
--workers? Peak RSS (the command and its worker processes together) and wall time, at corpus sizes
of real English text, with 1 and 2 workers.

    python benchmarks/pretraining_data_memory.py [--sizes-mb 100,1000] [--workers 1,2] [--work DIR]

The text is `bertlab data english-corpus`'s (prose from this machine's documentation, ~20-40 MB),
repeated whole until each size is reached (the machine has less than a gigabyte of prose; a
repeated document is still a document to the command). One vocabulary (`bertlab vocab`, 8,000
pieces) serves every run; instances as google's defaults (128 tokens, 20 predictions, dupe factor 1).
RSS is sampled every 0.2 s from /proc over the command's process tree. Prints one markdown table.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def bertlab(*args):
    r = subprocess.run([sys.executable, "-m", "bertlab", *args], env=ENV, capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(f"bertlab {' '.join(args)} failed:\n{r.stderr[-3000:]}")


def tree_rss_mb(root: int) -> float:
    """RSS of `root` and every descendant, summed (MB), read from /proc."""
    children, rss = {}, {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(name))
            rss[int(name)] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, IndexError, ValueError):
            continue
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        total += rss.get(pid, 0)
        stack.extend(children.get(pid, []))
    return total / 2**20


def corpus_of(source: str, mb: int, folder: str) -> str:
    """`source` repeated whole until the file holds at least `mb` MB."""
    path = os.path.join(folder, f"corpus-{mb}mb.txt")
    if not os.path.exists(path):
        with open(source, "rb") as f:
            text = f.read().rstrip(b"\n") + b"\n\n"
        with open(path + ".tmp", "wb") as f:
            written = 0
            while written < mb * 2**20:
                f.write(text)
                written += len(text)
        os.replace(path + ".tmp", path)
    return path


def measure(corpus: str, vocab: str, workers: int, out: str) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "bertlab", "create-pretraining-data", corpus, "--vocab", vocab,
                             "-o", out, "--max-seq-length", "128", "--max-predictions-per-seq", "20",
                             "--dupe-factor", "1", "--workers", str(workers)],
                            env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    samples = []
    while proc.poll() is None:
        samples.append(tree_rss_mb(proc.pid))
        time.sleep(0.2)
    seconds = time.perf_counter() - start
    if proc.returncode:
        raise SystemExit(f"create-pretraining-data failed:\n{proc.stderr.read()[-3000:]}")
    size = sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out))
    shutil.rmtree(out, ignore_errors=True)
    third = max(len(samples) // 3, 1)
    return {"seconds": seconds, "peak_mb": max(samples, default=0.0), "first_third_peak_mb": max(samples[:third]),
            "last_third_peak_mb": max(samples[-third:]), "output_mb": size / 2**20}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes-mb", default="100,1000")
    p.add_argument("--workers", default="1,2")
    p.add_argument("--work", help="keep the corpus and vocabulary here between runs (default: a temporary folder)")
    args = p.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="pretraining-data-memory-")
    os.makedirs(work, exist_ok=True)
    english = os.path.join(work, "english")
    if not os.path.exists(os.path.join(english, "train.txt")):
        bertlab("data", "english-corpus", "-o", english, "--quiet")
    vocab = os.path.join(work, "vocab")
    if not os.path.exists(os.path.join(vocab, "vocab.txt")):
        bertlab("vocab", os.path.join(english, "train.txt"), "--vocab-size", "8000", "-o", vocab)
    source_mb = os.path.getsize(os.path.join(english, "train.txt")) / 2**20
    print(f"text: {source_mb:.1f} MB of English prose from this machine, repeated to each size", flush=True)
    rows = []
    for size in (int(x) for x in args.sizes_mb.split(",")):
        corpus = corpus_of(os.path.join(english, "train.txt"), size, work)
        mb = os.path.getsize(corpus) / 2**20  # whole repeats: at least the size asked for
        for workers in (int(x) for x in args.workers.split(",")):
            r = measure(corpus, vocab, workers, os.path.join(work, "out"))
            rows.append((mb, workers, r))
            print(f"{mb:,.0f} MB, {workers} worker(s): {r['seconds']:.0f} s, peak RSS {r['peak_mb']:.0f} MB "
                  f"(first third {r['first_third_peak_mb']:.0f}, last third {r['last_third_peak_mb']:.0f}), "
                  f"output {r['output_mb']:.0f} MB", flush=True)
    print("\n| corpus | workers | seconds | MB/s | peak RSS (all processes) | peak, first third / last third | output |")
    print("|---:|---:|---:|---:|---:|---|---:|")
    for mb, workers, r in rows:
        print(f"| {mb:,.0f} MB | {workers} | {r['seconds']:.0f} | {mb / r['seconds']:.2f} | {r['peak_mb']:.0f} MB | "
              f"{r['first_third_peak_mb']:.0f} / {r['last_third_peak_mb']:.0f} MB | {r['output_mb']:.0f} MB |")
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
