"""Small file helpers: writes that never leave a half-written file behind, and text reading with
errors that name the file and line."""
import errno
import os
import tempfile


def atomic_write(path, write_fn, mode="w", encoding="utf-8"):
    """Call write_fn(file) on a temporary file beside `path`, then rename it over `path`. The file
    gets the permissions a plain open() would give (mkstemp's are owner-only)."""
    path = os.fspath(path)
    if os.path.isdir(path):
        raise IsADirectoryError(errno.EISDIR, "is a folder, not a file", path)
    if os.path.exists(path) and not os.path.isfile(path):
        # /dev/null, /dev/stdout, a named pipe: written in place. A rename would put a regular file
        # where the device was (as root, `-o /dev/null` once replaced the machine's /dev/null).
        with open(path, mode, **({} if "b" in mode else {"encoding": encoding, "newline": "\n"})) as f:
            write_fn(f)
        return
    folder = make_folder(os.path.dirname(os.path.abspath(path)))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=TEMP_PREFIX, suffix=os.path.basename(path))
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


TEMP_PREFIX = ".tmp-"


def make_folder(folder) -> str:
    """os.makedirs(folder, exist_ok=True), with an error that names the file in the way when a
    part of the path exists as a file."""
    folder = os.fspath(folder)
    try:
        os.makedirs(folder, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        part = folder
        while part and not os.path.exists(part):
            part = os.path.dirname(part)
        raise NotADirectoryError(errno.ENOTDIR, f"cannot create {folder}: {part} is a file, not a folder") from None
    return folder


def check_output_file(path, overwrite: bool = False, flag: str = "--output"):
    """Refuse, before any work is done, an output file that would fail or destroy something: one
    that exists (unless `overwrite`), a folder, a path under a file. Creates the file's folder."""
    path = os.fspath(path)
    if os.path.isdir(path):
        raise ValueError(f"{flag} {path}: is a folder, not a file")
    if os.path.lexists(path) and not overwrite:
        raise ValueError(f"{flag} {path}: already exists; pass --overwrite to replace it")
    make_folder(os.path.dirname(os.path.abspath(path)))


def claim_output_folder(folder, names, overwrite: bool = False, what: str = "") -> list[str]:
    """Create `folder` now, so that one that cannot be made fails before the work, and refuse to
    replace the files `names` already in it unless `overwrite` (a rebuild from other inputs would
    silently change them). Returns the names found there, for the caller to remove or replace."""
    folder = os.fspath(folder)
    if os.path.exists(folder) and not os.path.isdir(folder):
        raise ValueError(f"{folder}: is a file, not a folder")
    make_folder(folder)
    there = [name for name in names if os.path.lexists(os.path.join(folder, name))]
    if there and not overwrite:
        raise ValueError(f"{folder}: already holds {what or ', '.join(there)}; pass --overwrite to replace it")
    return there


def remove_stale_temp_files(folder, depth: int = 1) -> int:
    """Delete the temporary files that atomic_write leaves when a process is killed mid-write (in
    `folder` and its subfolders down to `depth`); call it when a run starts in `folder`, since
    nothing else would ever remove them (a BERT-base checkpoint's is over a gigabyte). Returns
    the bytes freed."""
    freed = 0
    if not os.path.isdir(folder):
        return 0
    for entry in os.scandir(folder):
        if entry.is_file(follow_symlinks=False) and entry.name.startswith(TEMP_PREFIX):
            try:  # another process (a DDP rank) may be cleaning the same folder
                freed += entry.stat().st_size
                os.unlink(entry.path)
            except FileNotFoundError:
                pass
        elif depth > 0 and entry.is_dir(follow_symlinks=False):
            freed += remove_stale_temp_files(entry.path, depth - 1)
    return freed


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


def read_json(path, expect=dict):
    """A JSON file's value; ValueError naming the file for bytes that are not UTF-8, text that is
    not JSON (with line and column), or a value of the wrong kind (an object, by default)."""
    import json
    with open(path, "rb") as f:
        data = f.read()
    try:
        value = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not valid UTF-8 (byte {data[e.start]:#04x} at offset {e.start})") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}:{e.lineno}: not valid JSON ({e.msg} at column {e.colno})") from None
    if expect is not None and not isinstance(value, expect):
        raise ValueError(f"{path}: expected a JSON {'object' if expect is dict else expect.__name__}, "
                         f"found {type(value).__name__}")
    return value


def read_safetensors(path, check_finite: bool = True) -> dict:
    """The tensors of a .safetensors file; ValueError naming the file for a truncated or corrupt
    file, and (check_finite) naming the first tensor that holds NaN or infinity, since such
    weights would silently turn every output into NaN."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file
    try:
        tensors = load_file(path)
    except (SafetensorError, OSError, ValueError, RuntimeError) as e:
        if isinstance(e, OSError) and not os.path.exists(path):
            raise
        reason = str(e).split("\n")[0] or type(e).__name__
        raise ValueError(f"{path}: not a readable safetensors file, truncated or corrupt ({reason})") from None
    if check_finite:
        check_finite_tensors(tensors, path)
    return tensors


def check_finite_tensors(tensors: dict, path):
    import torch
    for name, tensor in tensors.items():
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            raise ValueError(f"{path}: tensor {name} holds NaN or infinite values; the weights are corrupt")
