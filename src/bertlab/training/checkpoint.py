"""Training checkpoints that resume exactly: model, optimizer, scheduler, every random number
generator and the data position, written atomically so a crash never leaves half a file.

A checkpoint holds only tensors and plain Python data (numbers, strings, lists, tuples, dicts) and
is read with torch.load(weights_only=True): a run folder is something people share, and
unpickling anything else could run code hidden in the file."""
import math
import os
import random
import sys

import numpy as np
import torch

from ..io import (atomic_write, check_output_folder_path, check_types, claim_output_folder, json_type, output_entries,
                  read_torch_file, remove_stale_temp_files)
from . import elastic
from .distributed import is_main_process


def rng_states() -> dict:
    _, keys, position, has_gauss, cached_gaussian = np.random.get_state()  # ("MT19937", uint32 array, ...)
    # int64, not uint32: torch's uint32 tensors do not survive all_gather_object (DDP's gather)
    numpy_state = {"keys": torch.from_numpy(keys.astype(np.int64)), "position": int(position), "has_gauss": int(has_gauss),
                   "cached_gaussian": float(cached_gaussian)}
    states = {"python": random.getstate(), "numpy": numpy_state, "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def set_rng_states(states: dict):
    random.setstate(states["python"])
    n = states["numpy"]
    np.random.set_state(("MT19937", n["keys"].numpy().astype(np.uint32), n["position"], n["has_gauss"], n["cached_gaussian"]))
    torch.set_rng_state(states["torch"])
    if "cuda" in states and torch.cuda.is_available():
        try:  # torch checks a CUDA state's offset only here (check_rng_states knows its size)
            torch.cuda.set_rng_state_all(states["cuda"])
        except RuntimeError as e:
            raise ValueError(f"the CUDA generator states are not valid ({_first_line(e)})") from None


def write_checkpoint(path, state: dict):
    """Write `state` (the keys read_checkpoint requires) atomically: a kill mid-write leaves the
    previous checkpoint whole."""
    atomic_write(path, lambda f: torch.save(state, f), mode="wb")


def read_checkpoint(path) -> dict:
    """The checkpoint's dict, read without running code: weights_only=True refuses any pickled
    object other than tensors and plain data, so a crafted file's payload never executes."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no checkpoint to resume from")
    state = read_torch_file(path)  # sizes checked before anything is inflated; no code runs
    missing = [k for k in ("model", "optimizer", "scheduler", "step", "rng", "data", "extra")
               if not isinstance(state, dict) or k not in state]
    if missing:
        raise ValueError(f"{path}: not a bertlab training checkpoint (no {', '.join(missing)})")
    check_types(state, CHECKPOINT_ENTRIES, path)
    return state


CHECKPOINT_ENTRIES = {"model": dict, "optimizer": dict, "scheduler": dict, "step": int, "rng": dict, "data": list,
                      "extra": dict}


# What every training run (engine.fit) writes into OUT; a command adds its own (check_resume's `outputs`).
RUN_OUTPUTS = ("checkpoint.pt", "checkpoint.shards", "model", "summary.json", "metrics.jsonl", "curves.png")


def check_resume(out, resume: bool, overwrite: bool, outputs=(), command: str = "", remove: bool = False) -> bool:
    """The CLI rule for a run folder: --resume needs OUT/checkpoint.pt; a folder that has one is
    neither started over silently nor resumed without being asked (--resume or --overwrite); a
    folder holding a finished run (anything a run writes: RUN_OUTPUTS and the command's `outputs`,
    not only a checkpoint, which a finished run deletes) is replaced only with --overwrite, and only
    in a folder bertlab made (io.claim_output_folder, which also refuses a link and marks a new
    folder). `remove`: delete the earlier run's files now (else the new run replaces them as it
    writes). Removes the temporary files of an interrupted write (bertlab's own, of ended processes).

    A worker that torchrun's agent restarted, in a folder its launch claimed (training/elastic.py),
    continues from the checkpoint, or starts again where none was written yet, unasked. Returns
    whether the run resumes."""
    check_output_folder_path(out)
    has_checkpoint = os.path.exists(os.path.join(out, "checkpoint.pt"))
    if elastic.claimed_by_this_launch(out):
        resume, overwrite = has_checkpoint, True
        if is_main_process():
            print(f"{out}: restart {elastic.restart_count()} by torchrun's agent: "
                  + ("resuming from checkpoint.pt" if has_checkpoint else "starting again (no checkpoint was written)"),
                  file=sys.stderr)
    if resume and not has_checkpoint:
        raise FileNotFoundError(f"{out}: no checkpoint.pt to --resume from")
    if has_checkpoint and not (resume or overwrite):
        raise ValueError(f"{out} holds a training checkpoint: pass --resume to continue it or "
                         "--overwrite to start again (replacing it)")
    if not resume:
        names = tuple(dict.fromkeys(RUN_OUTPUTS + tuple(outputs)))
        found = output_entries(out, names)
        claim_output_folder(out, names, overwrite, what=f"an earlier run ({', '.join(found)})",
                            command=command, remove=remove)
    elastic.mark_claimed(out, is_main_process())
    if is_main_process():
        freed = remove_stale_temp_files(out)
        if freed:
            print(f"{out}: removed temporary files ({freed / 1e6:,.1f} MB) left by an interrupted write",
                  file=sys.stderr)
    return resume


# ---- a checkpoint checked against the run that resumes it ----------------------------------------
# A checkpoint is a file someone may hand us. Loaded unchecked, an optimizer moment of the wrong
# shape made the fused AdamW kernel write out of bounds (a segfault), a numpy generator position
# past its 624 keys read out of bounds, a float64 or integer tensor was cast without a word, and a
# step of 10**12 was reported as a finished run. So every entry is checked against what it will be
# loaded into before anything is loaded, and an error names the file and the entry.

def check_state_against(model, optimizer, state: dict, path, *, scheduler=None, scaler=None,
                        total_steps: int | None = None, rank: int = 0, whole=None, tensors: bool = True):
    """Check read_checkpoint's `state` against the run that will load it, or raise a ValueError naming
    `path` and the entry: the step (at most `total_steps`) and the counters in range; every model
    tensor's name, shape and dtype, finite; the optimizer's groups, settings and per-parameter state
    against `optimizer`'s parameters; the scheduler's and GradScaler's state like this run's own; the
    random generator states of process `rank` well-formed. `whole`: the module whose state_dict lists
    the model's entries where `model` is sharded (FSDP's skeleton); a sharded parameter reports its
    whole shape, so the optimizer is checked against `model` either way. `tensors` False: the model and
    optimizer are in a sharded checkpoint's folder (training/sharded_checkpoint.py checks them)."""
    step = check_counters(state, path, total_steps)
    if tensors:
        check_model_state(whole if whole is not None else model, state["model"], f"{path}: model")
        check_optimizer_state(model, optimizer, state["optimizer"], f"{path}: optimizer", step)
    if scheduler is not None:
        check_scheduler_state(scheduler, state["scheduler"], f"{path}: scheduler state", step)
    if scaler is not None and state["extra"].get("scaler"):
        check_like(state["extra"]["scaler"], scaler.state_dict(), f"{path}: the fp16 loss scaler's state")
    ranks = state["data"]
    process = expect_fields(ranks[rank] if 0 <= rank < len(ranks) else None, {"objective": dict, "rng": dict},
                            f"{path}: data of process {rank}")
    check_rng_states(process["rng"], f"{path}: random generator states of process {rank}")


