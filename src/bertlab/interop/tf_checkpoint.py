"""TensorFlow checkpoints read without TensorFlow: the tensor bundle (format V2) that
tf.train.Saver writes and google-research/bert's checkpoints come in.

A checkpoint PREFIX is an index and one or more data shards:

    PREFIX.index                  a sorted table: tensor name -> BundleEntryProto
    PREFIX.data-00000-of-0000N    tensor bytes, one tensor after another, in the header's byte order

The index is a LevelDB-format table. It ends in a 48-byte footer: the block handles (offset and
size, two varints each) of the meta-index block (empty in a bundle) and of the index block, zero
padding, and a magic number. The index block maps the last key of each data block to that block's
handle. A block is a run of entries -- varints (key bytes shared with the previous key, new key
bytes, value bytes), then the new key bytes and the value -- followed by the restart offsets
(uint32 each) and their count; after the block come its compression type (TensorFlow writes 0,
none) and the masked CRC-32C of block and type byte. The key "" holds the BundleHeaderProto
(number of shards, byte order); every other key is a tensor's name, its value a BundleEntryProto
(dtype, shape, shard, offset, size, masked CRC-32C of the bytes). Both are protocol buffers,
decoded here from their wire format.
"""
import os
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch

from ..io import open_input

TABLE_MAGIC = 0xDB4775248B80FB57
FOOTER_SIZE = 48  # two block handles of at most 20 bytes, padded, then the 8-byte magic
BLOCK_TRAILER_SIZE = 5  # compression type + masked CRC-32C
BUNDLE_VERSION = 1  # the format version this reader knows; a bundle may demand a newer reader

# TensorFlow's DataType numbers (types.proto) -> (torch dtype, numpy type of the stored bytes).
# bfloat16 is read as 16-bit integers, numpy having no bfloat16, and viewed as bfloat16 in torch.
DTYPES = {1: (torch.float32, "f4"), 2: (torch.float64, "f8"), 3: (torch.int32, "i4"), 4: (torch.uint8, "u1"),
          5: (torch.int16, "i2"), 6: (torch.int8, "i1"), 9: (torch.int64, "i8"), 10: (torch.bool, "b1"),
          14: (torch.bfloat16, "i2"), 19: (torch.float16, "f2")}
UNSUPPORTED = {7: "string", 8: "complex64", 11: "qint8", 12: "quint8", 13: "qint32", 15: "qint16", 16: "quint16",
               17: "uint16", 18: "complex128", 20: "resource", 21: "variant", 22: "uint32", 23: "uint64"}


@dataclass(frozen=True)
class BundleEntry:
    """Where a tensor's bytes are, as the index says."""
    dtype: int  # TensorFlow's DataType number
    shape: tuple
    shard: int
    offset: int
    size: int
    crc32c: int  # masked, as stored
    sliced: bool  # a partitioned variable, stored as slices under other keys


