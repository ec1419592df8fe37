"""Data parallelism under torchrun: one process per device, gradients averaged by DDP.

torchrun sets RANK / WORLD_SIZE / LOCAL_RANK; without them this is a single process and every
helper is a no-op, so the same training code runs either way.
"""
import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

from .elastic import check_launch


@dataclass(frozen=True)
class DistInfo:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1


def setup_distributed(device: torch.device) -> DistInfo:
    """Join the process group torchrun describes: gloo on CPU, nccl on CUDA."""
    if "WORLD_SIZE" not in os.environ or int(os.environ["WORLD_SIZE"]) == 1:
        return DistInfo()
    info = DistInfo(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ.get("LOCAL_RANK", 0)))
    if not dist.is_initialized():
        check_launch()
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    if device.type == "cuda":
        torch.cuda.set_device(info.local_rank)
    return info


def is_main_process() -> bool:
    """Whether this is torchrun's rank 0 or a process on its own: the one that reports."""
    return int(os.environ.get("RANK", "0")) == 0


def rank_device(device: torch.device, info: DistInfo) -> torch.device:
    return torch.device("cuda", info.local_rank) if device.type == "cuda" and info.enabled else device


def all_agree(flag: bool, info: DistInfo) -> bool:
    """True on every rank if it is True on any: ranks must stop (time budget) at the same step."""
    if not info.enabled:
        return flag
    t = torch.tensor([int(flag)], device=_comm_device())
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item())


def sum_across(values: torch.Tensor, info: DistInfo) -> torch.Tensor:
    """Element-wise sum over ranks of a small CPU tensor: many counters in one all-reduce."""
    if not info.enabled:
        return values
    t = values.to(_comm_device())
    dist.all_reduce(t)
    return t.cpu()


def gather_objects(obj, info: DistInfo) -> list:
    """Every rank's `obj` (picklable), in rank order, on every rank."""
    if not info.enabled:
        return [obj]
    out = [None] * info.world_size
    dist.all_gather_object(out, obj)
    return out


def _comm_device():
    return torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")


def barrier(info: DistInfo):
    if info.enabled:
        dist.barrier()


def cleanup(info: DistInfo):
    if info.enabled and dist.is_initialized():
        dist.destroy_process_group()