def check_counters(state: dict, path, total_steps: int | None = None) -> int:
    """The checkpoint's step (0 to `total_steps`), and the engine's counters in "extra" in range."""
    step = check_count(state["step"], f"{path}: step", whole=True)
    if total_steps is not None and step > total_steps:
        raise ValueError(f"{path}: step {step:,} is past this run's {total_steps:,} steps; resume with at least "
                         f"as many (--max-steps) or start again with --overwrite")
    where = f"{path}: extra"
    extra = expect_fields(state["extra"], {"units": float, "train_seconds": float}, where)
    check_types(extra, {"flops": (float, type(None)), "compile": (list, tuple), "last_eval": (list, tuple, type(None)),
                        "scaler": (dict, type(None)), "shards": (str, type(None))}, where)
    for name in ("units", "train_seconds", "flops"):
        if extra.get(name) is not None:
            check_count(extra[name], f"{where}: {name}")
    compiled = extra.get("compile", (0.0, 0.0, 0.0))
    if len(compiled) != 3:
        raise ValueError(f"{where}: compile holds {len(compiled)} numbers; it must be (seconds, units, FLOPs)")
    for i, value in enumerate(compiled):
        check_count(value, f"{where}: compile[{i}]")
    last_eval = extra.get("last_eval")
    if last_eval is not None:
        if len(last_eval) != 2 or not isinstance(last_eval[1], dict):
            raise ValueError(f"{where}: last_eval must be [step, metrics]")
        check_count(last_eval[0], f"{where}: last_eval's step", whole=True, most=step)
    return step