class TFCheckpoint:
    """The tensors of the checkpoint PREFIX (the path without .index), read on demand. Any problem
    with the files (missing, truncated, corrupt, of a type not read here) is an error naming the file."""

    def __init__(self, prefix):
        self.prefix = os.fspath(prefix)
        self.index = self.prefix + ".index"
        if not os.path.isfile(self.index):
            raise FileNotFoundError(f"{self.index}: no such file (a TensorFlow checkpoint PREFIX is PREFIX.index "
                                    "and PREFIX.data-00000-of-00001 files)")
        header, self.entries = None, {}
        for key, value in read_table(self.index):
            if key == b"":
                header = value
            else:
                name = key.decode("utf-8", "backslashreplace")
                self.entries[name] = _entry(value, f"{self.index}: tensor {name}")
        if header is None:
            raise ValueError(f"{self.index}: a table without the bundle header (key \"\"): not a TensorFlow checkpoint")
        self.num_shards, self.byte_order = _header(header, self.index)
        self._check_shards()

    def data_file(self, shard: int) -> str:
        return f"{self.prefix}.data-{shard:05d}-of-{self.num_shards:05d}"

    def _check_shards(self):
        """Every entry's bytes lie inside its shard: a missing or truncated data file fails here,
        naming the file, before any tensor is read."""
        sizes = {}
        for name, e in self.entries.items():
            if not 0 <= e.shard < self.num_shards:
                raise ValueError(f"{self.index}: tensor {name} is in shard {e.shard}, but the header says "
                                 f"{self.num_shards} shard(s); the index is corrupt")
            path = self.data_file(e.shard)
            if path not in sizes:
                if not os.path.isfile(path):
                    raise FileNotFoundError(f"{path}: no such file; the checkpoint {self.prefix} needs its "
                                            f"{self.num_shards} data file(s) beside {os.path.basename(self.index)}")
                sizes[path] = os.path.getsize(path)
            if e.offset < 0 or e.size < 0 or e.offset + e.size > sizes[path]:
                raise ValueError(f"{path}: {sizes[path]} bytes, but tensor {name} lies at bytes {e.offset} to "
                                 f"{e.offset + e.size}: the file is truncated")

    def names(self) -> list[str]:
        return list(self.entries)  # the table is sorted by name

    def __contains__(self, name) -> bool:
        return name in self.entries

    def shape(self, name) -> tuple:
        return self.entries[name].shape

    def tensor(self, name) -> torch.Tensor:
        """The tensor `name` as TensorFlow stored it (dtype and shape), its checksum verified."""
        e = self.entries[name]
        path, where = self.data_file(e.shard), f"{self.index}: tensor {name}"
        if e.sliced:
            raise ValueError(f"{where} is a partitioned variable (saved in slices); this reader does not join slices")
        if e.dtype not in DTYPES:
            kind = UNSUPPORTED.get(e.dtype, f"number {e.dtype}")
            raise ValueError(f"{where} has TensorFlow dtype {kind}, which this reader does not read "
                             f"(it reads {', '.join(str(t).replace('torch.', '') for t, _ in DTYPES.values())})")
        dtype, code = DTYPES[e.dtype]
        count = int(np.prod(e.shape, dtype=np.int64))
        if count * np.dtype(code).itemsize != e.size:
            raise ValueError(f"{where}: shape {list(e.shape)} of {dtype} needs {count * np.dtype(code).itemsize} "
                             f"bytes, the index says {e.size}; the index is corrupt")
        data = bytearray(e.size)  # within the data file: the constructor checked every tensor's extent
        with open_input(path) as f:
            f.seek(e.offset)
            if f.readinto(data) != e.size:
                raise ValueError(f"{path}: ended inside tensor {name}: the file is truncated")
        if crc32c(data) != unmask(e.crc32c):
            raise ValueError(f"{path}: the bytes of tensor {name} do not match their checksum; the file is corrupt")
        array = np.frombuffer(data, dtype=np.dtype(code).newbyteorder(self.byte_order))
        if self.byte_order == ">":
            array = array.astype(np.dtype(code))  # to this machine's order
        tensor = torch.from_numpy(array)
        return (tensor.view(dtype) if dtype is torch.bfloat16 else tensor).reshape(e.shape)


# --- the LevelDB table of the .index file ---------------------------------------------------------
def read_table(path) -> list[tuple[bytes, bytes]]:
    """Every (key, value) of the table in `path`, in key order."""
    with open_input(path) as f:
        data = f.read()
    if len(data) < FOOTER_SIZE or int.from_bytes(data[-8:], "little") != TABLE_MAGIC:
        raise ValueError(f"{path}: not a TensorFlow checkpoint index: it does not end in the table magic number "
                         f"({len(data)} bytes; truncated, or another kind of file)")
    footer = data[-FOOTER_SIZE:]
    _, pos = _handle(footer, 0, path)  # the meta-index block: a bundle keeps nothing in it
    index, _ = _handle(footer, pos, path)
    entries = []
    for _, value in _block_entries(_block(data, index, path), path):
        entries += _block_entries(_block(data, _handle(value, 0, path)[0], path), path)
    return entries


def _handle(buf, pos, path):
    """((offset, size), position after) of a block handle at `pos`."""
    offset, pos = varint(buf, pos, path)
    size, pos = varint(buf, pos, path)
    return (offset, size), pos


