"""Progress for long work: a tqdm bar on a terminal, and a plain line every so often when stderr
goes to a file or a pipe (a log), so a run in the background still says how far it is."""
import os
import sys

from tqdm import tqdm

LOG_INTERVAL_S = float(os.environ.get("BERTLAB_PROGRESS_SECONDS", 30))


LOG_FORMAT = "{desc}: {n_fmt}/{total_fmt} ({percentage:.0f}%) [{elapsed}<{remaining}, {rate_fmt}{postfix}]"


class _LogLines(tqdm):
    """tqdm that writes whole lines (no carriage returns) at most every LOG_INTERVAL_S seconds."""

    shown = 0  # the count last written

    def display(self, msg=None, pos=None):
        if self.n == 0 or self.n == self.shown:  # nothing (new) to report
            return True
        self.fp.write((msg or self.__str__()).strip() + "\n")
        self.fp.flush()
        self.shown = self.n
        return True

    def close(self):
        if not self.disable:
            self.display()  # the final count, on a line of its own, unless just written
            self.disable = True  # tqdm's own close would add a bare newline
        super().close()


def progress_bar(iterable=None, *, enabled: bool = True, **kwargs) -> tqdm:
    """A progress bar over `iterable` (or updated by hand: total=..., .update(n)) on stderr.
    `enabled=False` (--quiet, or a process other than rank 0) shows nothing."""
    stream = kwargs.pop("file", sys.stderr)
    if not enabled:
        return tqdm(iterable, disable=True, **kwargs)
    if stream.isatty():
        return tqdm(iterable, file=stream, dynamic_ncols=True, **kwargs)
    kwargs.pop("leave", None)
    if kwargs.get("total", getattr(iterable, "__len__", None)) is None:
        kwargs.setdefault("bar_format", "{desc}: {n_fmt} [{elapsed}, {rate_fmt}{postfix}]")
    kwargs.setdefault("bar_format", LOG_FORMAT)
    return _LogLines(iterable, file=stream, mininterval=LOG_INTERVAL_S, maxinterval=LOG_INTERVAL_S, **kwargs)


def write(message: str):
    """A message on stderr that does not tear a bar in progress (a log has no bar to tear)."""
    if sys.stderr.isatty():
        tqdm.write(message, file=sys.stderr)
    else:
        print(message, file=sys.stderr, flush=True)
