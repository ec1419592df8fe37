"""The model across processes under torchrun. DDP replicates it: each process holds the whole model
and gradients are averaged. FSDP (PyTorch's fully_shard) shards it: each process holds 1/N of every
weight, gradient and optimizer moment, and a block's whole weights are gathered only while it runs,
so a model whose training state does not fit one device (BERT-large, GPT-2 1.5B) trains on several.

Either way a checkpoint holds the whole model's state in the single-process format (the optimizer's
state keyed by parameter index): a run saved under FSDP resumes under FSDP or DDP (fit() asks for
the same number of processes, whose data positions it holds), and the model folder a run exports is
an ordinary one."""
import contextlib
import copy

import torch
from torch import nn

from ..core.blocks import DecoderBlock, EncoderBlock
from .distributed import DistInfo

# The units FSDP gathers one at a time: every model family is a stack of the core's blocks (BERT's
# layers, GPT's h, the Transformer's encoder and decoder), so sharding these shards them all. What
# is left (embeddings, final norm, heads, and the weights tied to the embeddings) is the root's unit.
SHARDED_BLOCKS = (EncoderBlock, DecoderBlock)


def wrap_model(model: nn.Module, info: DistInfo, device: torch.device, sharding: str = "ddp",
               find_unused_parameters: bool = False) -> nn.Module:
    """The module the training step calls: `model` itself in one process, else wrapped for `sharding`
    (under fsdp, `model` itself, sharded in place)."""
    if not info.enabled:
        return model
    if sharding == "fsdp":
        return shard_model(model)
    from torch.nn.parallel import DistributedDataParallel
    return DistributedDataParallel(model, device_ids=[device] if device.type == "cuda" else None,
                                   find_unused_parameters=find_unused_parameters)


def shard_model(model: nn.Module) -> nn.Module:
    """fully_shard every block, then the root (the process group must be initialised)."""
    try:
        from torch.distributed.fsdp import fully_shard
    except ImportError:
        raise ValueError(f"sharding fsdp needs torch.distributed.fsdp.fully_shard (PyTorch 2.6 or later; this is "
                         f"{torch.__version__}); use ddp") from None
    for module in model.modules():
        if isinstance(module, SHARDED_BLOCKS):
            fully_shard(module)
    return fully_shard(model)


def is_sharded(net: nn.Module) -> bool:
    net = getattr(net, "_orig_mod", net)  # a torch.compile'd module
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError:
        return False
    return isinstance(net, FSDPModule)


@contextlib.contextmanager
def gradient_sync(net: nn.Module, sync: bool):
    """Within it, backward passes all-reduce (DDP) or reduce-scatter (FSDP) gradients only if `sync`.
    Gradient accumulation syncs on its last micro-batch alone: one communication per step, not one
    per micro-batch. DDP decides at the forward pass (no_sync), FSDP at the backward pass
    (set_requires_gradient_sync), so the forward and backward passes both belong inside."""
    net = getattr(net, "_orig_mod", net)
    if sync:
        yield
    elif hasattr(net, "no_sync"):
        with net.no_sync():
            yield
    elif hasattr(net, "set_requires_gradient_sync"):
        net.set_requires_gradient_sync(False)
        try:
            yield
        finally:
            net.set_requires_gradient_sync(True)
    else:
        yield


def _options(**kw):
    from torch.distributed.checkpoint.state_dict import StateDictOptions
    return StateDictOptions(full_state_dict=True, **kw)


def full_state(net: nn.Module, optimizer, info: DistInfo) -> tuple[dict, dict]:
    """The whole model's and optimizer's state dicts. Every process takes part; under FSDP only the
    main process receives them (gathered to its CPU, one tensor at a time), the others get {}."""
    if not is_sharded(net):
        model = getattr(net, "module", net)
        return model.state_dict(), optimizer.state_dict()
    from torch.distributed.checkpoint.state_dict import get_model_state_dict, get_optimizer_state_dict
    model_state = get_model_state_dict(net, options=_options(cpu_offload=True))
    optimizer_state = get_optimizer_state_dict(net, optimizer, options=_options(cpu_offload=True))
    return model_state, _by_index(optimizer_state) if optimizer_state else {}


def load_full_state(net: nn.Module, optimizer, model_state: dict, optimizer_state: dict):
    """Load states that full_state produced (in any process count) into this process's model and
    optimizer; under FSDP every process passes the whole states and keeps its shard of them."""
    if not is_sharded(net):
        getattr(net, "module", net).load_state_dict(model_state)
        optimizer.load_state_dict(optimizer_state)
        return
    from torch.distributed.checkpoint.state_dict import set_model_state_dict, set_optimizer_state_dict
    set_model_state_dict(net, model_state, options=_options())
    set_optimizer_state_dict(net, optimizer, _by_name(optimizer_state, parameter_names(net, optimizer)),
                             options=_options())


def full_model_state(net: nn.Module) -> dict:
    """The whole model's state on every process (a collective under FSDP), on the model's device."""
    if not is_sharded(net):
        return getattr(net, "module", net).state_dict()
    from torch.distributed.checkpoint.state_dict import get_model_state_dict
    return get_model_state_dict(net, options=_options())


def meta_copy(model: nn.Module) -> nn.Module:
    """A copy of `model` whose parameters live on the meta device (no memory): the skeleton that
    `unsharded_copy` fills once FSDP has turned the model's own parameters into shards. Tied
    parameters stay tied (one copy per parameter object); buffers are copied as they are."""
    memo = {id(p): nn.Parameter(torch.empty_like(p, device="meta"), p.requires_grad) for p in model.parameters()}
    return copy.deepcopy(model, memo)


def unsharded_copy(net: nn.Module, skeleton: nn.Module, device: torch.device) -> nn.Module:
    """An ordinary module (no FSDP) holding the sharded `net`'s whole weights, on every process."""
    state = full_model_state(net)
    memo = {id(p): nn.Parameter(torch.empty_like(p, device=device), p.requires_grad) for p in skeleton.parameters()}
    model = copy.deepcopy(skeleton, memo)
    model.load_state_dict(state)
    return model.train(net.training)


def parameter_names(net: nn.Module, optimizer) -> list[str]:
    """The optimizer's parameters' names, in the order optimizer.state_dict() numbers them."""
    names = {id(p): name for name, p in net.named_parameters()}
    return [names[id(p)] for group in optimizer.param_groups for p in group["params"]]


def _by_index(state: dict) -> dict:
    """An optimizer state keyed by parameter name (torch.distributed.checkpoint's) keyed by index
    instead, as optimizer.state_dict() keys it: one checkpoint format whatever the sharding."""
    index = {}
    groups = [{**g, "params": [index.setdefault(name, len(index)) for name in g["params"]]}
              for g in state["param_groups"]]
    return {"state": {index[name]: s for name, s in state["state"].items()}, "param_groups": groups}


def _by_name(state: dict, names: list[str]) -> dict:
    groups = [{**g, "params": [names[i] for i in g["params"]]} for g in state["param_groups"]]
    return {"state": {names[i]: s for i, s in state["state"].items()}, "param_groups": groups}