def _block(data, handle, path) -> bytes:
    offset, size = handle
    if offset + size + BLOCK_TRAILER_SIZE > len(data) - FOOTER_SIZE:
        raise ValueError(f"{path}: a block at bytes {offset} to {offset + size} runs past the end of the table; "
                         "the file is truncated or corrupt")
    compression = data[offset + size]
    stored = int.from_bytes(data[offset + size + 1:offset + size + BLOCK_TRAILER_SIZE], "little")
    if crc32c(data[offset:offset + size + 1]) != unmask(stored):
        raise ValueError(f"{path}: the block at byte {offset} does not match its checksum; the file is corrupt")
    if compression != 0:
        kind = "snappy-compressed" if compression == 1 else f"compressed by method {compression}"
        raise ValueError(f"{path}: a {kind} block; TensorFlow writes checkpoint indexes uncompressed, and this "
                         "reader reads only those")
    return data[offset:offset + size]


def _block_entries(block, path) -> list[tuple[bytes, bytes]]:
    """The (key, value) pairs of a block, each key rebuilt from the bytes it shares with the previous one."""
    restarts = int.from_bytes(block[-4:], "little") if len(block) >= 4 else -1
    end = len(block) - 4 - 4 * restarts
    if restarts < 0 or end < 0:
        raise ValueError(f"{path}: a table block too short for its restart points; the file is corrupt")
    pos, key, out = 0, b"", []
    while pos < end:
        shared, pos = varint(block, pos, path)
        fresh, pos = varint(block, pos, path)
        length, pos = varint(block, pos, path)
        if shared > len(key) or pos + fresh + length > end:
            raise ValueError(f"{path}: a table entry runs past its block; the file is corrupt")
        key = key[:shared] + block[pos:pos + fresh]
        out.append((key, block[pos + fresh:pos + fresh + length]))
        pos += fresh + length
    return out


# --- protocol buffers, from the wire format -------------------------------------------------------
def varint(buf, pos, where) -> tuple[int, int]:
    """(value, position after) of the base-128 varint at `pos`."""
    value = shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise ValueError(f"{where}: a truncated or overlong varint; the file is corrupt")
        byte = buf[pos]
        value |= (byte & 0x7F) << shift
        pos, shift = pos + 1, shift + 7
        if byte < 0x80:
            return value, pos


def fields(buf, where):
    """(field number, value) of each field of a protocol buffer message: an int for varint and
    fixed-width fields, bytes for length-delimited ones (strings and sub-messages)."""
    pos = 0
    while pos < len(buf):
        key, pos = varint(buf, pos, where)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = varint(buf, pos, where)
        elif wire in (1, 5):  # fixed64, fixed32
            width = 8 if wire == 1 else 4
            value, pos = int.from_bytes(buf[pos:pos + width], "little"), pos + width
        elif wire == 2:
            length, pos = varint(buf, pos, where)
            value, pos = bytes(buf[pos:pos + length]), pos + length
        else:
            raise ValueError(f"{where}: protocol buffer wire type {wire}, which no bundle message uses; corrupt")
        if pos > len(buf):
            raise ValueError(f"{where}: a protocol buffer field runs past its message; the file is corrupt")
        yield number, value


def _int64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _header(buf, where) -> tuple[int, str]:
    """(number of shards, numpy byte order) of a BundleHeaderProto."""
    shards, big_endian, min_consumer = 1, False, 0
    for number, value in fields(buf, where):
        if number == 1:
            shards = value
        elif number == 2:
            big_endian = value == 1
        elif number == 3:  # VersionDef: producer (1), min_consumer (2), bad_consumers (3)
            min_consumer = dict((n, v) for n, v in fields(value, where) if n != 3).get(2, 0)
    if min_consumer > BUNDLE_VERSION:
        raise ValueError(f"{where}: written in tensor-bundle version {min_consumer} or later; this reader knows "
                         f"version {BUNDLE_VERSION}")
    if shards < 1:
        raise ValueError(f"{where}: the bundle header says {shards} shards; the index is corrupt")
    return shards, ">" if big_endian else "<"


