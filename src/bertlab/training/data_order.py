"""Which pretraining instances each micro-batch reads, on every rank, resumably.

Every epoch is a fresh permutation of all instances, drawn from the seed pair (seed, epoch), so the
order is a pure function of three numbers: the epoch, its permutation seed and the index within
it. That triple is the whole data position a checkpoint needs.

The permutation is cut into global micro-batches of batch_size x world_size instances; rank r reads
the r-th slice of each. Together the ranks read exactly the global batch one process would read
with batch_size x world_size, which is what makes data parallelism equal one big batch. A tail too
short for a whole global micro-batch is skipped (it is read in other epochs' orders), so every rank
always has a full slice and all ranks change epoch at the same step.
"""
import numpy as np


class DataOrder:
    def __init__(self, num_instances: int, batch_size: int, seed: int, rank: int = 0, world_size: int = 1):
        self.n, self.batch_size, self.seed = num_instances, batch_size, seed
        self.rank, self.global_batch = rank, batch_size * world_size
        if num_instances < self.global_batch:
            raise ValueError(f"{num_instances} instances cannot fill one micro-batch of {batch_size} x "
                             f"{world_size} process(es); use a smaller --batch-size or more data")
        self.epoch, self.index = 0, 0
        self._order, self._order_epoch = None, None

    def permutation_seed(self, epoch: int) -> list[int]:
        return [self.seed, epoch]

    def _permutation(self) -> np.ndarray:
        if self._order_epoch != self.epoch:
            self._order = np.random.default_rng(self.permutation_seed(self.epoch)).permutation(self.n)
            self._order_epoch = self.epoch
        return self._order

    def next_indices(self) -> np.ndarray:
        """This rank's instances for the next micro-batch."""
        if self.index + self.global_batch > self.n:
            self.epoch, self.index = self.epoch + 1, 0
        start = self.index + self.rank * self.batch_size
        self.index += self.global_batch
        return self._permutation()[start:start + self.batch_size]

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "permutation_seed": self.permutation_seed(self.epoch), "index": self.index,
                "num_instances": self.n, "global_batch": self.global_batch}

    def load_state_dict(self, state: dict):
        from .checkpoint import check_count, expect_fields
        expect_fields(state, {"epoch": int, "permutation_seed": list, "index": int, "num_instances": int,
                              "global_batch": int}, "the data order")
        if (state["num_instances"], state["global_batch"]) != (self.n, self.global_batch):
            raise ValueError(f"the saved data position is for {state['num_instances']} instances in global "
                             f"micro-batches of {state['global_batch']}; this run has {self.n} and "
                             f"{self.global_batch}: resume with the same data, --batch-size and process count")
        if state["permutation_seed"] != self.permutation_seed(state["epoch"]):
            raise ValueError(f"the saved data order was drawn with seed {state['permutation_seed'][0]}, "
                             f"not --seed {self.seed}")
        # an index past the instances would read empty batches; one between global micro-batches,
        # rows another process also reads
        check_count(state["epoch"], "the data order's epoch", whole=True)
        check_count(state["index"], "the data order's index", whole=True, most=self.n)
        if state["index"] % self.global_batch:
            raise ValueError(f"the data order's index {state['index']} is not a multiple of the global micro-batch "
                             f"{self.global_batch}")
        self.epoch, self.index = state["epoch"], state["index"]
