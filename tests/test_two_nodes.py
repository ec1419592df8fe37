"""Two nodes on one machine: two `torchrun --nnodes 2 --node-rank {0,1}` launches meeting at a
loopback rendezvous (gloo on the CPU) train to the weights of one process whose step reads both
nodes' batches, evaluate together without deadlock, and only global rank 0 writes the run's files.

torchrun runs this file as its script (the `__main__` block below); the test launches it twice."""
import json
import os
import subprocess
import sys

import pytest
import torch

from engine_checks import char_token_files, free_port, tiny_gpt_config

STEPS = 4


def _settings(data, out, **kw):
    from bertlab.lm.objective import GPTSettings
    return GPTSettings(**{**dict(data=data, out=str(out), model=tiny_gpt_config(), batch_size=2, grad_accum=1,
                                 block_size=16, max_steps=STEPS, warmup=1, eval_every=2, save_every=100,
                                 eval_tokens=80, lr=0.5, grad_clip=0.0, device="cpu", progress=False, seed=3), **kw})


def _objectives():
    """(plain SGD, the same in one process reading both nodes' micro-batches)."""
    from engine_checks import reading_both_ranks

    from bertlab.lm.objective import LanguageModeling

    class PlainSGD(LanguageModeling):
        """SGD: an update linear in the gradients, so the two-process and one-process sums agree to rounding."""

        def optimizer(self, model, s):
            return torch.optim.SGD(model.parameters(), lr=s.lr)

    return PlainSGD, reading_both_ranks(PlainSGD)


def _node(node_rank: int, port: int, data, out, log):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--node-rank",
                             str(node_rank), "--nproc-per-node", "1", "--master-addr", "127.0.0.1", "--master-port",
                             str(port), __file__, data, str(out)], env=env, stdout=log, stderr=log)


def test_two_nodes_on_loopback_equal_one_process(tmp_path):
    from bertlab.training.engine import fit
    data = char_token_files(tmp_path)
    port = free_port()
    logs = [open(tmp_path / f"node{rank}.log", "w") for rank in range(2)]
    nodes = [_node(rank, port, data, tmp_path / "two", logs[rank]) for rank in range(2)]
    try:
        codes = [node.wait(timeout=120) for node in nodes]
    finally:
        for node in nodes:
            if node.poll() is None:
                node.kill()
        for log in logs:
            log.close()
    assert codes == [0, 0], "\n".join((tmp_path / f"node{rank}.log").read_text() for rank in range(2))

    _, both_nodes = _objectives()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        s = _settings(data, tmp_path / "one", grad_accum=2)
        one = fit(both_nodes(s), s)
    finally:
        torch.set_num_threads(threads)
    two = torch.load(tmp_path / "two" / "weights.pt")
    for name, p in one["model"].state_dict().items():
        torch.testing.assert_close(two[name], p, atol=1e-6, rtol=1e-5, msg=name)

    records = [json.loads(line) for line in (tmp_path / "two" / "metrics.jsonl").read_text().splitlines()]
    # one writer: every step logged once, evaluations (at steps 2 and 4, every process taking part) included
    assert [r["step"] for r in records if r["kind"] == "train"] == list(range(1, STEPS + 1))
    assert [r["step"] for r in records if r["kind"] == "eval"] == [2, 4]
    ones = [json.loads(line) for line in (tmp_path / "one" / "metrics.jsonl").read_text().splitlines()]
    for a, b in zip(records, ones):
        assert a["kind"] == b["kind"] and a["step"] == b["step"]
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-5)
    summary = json.loads((tmp_path / "two" / "summary.json").read_text())
    assert summary["world_size"] == 2 and summary["steps"] == STEPS
    assert (tmp_path / "two" / "curves.png").exists()


if __name__ == "__main__":  # a node's process, started by torchrun
    from bertlab.training.engine import fit
    data, out = sys.argv[1:3]
    plain_sgd, _ = _objectives()
    s = _settings(data, out)
    summary = fit(plain_sgd(s), s)
    if int(os.environ["RANK"]) == 0:
        torch.save(summary["model"].state_dict(), os.path.join(out, "weights.pt"))