def _entry(buf, where) -> BundleEntry:
    values = {"dtype": 0, "shape": (), "shard": 0, "offset": 0, "size": 0, "crc32c": 0, "sliced": False}
    names = {1: "dtype", 3: "shard", 4: "offset", 5: "size", 6: "crc32c"}
    for number, value in fields(buf, where):
        if number in names:
            values[names[number]] = _int64(value)
        elif number == 2:
            values["shape"] = _shape(value, where)
        elif number == 7:
            values["sliced"] = True
    return BundleEntry(**values)


def _shape(buf, where) -> tuple:
    """The dimensions of a TensorShapeProto (dim = 2, each a message whose field 1 is the size)."""
    dims = []
    for number, value in fields(buf, where):
        if number == 2:
            dims.append(_int64(dict(fields(value, where)).get(1, 0)))
        elif number == 3 and value:
            raise ValueError(f"{where}: a shape of unknown rank; a saved tensor has a known shape")
    if any(d < 0 for d in dims):
        raise ValueError(f"{where}: shape {dims} has an unknown dimension; a saved tensor has a known shape")
    return tuple(dims)


# --- CRC-32C (Castagnoli), as LevelDB and the bundle store it ---------------------------------------
@lru_cache(maxsize=None)
def _table(bits: int) -> np.ndarray:
    """T[i]: register i advanced over `bits` zero bits of the reflected CRC-32C (polynomial 0x82F63B78),
    so that one step of the table-driven CRC over a `bits`-bit chunk is r = T[(r ^ chunk) & mask] ^ (r >> bits)."""
    table = np.arange(1 << bits, dtype=np.uint32)
    for _ in range(bits):
        table = np.where(table & 1, (table >> 1) ^ np.uint32(0x82F63B78), table >> 1).astype(np.uint32)
    return table


@lru_cache(maxsize=None)
def _byte_table() -> tuple:
    return tuple(_table(8).tolist())


@lru_cache(maxsize=None)
def _zeros_shift(lane: int) -> tuple:
    """Four 256-entry tables that advance a register over `lane` zero bytes: the register is linear
    in its bits, so the result is the XOR of one entry per register byte."""
    register = (np.arange(256, dtype=np.uint32)[None, :] << (8 * np.arange(4, dtype=np.uint32)[:, None])).ravel()
    table = _table(8)
    for _ in range(lane):
        register = table[register & 0xFF] ^ (register >> 8)
    return tuple(register.reshape(4, 256).tolist())


def crc32c(data) -> int:
    """CRC-32C of `data`, fast enough for a BERT-large checkpoint without a C extension: the bytes are
    cut into lanes whose registers (each started at zero) numpy advances side by side, 16 bits a
    step; chaining them is then one step per lane, since the register after a lane is the one
    before it advanced over as many zero bytes, XOR the lane's own."""
    data = memoryview(data).cast("B")
    lane = 256 if len(data) < 1 << 22 else 4096  # few lanes to chain, few numpy steps, either way
    lanes = len(data) // lane
    register = 0xFFFFFFFF
    if lanes:
        words = np.frombuffer(data[:lanes * lane], dtype="<u2").reshape(lanes, lane // 2).T.copy()
        own, table = np.zeros(lanes, dtype=np.uint32), _table(16)
        for column in words:
            own = table[(own ^ column) & 0xFFFF] ^ (own >> 16)
        s0, s1, s2, s3 = _zeros_shift(lane)
        for value in own.tolist():
            register = (s0[register & 0xFF] ^ s1[(register >> 8) & 0xFF] ^ s2[(register >> 16) & 0xFF]
                        ^ s3[register >> 24] ^ value)
    table = _byte_table()
    for byte in data[lanes * lane:]:
        register = table[(register ^ byte) & 0xFF] ^ (register >> 8)
    return register ^ 0xFFFFFFFF


def unmask(masked: int) -> int:
    """LevelDB stores a CRC rotated and offset ("masked"), so that the CRC of data holding CRCs stays sensible."""
    rotated = (masked - 0xA282EAD8) & 0xFFFFFFFF
    return ((rotated >> 17) | (rotated << 15)) & 0xFFFFFFFF
