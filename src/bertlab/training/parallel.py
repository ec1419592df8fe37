"""The model across processes under torchrun: DDP replicates it (each process holds the whole model
and gradients are averaged), and checkpoints read and write the whole model's state either way."""
import torch

from .distributed import DistInfo


def wrap_model(model: torch.nn.Module, info: DistInfo, device: torch.device, sharding: str = "ddp",
               find_unused_parameters: bool = False) -> torch.nn.Module:
    """The module the training step calls: `model` itself in one process, else wrapped for `sharding`."""
    if not info.enabled:
        return model
    if sharding == "fsdp":
        raise ValueError("sharding fsdp: not available yet; use ddp")
    from torch.nn.parallel import DistributedDataParallel
    return DistributedDataParallel(model, device_ids=[device] if device.type == "cuda" else None,
                                   find_unused_parameters=find_unused_parameters)


def full_state(net: torch.nn.Module, optimizer, info: DistInfo) -> tuple[dict, dict]:
    """The whole model's and optimizer's state dicts (every process takes part; the main one saves)."""
    model = getattr(net, "module", net)
    return model.state_dict(), optimizer.state_dict()


def load_full_state(net: torch.nn.Module, optimizer, model_state: dict, optimizer_state: dict):
    """Load states that full_state produced (in any process count) into this process's model and optimizer."""
    getattr(net, "module", net).load_state_dict(model_state)
    optimizer.load_state_dict(optimizer_state)
