"""Bounded memory in training (training/memory.py): summary.json reports the peak resident size, and
the heap bound hands free heap memory back once the resident size has grown past its slack."""
import json

from bertlab.training import memory
from cli_cases import assert_ok, run_cli, write


def test_summary_reports_the_peak_resident_memory(tmp_path):
    text = write(tmp_path / "corpus.txt", "the cat sat on the mat. " * 200)
    assert_ok(run_cli("gpt-train", text, "-o", tmp_path / "run", "--preset", "test", "--max-steps", "2",
                      "--block-size", "16", "--batch-size", "4", "--quiet"))
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert 10 < summary["peak_rss_mb"] < 100_000
    assert summary["peak_rss_mb"] >= memory.rss_bytes() / 2**20 * 0.5  # the peak is not below what we hold


def test_the_heap_bound_trims_only_past_its_slack(monkeypatch):
    sizes = iter([100, 105, 111, 111, 200, 120])
    monkeypatch.setattr(memory, "rss_bytes", lambda: next(sizes))
    trims = []
    bound = memory.HeapBound(slack=0.1)
    bound.trim = trims.append
    for _ in range(6):
        bound.after_step()
    # 100 is the reference; 105 within 10%; 111 past it: trim, and the next step (111) is the new
    # reference; 200 past it: trim; 120 becomes the reference
    assert trims == [0, 0] and bound.trims == 2 and bound.reference == 120


def test_the_heap_bound_is_a_no_op_without_glibc(monkeypatch):
    bound = memory.HeapBound()
    bound.trim = None
    bound.after_step()
    assert bound.trims == 0