def check_model_state(model, saved, where):
    """`saved` holds exactly the entries of `model`'s state_dict, each a tensor of the model's shape
    and dtype with finite values (load_state_dict would cast another dtype without a word)."""
    if not isinstance(saved, dict):
        raise ValueError(f"{where}: the weights are {_what(saved)}, not a dict of tensors")
    expected = model.state_dict()
    missing = [name for name in expected if name not in saved]
    if missing:
        raise ValueError(f"{where} entry {missing[0]} is missing{_more(missing)}; the checkpoint holds another "
                         "model's weights, or was cut or edited")
    unknown = [name for name in saved if name not in expected]
    if unknown:
        raise ValueError(f"{where} entry {_name(unknown[0])} is not one of the model's{_more(unknown)}")
    for name, now in expected.items():
        _check_tensor(saved[name], now, f"{where} entry {name}", "the model's")


def check_optimizer_state(model, optimizer, saved, where, step: int):
    """`saved` (optimizer.state_dict()'s form) fits `optimizer`: as many groups, each numbering its
    parameters as this optimizer does, with its settings; per parameter, the state this optimizer
    keeps, every tensor of the parameter's shape and dtype and a step from 0 to `step`."""
    expect_fields(saved, {"state": dict, "param_groups": list}, where)
    groups = optimizer.param_groups
    if len(saved["param_groups"]) != len(groups):
        raise ValueError(f"{where}: {len(saved['param_groups'])} parameter groups, but this run's optimizer has "
                         f"{len(groups)}")
    first = 0
    for g, (group, now) in enumerate(zip(saved["param_groups"], groups)):
        _check_group(group, now, first, f"{where} group {g}")
        first += len(now["params"])
    params = [(p, group) for group in groups for p in group["params"]]
    names = {id(p): name for name, p in model.named_parameters()}
    storages = set()
    for index, entry in saved["state"].items():
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(params):
            raise ValueError(f"{where}: state for parameter {_short(index)}, but the optimizer has parameters "
                             f"0 to {len(params) - 1}")
        p, group = params[index]
        what = f"{where} state for parameter {index} ({names.get(id(p), 'unnamed')})"
        _check_parameter_state(entry, p, _state_keys(optimizer, group), _builtin(optimizer), what, step)
        for key, value in entry.items():  # in-place updates of tensors that share memory would mix them
            if key != "step" and value.numel():
                if value.untyped_storage().data_ptr() in storages:
                    raise ValueError(f"{what}: {_name(key)} shares its memory with another state tensor")
                storages.add(value.untyped_storage().data_ptr())


