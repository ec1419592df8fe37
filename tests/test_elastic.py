"""Elastic restarts under torchrun's agent (training/elastic.py), on the CPU with gloo: a worker
killed with SIGKILL mid-run, the agent restarts the group, and the run continues from its last
checkpoint without --resume, ending exactly where an uninterrupted run ends."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from engine_checks import same_weights, train_records

STEPS = 30


def _gpt_args(corpus, out, save_every):
    return ["gpt-train", str(corpus), "--out", str(out), "--tokenizer", "char", "--preset", "tiny", "--n-layer", "1",
            "--n-embd", "32", "--n-head", "2", "--block-size", "16", "--batch-size", "4", "--max-steps", str(STEPS),
            "--warmup", "2", "--dropout", "0.1", "--eval-every", "1000", "--save-every", str(save_every),
            "--eval-tokens", "200", "--seed", "4", "--quiet", "--device", "cpu"]


def _torchrun(args, log, *launch):
    """torchrun's agent and its 2 workers, their output to the file `log` (a pipe nobody reads
    while the agent runs could fill and stop it)."""
    # PyTorch's own setting for restarts that work (training/elastic.py: pytorch/pytorch#135712)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}
    with open(log, "w") as f:
        return subprocess.Popen([sys.executable, "-m", "torch.distributed.run", *launch, "--nproc-per-node", "2",
                                 "--module", "bertlab", *args], env=env, stdout=f, stderr=subprocess.STDOUT)


def _worker_of_rank(agent_pid: int, rank: int) -> int:
    """The pid of the agent's worker whose RANK is `rank` (read from /proc: no psutil here)."""
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{name}/environ", "rb") as f:
                env = dict(item.split(b"=", 1) for item in f.read().split(b"\0") if b"=" in item)
        except (OSError, ValueError, IndexError):
            continue
        if parent == agent_pid and env.get(b"RANK") == str(rank).encode():
            return int(name)
    raise AssertionError(f"no worker of rank {rank} under the agent {agent_pid}")


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("".join(f"line {i}: the quick brown fox {i % 7} jumps\n" for i in range(300)), encoding="utf-8")
    return path


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc to find a worker")
def test_a_killed_worker_is_restarted_and_the_run_ends_as_if_never_stopped(corpus, tmp_path):
    whole = _torchrun(_gpt_args(corpus, tmp_path / "whole", 1000), tmp_path / "whole.log", "--standalone")
    assert whole.wait(timeout=240) == 0, (tmp_path / "whole.log").read_text()

    killed = tmp_path / "killed"
    agent = _torchrun(_gpt_args(corpus, killed, 2), tmp_path / "killed.log", "--standalone", "--max-restarts", "1")
    try:
        deadline = time.time() + 180
        while not (killed / "checkpoint.pt").exists() and agent.poll() is None and time.time() < deadline:
            time.sleep(0.005)
        os.kill(_worker_of_rank(agent.pid, 1), signal.SIGKILL)
        stopped_at = len(train_records(killed))
        assert not (killed / "summary.json").exists(), "the run finished before a worker was killed"
        code = agent.wait(timeout=240)
    finally:
        if agent.poll() is None:
            agent.kill()
    log = (tmp_path / "killed.log").read_text()
    assert code == 0, log
    assert "restart 1 by torchrun's agent: resuming from checkpoint.pt" in log, log
    # the process whose peer was killed says so, not "internal error ... a bug in bertlab"
    assert "another process of this torchrun run stopped first" in log and "internal error" not in log, log
    assert stopped_at < STEPS
    first, resumed = train_records(tmp_path / "whole"), train_records(killed)
    assert [r["step"] for r in resumed] == list(range(1, STEPS + 1))
    assert [(r["loss"], r["lr"]) for r in resumed] == [(r["loss"], r["lr"]) for r in first]
    same_weights(*(torch.load(out / "checkpoint.pt")["model"] for out in (tmp_path / "whole", killed)))
    assert json.loads((killed / "summary.json").read_text())["steps"] == STEPS


def test_a_restart_never_takes_a_folder_another_launch_claimed(corpus, tmp_path, monkeypatch):
    """A restarted worker continues only a run its own launch started: a folder claimed by another
    launch id is refused as a first attempt refuses it, and a launch without an id of its own
    ('none') is told how to get one."""
    from bertlab.training import elastic
    from bertlab.training.checkpoint import check_resume
    out = tmp_path / "run"
    out.mkdir()
    (out / "checkpoint.pt").write_bytes(b"someone's run")
    (out / elastic.MARKER).write_text("another-launch\n")
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "this-launch")
    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", "1")
    with pytest.raises(ValueError, match="holds a training checkpoint"):
        check_resume(str(out), False, False)
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "none")
    with pytest.raises(ValueError, match="--standalone or --rdzv-id"):
        check_resume(str(out), False, False)
    assert (out / "checkpoint.pt").read_bytes() == b"someone's run"
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "another-launch")
    assert elastic.claimed_by_this_launch(str(out))


def test_restarts_without_their_own_store_are_refused_at_launch(monkeypatch):
    """torchrun --max-restarts with the agent's shared store would fail at its first restart, hours in:
    refused when the group first forms, naming the setting that makes restarts work."""
    from bertlab.training import elastic
    monkeypatch.setenv("TORCHELASTIC_MAX_RESTARTS", "3")
    monkeypatch.setenv("TORCHELASTIC_USE_AGENT_STORE", "True")
    with pytest.raises(ValueError, match="TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1"):
        elastic.check_launch()
    monkeypatch.setenv("TORCHELASTIC_USE_AGENT_STORE", "False")
    elastic.check_launch()
    monkeypatch.setenv("TORCHELASTIC_MAX_RESTARTS", "0")
    monkeypatch.setenv("TORCHELASTIC_USE_AGENT_STORE", "True")
    elastic.check_launch()  # no restarts asked for: the shared store does no harm
