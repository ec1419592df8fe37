"""Bounded memory in training (training/memory.py): summary.json reports the peak resident size, and
the heap bound hands free heap memory back once the resident size has grown past its slack; the
fine-tuning benchmark measures each side's peak in a process of its own."""
import json
import os
import sys

from bertlab.training import memory
from cli_cases import assert_ok, run_cli, write

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))


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


def _hold(mb: int) -> dict:
    """In the benchmark's child process: touch `mb` MiB, as a training run would."""
    block = bytearray(mb * 2**20)
    block[::4096] = b"\1" * len(range(0, len(block), 4096))  # calloc's pages are resident once written
    return {"held": len(block) // 2**20}


def test_the_finetune_benchmark_measures_each_side_in_a_process_of_its_own():
    """bench_finetune runs a side in a fresh process and reports that process's peak: a side that
    holds more than this process ever did reports at least that, and this process's peak stays."""
    import bench_finetune  # torch._dynamo and the HF helpers: imported for this test alone
    before = memory.peak_rss_mb()
    mb = int(before) + 200
    result = bench_finetune.in_own_process(_hold, mb)
    assert result["held"] == mb and result["peak_rss_mb"] >= mb
    assert memory.peak_rss_mb() < before + 100
