"""The one training engine: what a new objective costs (the toy below is the whole of one), and
that fit() resumes it exactly and writes the metrics log, curves and summary for it."""
import json
from dataclasses import dataclass

import torch

from bertlab.training.engine import Objective, fit
from bertlab.training.settings import RunSettings


@dataclass(kw_only=True)
class LineSettings(RunSettings):
    slope: float = 3.0


class FitALine(Objective):
    """Regression of y = slope * x + 1 + noise: draws its own batches, from a generator it saves."""
    name, unit = "line", "examples"

    def __init__(self, s: LineSettings):
        self.s = s

    def setup(self, run):
        self.rng = torch.Generator().manual_seed(self.s.seed)
        x = torch.linspace(-1, 1, 64)[:, None]
        self.held_out = (x, self.s.slope * x + 1)
        return torch.nn.Sequential(torch.nn.Linear(1, 8), torch.nn.Dropout(0.1), torch.nn.Linear(8, 1))

    def next_batch(self):
        x = torch.rand(self.s.batch_size, 1, generator=self.rng) * 2 - 1
        return x, self.s.slope * x + 1 + 0.1 * torch.randn(x.shape, generator=self.rng)

    def loss(self, model, batch):
        return torch.nn.functional.mse_loss(model(batch[0]), batch[1])

    def step_stats(self):
        return {}, self.s.batch_size * self.s.grad_accum

    @torch.no_grad()
    def evaluate(self, model):
        model.eval()
        mse = torch.nn.functional.mse_loss(model(self.held_out[0]), self.held_out[1]).item()
        model.train()
        return {"loss": mse}

    def state_dict(self):
        return {"rng": self.rng.get_state()}

    def load_state_dict(self, state):
        self.rng.set_state(state["rng"])


def settings(out, **kw):
    return LineSettings(**{"out": str(out), "batch_size": 16, "lr": 0.05, "max_steps": 40, "eval_every": 10,
                           "progress": False, **kw})


def test_a_toy_objective_trains_resumes_and_reports(tmp_path):
    whole = fit(FitALine(settings(tmp_path / "whole")), settings(tmp_path / "whole"))
    assert whole["held_out"]["loss"] < 0.1 and whole["steps"] == 40
    part = fit(FitALine(settings(tmp_path / "part")), settings(tmp_path / "part", max_minutes=0))
    assert part["stopped_by_time"] and part["steps"] == 1
    resumed = fit(FitALine(settings(tmp_path / "part", resume=True)), settings(tmp_path / "part", resume=True))
    assert resumed["held_out"] == whole["held_out"] and resumed["resumed_from_step"] == 1
    for p, q in zip(whole["model"].parameters(), resumed["model"].parameters()):
        assert torch.equal(p, q)
    for out in ("whole", "part"):
        records = [json.loads(line) for line in open(tmp_path / out / "metrics.jsonl")]
        assert [r["step"] for r in records if r["kind"] == "train"] == list(range(1, 41))
        assert [r["step"] for r in records if r["kind"] == "eval"] == [1, 10, 20, 30, 40][out == "whole":]
        assert (tmp_path / out / "curves.png").stat().st_size > 1000
    losses = [[(r["step"], r["loss"]) for r in map(json.loads, open(tmp_path / out / "metrics.jsonl"))
               if r["kind"] == "train"] for out in ("whole", "part")]
    assert losses[0] == losses[1]
    assert json.loads((tmp_path / "part" / "summary.json").read_text())["examples"] == 40 * 16
