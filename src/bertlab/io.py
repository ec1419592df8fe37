"""Small file helpers: writes that never leave a half-written file behind, and the one way bertlab
reads a file it did not write in this process (a config, weights, a checkpoint, a corpus): a
regular file only, sizes and decompressed sizes capped before anything is inflated, JSON of bounded
depth, names that stay inside their folder, and errors that name the file and line."""
import errno
import os
import stat
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


def open_input(path):
    """Open a file we did not write, for reading bytes: a regular file only. A named pipe would block
    forever and a device (/dev/zero) never ends, so both are refused by what the open descriptor
    is (opened non-blocking, so a FIFO cannot hang the open itself), with an error naming the path."""
    path = os.fspath(path)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = "a folder" if stat.S_ISDIR(mode) else "a named pipe" if stat.S_ISFIFO(mode) else \
                "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode) else "not a file"
            raise ValueError(f"{path}: is {kind}, not a regular file")
        if hasattr(os, "O_NONBLOCK"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def input_size(path) -> int:
    """The size of a file we will read, refusing anything that is not a regular file (see open_input)."""
    with open_input(path) as f:
        return os.fstat(f.fileno()).st_size


def read_input(path, max_bytes: int | None = None, what: str = "file") -> bytes:
    """The bytes of a regular file, refused before reading when larger than `max_bytes`."""
    with open_input(path) as f:
        size = os.fstat(f.fileno()).st_size
        if max_bytes is not None and size > max_bytes:
            raise ValueError(f"{path}: {size:,} bytes, more than a {what} may hold ({max_bytes:,})")
        return f.read()


# What a compressed input may inflate to: a corpus file is text, and a 2 MB gzip bomb would otherwise
# become gigabytes before a line of it is read. Raised per call where a caller knows better.
MAX_DECOMPRESSED_BYTES = 1 << 30


def read_compressed(path, max_bytes: int = MAX_DECOMPRESSED_BYTES) -> bytes:
    """The decompressed bytes of a .gz, .lz4 (or plain) file, streamed and stopped as soon as they
    pass `max_bytes`, so a small file that inflates to gigabytes is refused after reading at most
    that much."""
    path = os.fspath(path)
    if path.endswith(".gz"):
        import gzip
        with open_input(path) as raw, gzip.GzipFile(fileobj=raw, mode="rb") as f:
            return _read_capped(f, path, max_bytes)
    if path.endswith(".lz4"):
        try:
            import lz4.frame
        except ImportError:  # Debian's lz4 program, streamed the same way
            return _lz4_program(path, max_bytes)
        with open_input(path) as raw, lz4.frame.LZ4FrameFile(raw, mode="rb") as f:
            return _read_capped(f, path, max_bytes)
    return read_input(path, max_bytes)


def _read_capped(f, path, max_bytes: int) -> bytes:
    chunks, total = [], 0
    try:
        while chunk := f.read(min(1 << 20, max_bytes + 1 - total)):
            total += len(chunk)
            if total > max_bytes:
                raise ValueError(f"{path}: decompresses to more than {max_bytes:,} bytes; refused (a "
                                 "compression bomb, or a file too large to read whole)")
            chunks.append(chunk)
    except (OSError, EOFError, RuntimeError) as e:  # gzip.BadGzipFile is an OSError; lz4's errors RuntimeError
        raise ValueError(f"{path}: not a readable compressed file, truncated or corrupt ({e})") from None
    return b"".join(chunks)


def _lz4_program(path, max_bytes: int) -> bytes:
    import shutil
    import subprocess
    if shutil.which("lz4") is None:
        raise ValueError(f"{path}: reading .lz4 needs the lz4 program or the lz4 Python package")
    with open_input(path) as raw:
        process = subprocess.Popen(["lz4", "-dc"], stdin=raw, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        try:
            data = _read_capped(process.stdout, path, max_bytes)
        except BaseException:
            process.kill()
            raise
        finally:
            process.stdout.close()
            process.wait()
    if process.returncode != 0:
        raise ValueError(f"{path}: not a readable lz4 file, truncated or corrupt")
    return data


def inside(folder, name, what: str = "file") -> str:
    """folder/name for a `name` read from a file (a shard list, a manifest): refused unless it is a
    plain relative path that stays inside `folder`, links resolved, so a crafted list cannot make
    us read (or write) elsewhere on the machine."""
    folder = os.fspath(folder)
    if not isinstance(name, str) or not name or "\0" in name or os.path.isabs(name) or \
            ".." in name.replace("\\", "/").split("/"):
        raise ValueError(f"{folder}: {what} name {name!r} must be a relative path inside the folder")
    path = os.path.join(folder, name)
    real_folder = os.path.realpath(folder)
    if os.path.commonpath([real_folder, os.path.realpath(path)]) != real_folder:
        raise ValueError(f"{path}: {what} {name!r} leads outside {folder} (through a link)")
    return path


def atomic_write_text(path, text: str):
    atomic_write(path, lambda f: f.write(text))


def read_lines(path, allow_empty_file=False) -> list[str]:
    """The lines of a UTF-8 text file ("-" is standard input), split on "\\n" only.

    Raises ValueError naming the file and line for non-UTF-8 bytes, and for an empty file.
    """
    if os.fspath(path) == "-":
        import sys
        return decode_lines(sys.stdin.buffer.read(), "<stdin>", allow_empty_file)
    with open_input(path) as f:
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


# A settings file (config.json, meta.json, task.json) is small and shallow; these bound what a
# crafted one can cost: a 200,000-deep nesting would otherwise exhaust Python's recursion.
MAX_JSON_BYTES = 64 << 20
MAX_JSON_DEPTH = 64


def read_json(path, expect=dict, max_bytes: int = MAX_JSON_BYTES, fields: dict | None = None):
    """A JSON file's value; ValueError naming the file for a file that is not a regular one or is
    too large, bytes that are not UTF-8, text that is not JSON (with line and column), NaN or
    Infinity (not JSON), nesting deeper than MAX_JSON_DEPTH, a value of the wrong kind (an object, by
    default), or a field of the wrong type (`fields`: {name: type or tuple of types}, checked where
    the field is present; see check_types)."""
    data = read_input(path, max_bytes, what="settings file")
    return parse_json(data, path, expect, fields)


def parse_json(data: bytes | str, where, expect=dict, fields: dict | None = None):
    """read_json's checks on JSON text that came from elsewhere (a request body, a tokenizer's file)."""
    import json
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
    except UnicodeDecodeError as e:
        raise ValueError(f"{where}: not valid UTF-8 (byte {data[e.start]:#04x} at offset {e.start})") from None
    depth = json_depth(text)
    if depth > MAX_JSON_DEPTH:
        raise ValueError(f"{where}: JSON nested {depth} deep; at most {MAX_JSON_DEPTH} levels are read")

    def refuse(constant):
        raise ValueError(f"{where}: {constant} is not a JSON number; write a finite number")
    try:
        value = json.loads(text, parse_constant=refuse)
    except json.JSONDecodeError as e:
        raise ValueError(f"{where}:{e.lineno}: not valid JSON ({e.msg} at column {e.colno})") from None
    if expect is not None and not isinstance(value, expect):
        raise ValueError(f"{where}: expected a JSON {'object' if expect is dict else expect.__name__}, "
                         f"found {type(value).__name__}")
    if fields:
        check_types(value, fields, where)
    return value


def json_depth(text: str) -> int:
    """How deeply brackets nest in JSON text, strings skipped: counted before parsing, since the
    parser itself would recurse that deep."""
    import re
    depth = deepest = 0
    for token in re.finditer(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', text):
        c = token.group()
        if c in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif c in "]}":
            depth -= 1
    return deepest


_JSON_TYPE_NAMES = {bool: "true or false", int: "a whole number", float: "a number", str: "a string",
                    list: "a list", dict: "an object", type(None): "null"}


def check_types(values: dict, fields: dict, where):
    """Refuse a field of the wrong JSON type, naming the file, the field and what it must be. An int
    is accepted where a float is (JSON has one kind of number); a bool never counts as a number."""
    for name, kinds in fields.items():
        if name not in values:
            continue
        kinds = kinds if isinstance(kinds, tuple) else (kinds,)
        value = values[name]
        ok = any(isinstance(value, k) and not (isinstance(value, bool) and k in (int, float))
                 or (k is float and isinstance(value, int) and not isinstance(value, bool)) for k in kinds)
        if not ok:
            wanted = " or ".join(_JSON_TYPE_NAMES.get(k, k.__name__) for k in kinds)
            raise ValueError(f"{where + ': ' if where else ''}{name} is {json_type(value)} ({_short(value)}); "
                             f"it must be {wanted}")


def json_type(value) -> str:
    return _JSON_TYPE_NAMES.get(type(value), type(value).__name__)


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def read_safetensors(path, check_finite: bool = True) -> dict:
    """The tensors of a .safetensors file; ValueError naming the file for a truncated or corrupt
    file, and (check_finite) naming the first tensor that holds NaN or infinity, since such
    weights would silently turn every output into NaN."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file
    input_size(path)  # a regular file: a named pipe would block the reader
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


def read_torch_file(path):
    """What torch.save wrote to `path`, read without running code and without inflating anything:
    torch.load(weights_only=True) refuses pickled objects other than tensors and plain data, and the
    zip archive is checked first, from its central directory, so that a small file cannot make the
    loader allocate gigabytes. torch.save stores its records uncompressed, so a record that is
    compressed, or records larger than the file, mean the file was made by something else. The
    pre-1.6 (non-zip) format declares its own storage sizes and is refused: re-save it with torch.save.

    Errors name the file: ValueError for a file that is not such an archive, OSError for one that
    cannot be read."""
    import pickle
    import zipfile
    import torch
    path = os.fspath(path)
    with open_input(path) as f:
        size = os.fstat(f.fileno()).st_size
        if not zipfile.is_zipfile(f):
            raise ValueError(f"{path}: not a readable PyTorch file: truncated or corrupt, or not the zip archive "
                             "torch.save writes (since PyTorch 1.6; re-save an older file with a current torch)")
        try:
            records = zipfile.ZipFile(f).infolist()
        except (zipfile.BadZipFile, OSError, ValueError) as e:
            raise ValueError(f"{path}: not a readable PyTorch file, truncated or corrupt ({e})") from None
    packed = [r.filename for r in records if r.compress_type != zipfile.ZIP_STORED]
    if packed:
        raise ValueError(f"{path}: record {packed[0]} is compressed; torch.save never compresses, and a "
                         "compressed record could inflate far beyond the file's size, so it is refused")
    total = sum(r.file_size for r in records)
    if total > size:
        raise ValueError(f"{path}: its records claim {total:,} bytes, more than the file's {size:,}; the "
                         "archive is corrupt or crafted")
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        if "weights_only" in str(e) or "global" in str(e).lower():
            raise ValueError(f"{path}: refused: the file holds Python objects other than tensors and plain "
                             "data, and loading them could run code (was it written by another program, or "
                             "tampered with?)") from None
        raise ValueError(f"{path}: not a readable PyTorch file ({_first_line(e)})") from None
    except OSError:
        raise
    except Exception as e:  # a truncated or foreign archive: torch's reader raises RuntimeError and others
        raise ValueError(f"{path}: not a readable PyTorch file, truncated or corrupt ({_first_line(e)})") from None


def _first_line(e: Exception) -> str:
    text = str(e).strip()
    return (text.splitlines()[0] if text else type(e).__name__)[:200]


def check_finite_tensors(tensors: dict, path):
    import torch
    for name, tensor in tensors.items():
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            raise ValueError(f"{path}: tensor {name} holds NaN or infinite values; the weights are corrupt")
