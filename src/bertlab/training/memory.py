"""The process's resident memory: its peak, which summary.json reports, and a bound on what the C
heap keeps between training steps.

Why the bound. A step allocates hundreds of tensors and frees them all by its end. On a CPU the
padding is packed away (core.fast_paths.unpadding), so those tensors are sized by the batch's token
count and its attention buckets: sizes that differ in every batch. glibc's malloc keeps freed heap
memory resident, and the holes one step leaves rarely fit the next step's tensors, so the heap keeps
growing. A MiniLM QA fine-tune (man-page questions, batch 16, max length 256) held 216 MB between
steps throughout, while its heap grew from 465 to 760 MB in 80 steps and its resident size from 838
to 1,135 MB, every added megabyte free memory that malloc kept; in the padded layout (HF's shapes)
the heap stopped growing after ten steps. `malloc_trim` hands free heap pages back to the system.
Trimming after every step kept the resident size flat but cost 11% of a step here (the next step
faults its pages in again), so the trim waits until the resident size has grown past the slack.
"""
import ctypes
import ctypes.util
import os
import resource
import sys


def peak_rss_mb() -> float:
    """The most this process has held resident so far, in MiB (getrusage's ru_maxrss: kilobytes on
    Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(peak / (2**20 if sys.platform == "darwin" else 2**10), 1)


def rss_bytes() -> int | None:
    """What this process holds resident now; None where /proc is not there to say."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def _malloc_trim():
    """glibc's malloc_trim, or None (another C library, another system)."""
    name = ctypes.util.find_library("c")
    try:
        trim = ctypes.CDLL(name).malloc_trim if name else None
    except (OSError, AttributeError):
        return None
    if trim is not None:
        trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


class HeapBound:
    """Call `after_step()` once the step's tensors are freed: when the resident size has grown more
    than `slack` over what a step left resident (measured after the step that follows each trim),
    free heap memory goes back to the system. A no-op without glibc."""

    def __init__(self, slack: float = 0.1):
        self.slack, self.reference, self.trims = slack, None, 0
        self.trim = _malloc_trim()

    def after_step(self):
        rss = rss_bytes() if self.trim is not None else None
        if rss is None:
            return
        if self.reference is None:
            self.reference = rss
        elif rss > self.reference * (1 + self.slack):
            self.trim(0)
            self.trims += 1
            self.reference = None  # what a step leaves resident, measured again after the next one
