"""A small shared helper for bertlab benchmarks: time a callable, print a markdown table.

    from harness import Row, measure, print_table
    rows = [Row("tokenize 50k lines", "bertlab", work=n_tokens, unit="tokens/s",
                seconds=measure(lambda: ours(lines))),
            Row("tokenize 50k lines", "HF fast", work=n_tokens, unit="tokens/s",
                seconds=measure(lambda: theirs(lines)))]
    print_table(rows)

``measure`` runs ``warmup`` untimed calls, then ``repeat`` timed ones, and returns every time.
``alternating`` times two sides in one process, their calls alternating (ours, theirs, then
theirs, ours, ...) so both meet the same load on a shared machine, and ``round_ratios`` gives each
round's ratio of the two calls: their median is the figure least moved by other jobs.
A row's throughput is ``work / seconds`` of the best call (``stat="best"``; the least disturbed
by other processes on a shared machine) or of the median call (``stat="median"``). Each row's
ratio is against the row of the same workload whose implementation is ``baseline``.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass


def measure(fn: Callable[[], object], *, repeat: int = 5, warmup: int = 1) -> list[float]:
    """Seconds taken by each of ``repeat`` calls of ``fn``, after ``warmup`` untimed calls."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def alternating(ours: Callable[[], object], theirs: Callable[[], object], repeat: int, warmup: int = 1):
    """((wall, cpu), (wall, cpu)) seconds of ``repeat`` calls of each side, after ``warmup`` untimed
    calls each; the order alternates by round. CPU seconds (all threads) count the work done, not the
    time a thread waited for a core on a machine shared with other jobs."""
    for _ in range(warmup):
        ours(), theirs()
    wall, cpu = ([], []), ([], [])
    for i in range(repeat):
        for side in (0, 1) if i % 2 == 0 else (1, 0):
            start, cpu_start = time.perf_counter(), time.process_time()
            (ours, theirs)[side]()
            wall[side].append(time.perf_counter() - start)
            cpu[side].append(time.process_time() - cpu_start)
    return (wall[0], cpu[0]), (wall[1], cpu[1])


def round_ratios(ours_seconds: Sequence[float], theirs_seconds: Sequence[float]) -> list[float]:
    """Each round's speed-up of ours over theirs (their time over ours), in round order."""
    return [theirs / mine for mine, theirs in zip(ours_seconds, theirs_seconds)]


@dataclass
class Row:
    workload: str        # what was done, e.g. "tokenize 50k real lines"
    implementation: str  # who did it, e.g. "bertlab" or "HF BertTokenizerFast"
    work: float          # units of work per call, e.g. tokens produced
    unit: str            # throughput unit, e.g. "tokens/s"
    seconds: list[float]  # from measure()

    def throughput(self, stat: str = "best") -> float:
        seconds = min(self.seconds) if stat == "best" else statistics.median(self.seconds)
        return self.work / seconds


def markdown_table(rows: Sequence[Row], baseline: str = "bertlab", stat: str = "best") -> str:
    """workload | implementation | throughput | unit | ratio vs ``baseline``."""
    base = {r.workload: r.throughput(stat) for r in rows if r.implementation == baseline}
    lines = [f"| workload | implementation | throughput ({stat} of {max(len(r.seconds) for r in rows)}) "
             f"| unit | ratio vs {baseline} |", "|---|---|---:|---|---:|"]
    for r in rows:
        value = r.throughput(stat)
        ratio = f"{value / base[r.workload]:.2f}" if r.workload in base else "–"
        lines.append(f"| {r.workload} | {r.implementation} | {value:,.0f} | {r.unit} | {ratio} |")
    return "\n".join(lines)


def print_table(rows: Sequence[Row], baseline: str = "bertlab", stat: str = "best") -> None:
    print(markdown_table(rows, baseline, stat), flush=True)
