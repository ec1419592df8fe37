"""Small file helpers: writes that never leave a half-written file behind, and text reading with
errors that name the file and line."""
import os
import tempfile


def atomic_write(path, write_fn, mode="w", encoding="utf-8"):
    """Call write_fn(file) on a temporary file beside `path`, then rename it over `path`. The file
    gets the permissions a plain open() would give (mkstemp's are owner-only)."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=os.path.basename(path))
    try:
        os.chmod(tmp, 0o666 & ~_umask())
        with os.fdopen(fd, mode, **({} if "b" in mode else {"encoding": encoding, "newline": "\n"})) as f:
            write_fn(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_text(path, text: str):
    atomic_write(path, lambda f: f.write(text))


def read_lines(path, allow_empty_file=False) -> list[str]:
    """The lines of a UTF-8 text file ("-" is standard input), split on "\\n" only.

    Raises ValueError naming the file and line for non-UTF-8 bytes, and for an empty file.
    """
    if os.fspath(path) == "-":
        import sys
        return decode_lines(sys.stdin.buffer.read(), "<stdin>", allow_empty_file)
    with open(path, "rb") as f:
        return decode_lines(f.read(), path, allow_empty_file)


def decode_lines(data: bytes, path, allow_empty_file=False) -> list[str]:
    """Split UTF-8 bytes into lines on "\\n" only; a trailing newline ends the last line."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise ValueError(f"{path}:{line}: not valid UTF-8 (byte {data[e.start]:#04x} at offset {e.start})") from None
    if not text and not allow_empty_file:
        raise ValueError(f"{path}: the file is empty")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines
