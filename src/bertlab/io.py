"""Small file helpers: writes that never leave a half-written file behind, and the one way bertlab
reads a file it did not write in this process (a config, weights, a checkpoint, a corpus): a
regular file only, sizes and decompressed sizes capped before anything is inflated, JSON of bounded
depth, names that stay inside their folder, and errors that name the file and line."""
import errno
import os
import re
import stat
import tempfile


def atomic_write(path, write_fn, mode="w", encoding="utf-8"):
    """Call write_fn(file) on a temporary file beside `path` (bertlab's own name, see TEMP_PREFIX),
    then rename it over `path`. The file gets the permissions a plain open() would give (mkstemp's
    are owner-only). A disk that fills (or a file-size limit) is an OSError that says so and names
    `path`, whatever the writer made of it (torch's zip writer reports a failed write as "unexpected
    pos"); the file at `path` is then the one it replaced, whole."""
    path = os.fspath(path)
    if os.path.isdir(path):
        raise IsADirectoryError(errno.EISDIR, "is a folder, not a file", path)
    text = {} if "b" in mode else {"encoding": encoding, "newline": "\n"}
    if os.path.exists(path) and not os.path.isfile(path):
        # /dev/null, /dev/stdout, a named pipe: written in place. A rename would put a regular file
        # where the device was (as root, `-o /dev/null` once replaced the machine's /dev/null).
        with disk_errors(path) as errors, open(path, mode, **text) as f:
            write_fn(_Recording(f, errors))
        return
    folder = make_folder(os.path.dirname(os.path.abspath(path)))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=_temp_prefix(), suffix="-" + os.path.basename(path))
    try:
        with disk_errors(path) as errors:
            os.chmod(tmp, 0o666 & ~_umask())
            with os.fdopen(fd, mode, **text) as f:
                write_fn(_Recording(f, errors))
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


# Errors of a write that say the disk (or a limit) ran out: reported as such, naming the file.
_FULL = {errno.ENOSPC, errno.EFBIG, getattr(errno, "EDQUOT", errno.ENOSPC)}


class _Recording:
    """A file object that remembers the OSError its write() raised: torch.save's zip writer turns
    it into RuntimeError("unexpected pos ..."), and the disk-full error would be lost."""

    def __init__(self, f, errors: "disk_errors"):
        self._f, self._errors = f, errors

    def write(self, data):
        try:
            return self._f.write(data)
        except OSError as e:
            self._errors.recorded = e
            raise

    def __getattr__(self, name):
        return getattr(self._f, name)

    def __iter__(self):
        return iter(self._f)


class disk_errors:
    """Turns an error raised while writing `path` whose cause is a full disk (an OSError ENOSPC,
    EFBIG or EDQUOT raised by a write, however the writer reported it) into that OSError, naming
    `path`: "[Errno 28] No space left on device: 'OUT/checkpoint.pt'"."""

    def __init__(self, path):
        self.path, self.recorded = path, None

    def __enter__(self):
        return self

    def __exit__(self, kind, error, tb):
        if error is None or not isinstance(error, Exception):
            return False
        cause, seen = None, set()
        for e in (error, self.recorded):
            while e is not None and id(e) not in seen:  # the error itself, or what it hides
                seen.add(id(e))
                if isinstance(e, OSError) and e.errno in _FULL:
                    cause = e
                    break
                e = e.__cause__ or e.__context__
            if cause is not None:
                break
        if cause is None:
            return False
        raise OSError(cause.errno, os.strerror(cause.errno), self.path) from error


# Every temporary file or folder bertlab makes starts with TEMP_PREFIX, then the id of the process
# that made it: `.bertlab-tmp-<pid>-<random>-<name>`. No user file has such a name, and one whose
# process is still running is never taken for a leftover.
TEMP_PREFIX = ".bertlab-tmp-"
_TEMP_NAME = re.compile(re.escape(TEMP_PREFIX) + r"(\d+)-")


def _temp_prefix() -> str:
    return f"{TEMP_PREFIX}{os.getpid()}-"


def temp_folder(beside) -> str:
    """A new, empty temporary folder beside the path `beside`, with bertlab's own temporary name and
    the permissions os.makedirs would give it (mkdtemp's are owner-only)."""
    beside = os.path.abspath(os.fspath(beside))
    folder = tempfile.mkdtemp(dir=make_folder(os.path.dirname(beside)), prefix=_temp_prefix(),
                              suffix="-" + os.path.basename(beside))
    os.chmod(folder, 0o777 & ~_umask())
    return folder


def _running(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True  # another user's process (or a number we cannot ask about): not ours to judge
    return True


def is_stale_temp(name: str) -> bool:
    """Whether `name` is a temporary file of bertlab's whose process has ended (killed mid-write)."""
    match = _TEMP_NAME.match(name)
    return match is not None and not _running(int(match.group(1)))


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


# The file bertlab writes into every output folder it creates (or finds empty): JSON saying which
# command made it. --overwrite replaces outputs only in a folder that has it, so a folder of the
# user's (a home folder, a model downloaded elsewhere) is never emptied by a mistyped --out.
MARKER = ".bertlab"


def is_bertlab_folder(folder) -> bool:
    """Whether bertlab made `folder`: it holds MARKER, a regular file (a link is not ours)."""
    try:
        return stat.S_ISREG(os.lstat(os.path.join(os.fspath(folder), MARKER)).st_mode)
    except OSError:
        return False


def _is_main_process() -> bool:
    """torchrun's rank 0, or a process on its own: under torchrun only it claims a folder (the
    others would see the files it has begun to write as an earlier run's)."""
    try:
        return int(os.environ.get("RANK", "0")) == 0
    except ValueError:
        return True


def check_output_folder_path(folder, flag: str = "") -> str:
    """Refuse an output folder path that is a symbolic link (bertlab never writes through one, nor
    removes what it points to) or a file."""
    folder = os.fspath(folder)
    where = f"{flag} {folder}" if flag else folder
    if os.path.islink(folder):
        raise ValueError(f"{where}: is a symbolic link; bertlab writes only into a real folder (give the "
                         f"folder it points to, {os.path.realpath(folder)}, or another)")
    if os.path.exists(folder) and not os.path.isdir(folder):
        raise ValueError(f"{where}: is a file, not a folder")
    return folder


def output_entries(folder, names) -> list[str]:
    """The entries of `folder` that match `names` (exact names, or fnmatch patterns such as
    "shard-*.npy"), in `names` order; [] for a folder that does not exist."""
    import fnmatch
    try:
        entries = sorted(os.listdir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return []
    found = []
    for name in names:
        for entry in ([name] if name in entries else fnmatch.filter(entries, name) if _is_pattern(name) else []):
            if entry not in found:
                found.append(entry)
    return found


def _is_pattern(name: str) -> bool:
    return any(c in name for c in "*?[")


def foreign_entries(folder) -> list[str]:
    """What `folder` holds besides bertlab's marker and temporary files."""
    try:
        return sorted(e for e in os.listdir(folder) if e != MARKER and not e.startswith(TEMP_PREFIX))
    except (FileNotFoundError, NotADirectoryError):  # (make_folder names the file in the way)
        return []


def claim_output_folder(folder, names, overwrite: bool = False, what: str = "", command: str = "",
                        remove: bool = False) -> list[str]:
    """The one way a bertlab command takes an output folder, before any work:

    - a symbolic link or a file is refused (see check_output_folder_path);
    - the folder is created if need be (one that cannot be made fails now, not after the work);
    - if it holds any of the files the command writes (`names`, exact or fnmatch patterns), it is
      refused unless `overwrite` (a rebuild from other inputs would silently change them);
    - `overwrite` is refused in a folder bertlab did not make (no MARKER) that holds anything at all,
      so it can only ever replace bertlab's own outputs;
    - a folder bertlab creates, or finds empty, gets MARKER, naming `command`.

    With `remove`, the matching entries are deleted (links themselves, never what they point to).
    Returns the entries found, for the caller to remove or replace. Under torchrun only rank 0
    claims; the others only check the path."""
    folder = check_output_folder_path(folder)
    if not _is_main_process():
        return []
    existed = os.path.isdir(folder)
    there = output_entries(folder, names)
    if there and not overwrite:
        raise ValueError(f"{folder}: already holds {what or ', '.join(there)}; pass --overwrite to replace it")
    held = foreign_entries(folder)
    if overwrite and held and not is_bertlab_folder(folder):
        shown = ", ".join(held[:5]) + (", ..." if len(held) > 5 else "")
        raise ValueError(f"{folder}: --overwrite refused: bertlab did not make this folder (it has no {MARKER} "
                         f"file) and it holds {shown}; --overwrite replaces only bertlab's own outputs. "
                         "Move those files away (or delete them) yourself, or choose another folder")
    make_folder(folder)
    if not existed or not held:
        mark_folder(folder, command)
    if remove:
        for name in there:
            remove_entry(os.path.join(folder, name))
    return there


def mark_folder(folder, command: str = ""):
    """Write MARKER into `folder` (bertlab's from now on), unless it is there."""
    if not is_bertlab_folder(folder):
        import json
        atomic_write_text(os.path.join(folder, MARKER), json.dumps({"made_by": "bertlab", "command": command}) + "\n")


def remove_entry(path):
    """Delete a file, a folder (its tree) or a link (the link only, never what it points to)."""
    import shutil
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)
    except FileNotFoundError:
        pass


def remove_stale_temp_files(folder, depth: int = 1) -> int:
    """Delete the temporary files (and folders) that bertlab's writes leave when a process is
    killed mid-write (in `folder` and its subfolders down to `depth`); call it when a run starts in
    `folder`, since nothing else would ever remove them (a BERT-base checkpoint's is over a
    gigabyte). Only bertlab's own temporary names (TEMP_PREFIX and a process id) are removed, and
    only those whose process is no longer running; links are never followed. Returns the bytes
    freed."""
    freed = 0
    if not os.path.isdir(folder) or os.path.islink(folder):
        return 0
    for entry in os.scandir(folder):
        if is_stale_temp(entry.name) and not entry.is_symlink():
            try:  # another process (a DDP rank) may be cleaning the same folder
                if entry.is_dir(follow_symlinks=False):
                    freed += _tree_size(entry.path)
                    remove_entry(entry.path)
                else:
                    freed += entry.stat(follow_symlinks=False).st_size
                    os.unlink(entry.path)
            except FileNotFoundError:
                pass
        elif depth > 0 and entry.is_dir(follow_symlinks=False):
            freed += remove_stale_temp_files(entry.path, depth - 1)
    return freed


def _tree_size(folder) -> int:
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total


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
    """Split UTF-8 bytes into lines on "\\n"; a "\\r" just before it belongs to the line end (a CRLF
    file from Windows), not to the text: a prompt kept it and the model was fed a carriage return,
    and a TSV's last column got it (a label "pos\\r" is another label). A "\\r" elsewhere is text.
    A trailing newline ends the last line."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise ValueError(f"{path}:{line}: not valid UTF-8 (byte {data[e.start]:#04x} at offset {e.start})") from None
    if not text and not allow_empty_file:
        raise ValueError(f"{path}: the file is empty")
    lines = text.replace("\r\n", "\n").split("\n") if "\r\n" in text else text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


# A settings file (config.json, meta.json, task.json) is small and shallow; these bound what a
# crafted one can cost: a 200,000-deep nesting would otherwise exhaust Python's recursion.
MAX_JSON_BYTES = 64 << 20
MAX_JSON_DEPTH = 64


def read_json(path, expect=dict, max_bytes: int = MAX_JSON_BYTES, fields: dict | None = None,
              what: str = "settings file"):
    """A JSON file's value; ValueError naming the file for a file that is not a regular one or is
    too large, bytes that are not UTF-8, text that is not JSON (with line and column), NaN or
    Infinity (not JSON), nesting deeper than MAX_JSON_DEPTH, a value of the wrong kind (an object, by
    default), or a field of the wrong type (`fields`: {name: type or tuple of types}, checked where
    the field is present; see check_types)."""
    data = read_input(path, max_bytes, what=what)
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