def _check_group(group, now: dict, first: int, what):
    if not isinstance(group, dict):
        raise ValueError(f"{what} is {_what(group)}, not a dict")
    count, params = len(now["params"]), group.get("params")
    numbered = isinstance(params, list) and all(type(i) is int for i in params)  # no tensor in an == below
    if not (numbered and params == list(range(first, first + count))):
        raise ValueError(f"{what}: its parameters are {_short(params)}; this run's optimizer numbers them "
                         f"{first} to {first + count - 1} ({count} parameters)")
    keys, saved_keys = set(now) - {"params"}, set(group) - {"params"}
    if keys - saved_keys:
        raise ValueError(f"{what} has no {sorted(keys - saved_keys)[0]} setting")
    if saved_keys - keys:
        raise ValueError(f"{what} has a setting {_short(sorted(map(str, saved_keys - keys))[0])} that this run's "
                         "optimizer does not have")
    for key in sorted(keys):
        _check_setting(group[key], now[key], f"{what}: {key}")
        if key == "betas" and not all(b < 1 for b in group[key]):  # 1 would divide by 1 - beta**t = 0
            raise ValueError(f"{what}: betas {group[key]!r} must be below 1")


def _check_setting(value, now, what):
    """An optimizer setting: the implementation's switches (True, False, None, a name) as this run's
    optimizer has them, since the code chooses them (a fused kernel on a device without one would
    fail); hyperparameters finite numbers >= 0 (they replace the run's own when loaded)."""
    if isinstance(now, (bool, str)) or now is None:
        if type(value) is not type(now) or value != now:
            raise ValueError(f"{what} is {_short(value)}; this run's optimizer has {now!r}")
    elif isinstance(now, (int, float)):
        check_count(value, what)
    elif isinstance(now, (list, tuple)):
        if not isinstance(value, (list, tuple)) or len(value) != len(now):
            raise ValueError(f"{what} is {_short(value)}; it must be {len(now)} numbers")
        for i, (v, n) in enumerate(zip(value, now)):
            _check_setting(v, n, f"{what}[{i}]")
    elif type(value) is not type(now):
        raise ValueError(f"{what} is {_what(value)}; this run's optimizer has {_what(now)}")


def _state_keys(optimizer, group) -> set | None:
    """What a step of `optimizer` keeps per parameter, where known: torch's Adam and AdamW, and an
    optimizer that declares `state_keys` (pretraining's LAMB); None: only the tensors' shapes are checked."""
    if isinstance(optimizer, (torch.optim.Adam, torch.optim.AdamW)):
        return {"step", "exp_avg", "exp_avg_sq"} | ({"max_exp_avg_sq"} if group.get("amsgrad") else set())
    keys = getattr(optimizer, "state_keys", None)
    return None if keys is None else set(keys)


def _builtin(optimizer) -> bool:
    """torch's own optimizers keep each parameter's step as a 0-d float tensor (and fail on a number)."""
    return type(optimizer).__module__.startswith("torch.")


def _check_parameter_state(entry, p, keys: set | None, builtin: bool, what, step: int):
    if not isinstance(entry, dict):
        raise ValueError(f"{what} is {_what(entry)}, not a dict")
    if keys is not None and set(entry) != keys:
        missing, unknown = sorted(keys - set(entry)), sorted(map(str, set(entry) - keys))
        raise ValueError(f"{what} " + (f"has no {missing[0]}" if missing else
                                       f"has an entry {_short(unknown[0])} that the optimizer does not keep"))
    for key, value in entry.items():
        if key == "step":
            _check_step(value, builtin, f"{what}: step", step)
        else:  # contiguous: torch hands the tensor to the kernel as it is, and the fused kernel assumes so
            _check_tensor(value, p, f"{what}: {_name(key)}", "the parameter's", contiguous=True)


