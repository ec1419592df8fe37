"""Sharded checkpoints (`--checkpoint-format sharded`): the model's and optimizer's state written by
torch.distributed.checkpoint (DCP) as each process holds it, so no process gathers the whole state
(under FSDP each writes its own shard), and read back into any process count and sharding (DCP
reshards on load).

Layout: the tensors in OUT/checkpoint.shards/step-N/ (DCP's files: one `.distcp` per writing process
and `.metadata`); OUT/checkpoint.pt, written atomically by the main process once every process has
finished its part, holds the rest as the one-file format does (step, scheduler, data positions,
random generators, the run's settings) with empty model and optimizer entries and the folder's
name under extra["shards"]. So checkpoint.pt is the commit point: a kill before it is replaced
leaves it naming the previous, complete folder; folders it does not name (an interrupted save's,
or older ones) are removed at the next save.
"""
import os
import pickle
import shutil
import warnings

import torch

from .distributed import DistInfo, barrier

FOLDER = "checkpoint.shards"


def _state_dicts(net, optimizer) -> dict:
    """The live model and optimizer state as DCP saves and loads them: sharded tensors (DTensors)
    under FSDP, whole ones otherwise, keyed by parameter name."""
    from torch.distributed.checkpoint.state_dict import get_state_dict
    model_state, optimizer_state = get_state_dict(net, optimizer)
    return {"model": model_state, "optimizer": optimizer_state}


def save(net, optimizer, out: str, step: int, info: DistInfo) -> str:
    """Every process writes its part of the model and optimizer under OUT/checkpoint.shards/step-N;
    returns that folder's name relative to OUT, for checkpoint.pt to record."""
    import torch.distributed.checkpoint as dcp
    name = os.path.join(FOLDER, f"step-{step:09d}")
    folder = os.path.join(out, name)
    if info.is_main:
        shutil.rmtree(folder, ignore_errors=True)  # a save of this step that was interrupted
    barrier(info)
    with warnings.catch_warnings():  # one process: DCP says it assumes so, as no_dist asks
        warnings.filterwarnings("ignore", message="torch.distributed is disabled")
        dcp.save(_state_dicts(net, optimizer), checkpoint_id=folder, no_dist=not info.enabled)
    return name


def remove_unreferenced(out: str, keep: str):
    """After checkpoint.pt names `keep`: remove every other folder under OUT/checkpoint.shards."""
    root = os.path.join(out, FOLDER)
    for entry in os.listdir(root) if os.path.isdir(root) else ():
        if os.path.join(FOLDER, entry) != keep:
            shutil.rmtree(os.path.join(root, entry), ignore_errors=True)


class _Metadata(pickle.Unpickler):
    """DCP's `.metadata` is a pickle, and a run folder is something people share: this unpickler
    builds only DCP's own metadata records and the torch and builtin values inside them, so a
    crafted file cannot run code (DCP's own reader calls pickle.load)."""
    ALLOWED = {("builtins", n) for n in ("set", "frozenset", "tuple", "list", "dict", "int", "float", "str", "bytes")}
    ALLOWED |= {("collections", "OrderedDict"), ("torch", "Size"), ("torch", "device"), ("torch", "dtype"),
                ("torch", "layout"), ("torch", "memory_format"), ("torch.serialization", "_get_layout")}
    ALLOWED |= {("pathlib", n) for n in ("Path", "PosixPath", "PurePosixPath", "WindowsPath", "PureWindowsPath")}

    def find_class(self, module, name):
        if module.startswith("torch.distributed.checkpoint.") or (module, name) in self.ALLOWED or \
                (module == "torch" and isinstance(getattr(torch, name, None), (torch.dtype, torch.layout,
                                                                                torch.memory_format))):
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"{module}.{name} is not part of a checkpoint's metadata")


