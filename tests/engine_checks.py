"""Checks every objective on the one engine must pass, shared by the objectives' tests: kill -9
mid-run then --resume equals the uninterrupted run, and the per-step losses of a run folder."""
import json
import os
import signal
import socket
import subprocess
import sys
import time

import torch
import torch.multiprocessing as mp


def tiny_gpt_config():
    """A GPT small enough for several processes in seconds, without dropout (runs compare exactly)."""
    from bertlab.models import GPTConfig
    return GPTConfig.from_dict({**GPTConfig.preset("test", n_positions=16).to_dict(hf=False), "vocab_size": 40,
                                "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0})


def char_token_files(folder) -> str:
    """train.bin / val.bin of 400 short lines, character-level, in `folder` (returned as a str)."""
    from bertlab.lm.token_stream import prepare_token_files
    from bertlab.tokenization.char_level import CharTokenizer
    text = folder / "corpus.txt"
    text.write_text("".join(f"line {i}: the quick brown fox {i % 7} jumps over the lazy dog\n"
                            for i in range(400)), encoding="utf-8")
    prepare_token_files([str(text)], CharTokenizer.train([text.read_text(encoding="utf-8")]), str(folder),
                        val_fraction=0.1)
    return str(folder)


def train_records(out) -> list[dict]:
    with open(os.path.join(out, "metrics.jsonl"), encoding="utf-8") as f:
        return [r for r in map(json.loads, f) if r["kind"] == "train"]


def kill_9_then_resume(cli_args, whole, killed, steps: int, timeout: float = 180):
    """Run `bertlab *cli_args(whole)` to the end; start `cli_args(killed)` (saving often) in a
    subprocess, SIGKILL it once its first checkpoint is written, resume it with --resume; assert
    the same per-step losses and learning rates. Every run uses one thread, as bitwise equality
    needs the same order of floating-point sums."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _kill_9_then_resume(cli_args, whole, killed, steps, timeout)
    finally:
        torch.set_num_threads(threads)


def _kill_9_then_resume(cli_args, whole, killed, steps, timeout):
    from bertlab.cli import main
    assert main(cli_args(whole)) == 0
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "bertlab", *cli_args(killed)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.time() + timeout
        while not os.path.exists(os.path.join(killed, "checkpoint.pt")) and proc.poll() is None \
                and time.time() < deadline:
            time.sleep(0.005)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait()
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read().decode()
    assert not os.path.exists(os.path.join(killed, "summary.json")), "the run finished before it was killed"
    stopped_at = len(train_records(killed))
    assert main(cli_args(killed) + ["--resume"]) == 0
    first, resumed = train_records(whole), train_records(killed)
    assert [r["step"] for r in resumed] == list(range(1, steps + 1)) and stopped_at < steps
    assert [(r["step"], r["loss"], r["lr"]) for r in resumed] == [(r["step"], r["loss"], r["lr"]) for r in first]
    return stopped_at


def same_weights(a: dict, b: dict):
    assert a.keys() == b.keys()
    for name, p in a.items():
        assert torch.equal(p, b[name]), name


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank, world, port, fn, args):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world),
                      LOCAL_RANK=str(rank))
    torch.set_num_threads(1)
    fn(*args)


def spawn(fn, *args, world: int = 2):
    """fn(*args) in `world` processes joined as torchrun would (gloo on the CPU)."""
    mp.spawn(_worker, args=(world, free_port(), fn, args), nprocs=world, join=True)


def reading_both_ranks(objective_class):
    """`objective_class` (a LanguageModeling objective) as one process whose step reads what two
    processes' steps read: rank 0's micro-batches, then rank 1's (grad_accum 2k stands for k each),
    which data parallelism must equal."""
    from bertlab.lm.token_stream import TokenStream

    class BothRanks(objective_class):
        def setup(self, run):
            model = super().setup(run)
            path = os.path.join(self.s.data, "train.bin")
            self.streams = [TokenStream(path, self.s.block_size, self.s.seed, rank, 2) for rank in range(2)]
            return model

        def micro_batches(self, k):
            return [stream.batch(self.s.batch_size) for stream in self.streams for _ in range(k // 2)]
    return BothRanks