def _check_step(value, builtin: bool, what, most: int):
    """A parameter's step count: a whole number from 0 to the checkpoint's step, as a 0-d float tensor
    for torch's optimizers, or a number or such a tensor for others (LAMB keeps an int)."""
    if isinstance(value, torch.Tensor):
        if value.shape != () or not value.is_floating_point():
            raise ValueError(f"{what} is {_what(value)}; it must be a 0-d float tensor")
        value = value.item()
    elif builtin:
        raise ValueError(f"{what} is {_what(value)}; torch's optimizers keep it as a 0-d float tensor")
    count = check_count(value, what, most=most)
    if count != int(count):
        raise ValueError(f"{what} is {count!r}; it must be a whole number")


def check_scheduler_state(scheduler, saved, where, step: int):
    """`saved` shaped like this run's scheduler's own state, and at the checkpoint's step: a schedule
    at another step would give other learning rates from here on."""
    check_like(saved, scheduler.state_dict(), where)
    if "last_epoch" in saved and saved["last_epoch"] != step:
        raise ValueError(f"{where}: last_epoch is {saved['last_epoch']}, but the checkpoint is at step {step}")


def check_like(value, like, what):
    """`value` of the form of `like` (what this run's own object writes): dicts with the same keys,
    lists and tuples of the same length, True or False where it has a bool, None where it has None,
    the same name where it has a string, finite numbers >= 0 (whole where it has an int), tensors
    of its shape and dtype."""
    if isinstance(like, dict):
        if not isinstance(value, dict):
            raise ValueError(f"{what} is {_what(value)}, not a dict")
        missing, unknown = [k for k in like if k not in value], [k for k in value if k not in like]
        if missing or unknown:
            raise ValueError(f"{what} " + (f"has no {missing[0]}" if missing else
                                           f"has an unknown entry {_short(unknown[0])}"))
        for key in like:
            check_like(value[key], like[key], f"{what}: {key}")
    elif isinstance(like, (list, tuple)):
        if not isinstance(value, (list, tuple)) or len(value) != len(like):
            raise ValueError(f"{what} is {_what(value)}; it must be {len(like)} values")
        for i, (v, l) in enumerate(zip(value, like)):
            check_like(v, l, f"{what}[{i}]")
    elif isinstance(like, bool) or like is None:
        if type(value) is not type(like):
            raise ValueError(f"{what} is {_what(value)}; it must be {json_type(like)}")
    elif isinstance(like, (int, float)):
        check_count(value, what, whole=isinstance(like, int))
    elif isinstance(like, str):
        if value != like:
            raise ValueError(f"{what} is {_short(value)}; it must be {like!r}")
    elif isinstance(like, torch.Tensor):
        _check_tensor(value, like, what, "this run's", contiguous=True)
    elif type(value) is not type(like):
        raise ValueError(f"{what} is {_what(value)}; it must be {_what(like)}")


def _check_tensor(value, like, what, whose: str, contiguous: bool = False):
    if not isinstance(value, torch.Tensor):
        raise ValueError(f"{what} is {_what(value)}, not a tensor")
    if value.layout != torch.strided or value.is_meta:
        raise ValueError(f"{what} is a {value.layout} tensor{' on the meta device' if value.is_meta else ''}; "
                         "a checkpoint holds dense tensors")
    if tuple(value.shape) != tuple(like.shape):
        raise ValueError(f"{what} has shape {tuple(value.shape)} but {whose} is {tuple(like.shape)}")
    if value.dtype != like.dtype:
        raise ValueError(f"{what} is {value.dtype} but {whose} is {like.dtype}")
    if contiguous and not value.is_contiguous():
        raise ValueError(f"{what} is not contiguous (strides {value.stride()}); torch.save writes these whole")
    if value.is_floating_point() and not bool(torch.isfinite(value).all()):
        raise ValueError(f"{what} holds NaN or infinite values")