def _reader(folder):
    from torch.distributed.checkpoint import FileSystemReader
    from torch.distributed.checkpoint.metadata import Metadata, StorageMeta

    class Reader(FileSystemReader):
        def read_metadata(self, *args, **kwargs) -> Metadata:
            rank = kwargs.get("rank")  # DCP first asks for a rank's own metadata, which we never write
            with open(os.path.join(self.path, ".metadata" if rank is None else f"__{rank}.metadata"), "rb") as f:
                metadata = _Metadata(f).load()
            if not isinstance(metadata, Metadata):
                raise ValueError(f"{self.path}/.metadata: not a checkpoint's metadata")
            if getattr(metadata, "storage_meta", None) is None:
                metadata.storage_meta = StorageMeta()
            metadata.storage_meta.load_id = self.load_id
            return metadata
    return Reader(folder)


def _planner():
    from torch.distributed.checkpoint import DefaultLoadPlanner

    class Planner(DefaultLoadPlanner):
        def load_bytes(self, read_item, value):
            # DCP's DefaultLoadPlanner unpickles these entries with weights_only=False; here only
            # tensors and plain data are built, so a shared checkpoint cannot run code
            obj = torch.load(value, weights_only=True)
            if self.flatten_state_dict:
                from torch.distributed.checkpoint._traverse import set_element  # DCP's own helper
                set_element(self.original_state_dict, self.mappings[read_item.dest_index.fqn], obj)
            else:
                self.state_dict[read_item.dest_index.fqn] = obj
    return Planner()


def _checked_folder(out: str, name, path) -> str:
    """The folder checkpoint.pt (`path`) names, once it is known to lie under OUT/checkpoint.shards
    and to hold metadata that unpickles as DCP's own (read here, so that a crafted file is named as
    such and not inside DCP's errors)."""
    if not isinstance(name, str) or os.path.isabs(name) or ".." in name.split(os.sep) \
            or not name.startswith(FOLDER + os.sep):
        raise ValueError(f"{path}: extra.shards must name a folder under OUT/{FOLDER}, not {name!r}")
    folder = os.path.join(out, name)
    if not os.path.exists(os.path.join(folder, ".metadata")):
        raise FileNotFoundError(f"{folder}: the sharded checkpoint {path} names is missing or incomplete")
    try:
        _reader(folder).read_metadata()
    except (pickle.UnpicklingError, EOFError, AttributeError, ImportError, IndexError, TypeError) as e:
        raise ValueError(f"{folder}/.metadata: not a checkpoint's metadata ({e})") from None
    return folder


def load(net, optimizer, out: str, name, path) -> None:
    """Read the folder checkpoint.pt names into this process's model and optimizer (its shard
    under FSDP, whatever process count wrote it)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import set_state_dict
    folder = _checked_folder(out, name, path)
    state = _state_dicts(net, optimizer)
    try:
        with warnings.catch_warnings():  # one process: DCP says it assumes so, as no_dist asks
            warnings.filterwarnings("ignore", message="torch.distributed is disabled")
            dcp.load(state, storage_reader=_reader(folder), planner=_planner(),
                     no_dist=not torch.distributed.is_initialized())
    except Exception as e:  # DCP's errors (a missing key, another shape) wrapped by its own exception type
        raise ValueError(f"{folder}: does not fit this run's model and optimizer ({str(e).splitlines()[0][:300]})") from None
    set_state_dict(net, optimizer, model_state_dict=state["model"], optim_state_dict=state["optimizer"])
    for name, p in getattr(net, "module", net).named_parameters():
        local = p.to_local() if hasattr(p, "to_local") else p
        if not torch.isfinite(local).all():
            raise ValueError(f"{folder}: parameter {name} holds NaN or infinity")


def load_model_only(model, out: str, name, path):
    """The model part of the sharded checkpoint `name` (checkpoint.pt's extra["shards"]) into an
    ordinary `model` in this one process (bertlab export --hf): DCP gathers the shards of any
    process count into the whole tensors."""
    import torch.distributed.checkpoint as dcp
    folder = _checked_folder(out, name, path)
    state = {"model": model.state_dict()}
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="torch.distributed is disabled")
            dcp.load(state, storage_reader=_reader(folder), planner=_planner(), no_dist=True)
    except Exception as e:  # noqa: BLE001 - DCP's errors come wrapped in its own exception type
        raise ValueError(f"{folder}: does not fit the model {path} describes ({str(e).splitlines()[0][:300]})") from None
    model.load_state_dict(state["model"])