def check_rng_states(states, where):
    """rng_states()'s form: Python's, numpy's and torch's generator states (and CUDA's), each one
    its generator accepts. numpy does not check its position: one past its 624 keys read beyond
    them (a segfault)."""
    expect_fields(states, {"python": tuple, "numpy": dict, "torch": torch.Tensor}, where)
    unknown = [k for k in states if k not in ("python", "numpy", "torch", "cuda")]
    if unknown:
        raise ValueError(f"{where}: an unknown generator {_short(unknown[0])}")
    _check_python_rng(states["python"], f"{where}: python")
    _check_numpy_rng(states["numpy"], f"{where}: numpy")
    check_generator_state(states["torch"], f"{where}: torch")
    if "cuda" in states:
        _check_cuda_rng(states["cuda"], f"{where}: cuda")


def _check_python_rng(state, where):
    keys = state[1] if len(state) == 3 and isinstance(state[1], tuple) else ()
    if not (len(keys) == 625 and type(state[0]) is int and state[0] == 3
            and all(type(k) is int and 0 <= k < 2 ** 32 for k in keys) and keys[-1] <= 624 and any(keys[:624])
            and (state[2] is None or type(state[2]) is float and math.isfinite(state[2]))):
        raise ValueError(f"{where}: not a state of Python's generator (version 3, 624 32-bit keys not all zero, "
                         "a position up to 624, None or a finite number)")
    try:
        random.Random().setstate(state)
    except (ValueError, TypeError, OverflowError) as e:
        raise ValueError(f"{where}: not a valid state of Python's generator ({_first_line(e)})") from None


def _check_numpy_rng(state, where):
    expect_fields(state, {"keys": torch.Tensor, "position": int, "has_gauss": int, "cached_gaussian": float}, where)
    keys = state["keys"]
    if keys.shape != (624,) or keys.dtype != torch.int64:
        raise ValueError(f"{where}: keys is {_what(keys)}; it must be 624 int64 numbers")
    if bool(((keys < 0) | (keys >= 2 ** 32)).any()) or not bool(keys.any()):
        raise ValueError(f"{where}: keys must be 32-bit numbers (0 to 2**32 - 1), not all zero")
    check_count(state["position"], f"{where}: position", whole=True, most=624)
    check_count(state["has_gauss"], f"{where}: has_gauss", whole=True, most=1)
    if not math.isfinite(state["cached_gaussian"]):
        raise ValueError(f"{where}: cached_gaussian is {state['cached_gaussian']!r}; it must be finite")


def _check_cuda_rng(states, where):
    if not isinstance(states, (list, tuple)) or not all(isinstance(t, torch.Tensor) and t.dtype == torch.uint8
                                                        and t.dim() == 1 and t.is_contiguous() for t in states):
        raise ValueError(f"{where}: not a list of CUDA generator states (uint8 tensors)")
    if torch.cuda.is_available():
        if len(states) > torch.cuda.device_count():
            raise ValueError(f"{where}: states of {len(states)} devices, but this machine has "
                             f"{torch.cuda.device_count()}")
        size = torch.cuda.get_rng_state().numel()
        if any(t.numel() != size for t in states):
            raise ValueError(f"{where}: a state is not the {size} bytes of a CUDA generator's")


def check_generator_state(state, where, generator=None):
    """A state of a torch CPU generator (`generator`'s kind): a contiguous uint8 tensor of its size
    that torch accepts, tried on a generator of our own."""
    size = (generator or torch.default_generator).get_state().numel()
    if not (isinstance(state, torch.Tensor) and state.dtype == torch.uint8 and tuple(state.shape) == (size,)
            and state.is_contiguous()):
        raise ValueError(f"{where}: {_what(state)}, not a torch generator state (a uint8 tensor of {size} bytes)")
    try:
        torch.Generator().set_state(state)
    except RuntimeError as e:
        raise ValueError(f"{where}: not a valid torch generator state ({_first_line(e)})") from None


def set_generator_state(generator, state, where):
    """generator.set_state(state), once check_generator_state has passed."""
    check_generator_state(state, where, generator)
    generator.set_state(state)


def set_bit_generator_state(rng, state, where):
    """Set a numpy Generator's bit generator to `state` (its .state form), once it has the form of
    the generator's own state (the same generator, whole numbers >= 0) and numpy accepts it on a
    generator of our own."""
    check_like(state, rng.bit_generator.state, where)
    if state.get("has_uint32", 0) not in (0, 1) or state.get("has_gauss", 0) not in (0, 1):
        raise ValueError(f"{where}: has_uint32 and has_gauss must be 0 or 1")
    try:
        type(rng.bit_generator)().state = state
    except (ValueError, TypeError, OverflowError) as e:
        raise ValueError(f"{where}: not a valid {type(rng.bit_generator).__name__} state ({_first_line(e)})") from None
    rng.bit_generator.state = state


# ---- helpers for the objectives' own state (Objective.load_state_dict) ------------------------------

def expect_fields(state, fields: dict, where) -> dict:
    """`state` as a dict holding every field of `fields` ({name: type or types}) with that type
    (io.check_types' rules: a bool is no number, an int is a float), or a ValueError naming `where`."""
    if not isinstance(state, dict):
        raise ValueError(f"{where} is {_what(state)}, not a dict")
    missing = [name for name in fields if name not in state]
    if missing:
        raise ValueError(f"{where} has no {missing[0]}")
    check_types(state, fields, where)
    return state


def check_count(value, where, whole: bool = False, most=None):
    """`value` when it is a finite number from 0 to `most` (a whole one where `whole`), else a
    ValueError naming `where`."""
    kinds = (int,) if whole else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds):
        raise ValueError(f"{where} is {_what(value)}; it must be a {'whole ' if whole else ''}number")
    if not (math.isfinite(value) and 0 <= value and (most is None or value <= most)):
        limit = f"from 0 to {most:,}" if most is not None else "finite and at least 0"
        raise ValueError(f"{where} is {_short(value)}; it must be {limit}")
    return value


def same_data(a, b) -> bool:
    """a == b for plain data; False where a crafted value (a tensor where a number belongs) makes
    == ambiguous."""
    try:
        return bool(a == b)
    except (RuntimeError, TypeError, ValueError):
        return False


def _what(value) -> str:
    if isinstance(value, torch.Tensor):
        return f"a {value.dtype} tensor of shape {tuple(value.shape)}"
    return f"{json_type(value)} ({_short(value)})" if not isinstance(value, (dict, list, tuple)) else \
        f"{json_type(value) if not isinstance(value, tuple) else 'a tuple'} of {len(value)}"


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _name(key) -> str:
    return key if isinstance(key, str) and key.isprintable() and len(key) <= 60 else _short(key)


def _more(names: list) -> str:
    return f" (and {len(names) - 1} more)" if len(names) > 1 else ""


def _first_line(e: Exception) -> str:
    text = str(e).strip()
    return (text.splitlines()[0] if text else type(e).__name__)[:200]


def checkpoint_model(run: str, build, state: dict | None = None) -> tuple[torch.nn.Module, dict]:
    """(the model of the last checkpoint in the run folder `run`, the checkpoint's extra), either
    format: `build(extra)` makes the empty model from what the checkpoint records (extra["model"],
    its config, and extra["settings"]), which is then filled with the saved weights, checked first.
    `state`: the checkpoint already read (read_checkpoint), else it is read here."""
    from . import sharded_checkpoint
    path = os.path.join(run, "checkpoint.pt")
    state = state if state is not None else read_checkpoint(path)
    extra = state["extra"]
    if not isinstance(extra.get("model"), dict) or not isinstance(extra.get("settings"), dict):
        raise ValueError(f"{path}: records no model config and settings to rebuild the model from")
    model = build(extra)
    if extra.get("shards") is None:
        check_model_state(model, state["model"], f"{path}: model")
        model.load_state_dict(state["model"])
    else:
        sharded_checkpoint.load_model_only(model, run, extra["shards"], path)
    return model.eval(), extra
