"""The key/value cache of incremental decoding, one type for GPT, the Transformer's decoder and a
lone DecoderBlock (`KVCache(num_layers, max_len)`; the models' `new_cache(max_len)` builds it).

A decoding step feeds only its newest positions: each layer's self-attention appends their keys
and values here and attends over all of them, so a step costs one position instead of the whole
prefix. Encoder-decoder attention projects the encoder output once, at the first step, and keeps
the result in `memory`.
"""
import torch


class KVCache:
    """Per layer: `keys[layer]`, `values[layer]` (batch, heads, positions so far, d_head) of
    self-attention, and `memory[layer]`, the (key, value) of encoder-decoder attention.

    max_len=None grows by concatenation, which copies the whole prefix every step. With max_len the
    keys and values are written in place into buffers of max_len positions, so a step costs one
    position of memory traffic (GPT's sampling and translation use this). `reorder` (beam search,
    every step) then copies only the filled positions of the kept rows into a second pair of
    buffers and swaps: allocating new max_len-sized tensors, as `index_select` does, cost 3x more
    (page faults on fresh memory, measured).
    """

    def __init__(self, num_layers: int, max_len: int | None = None):
        self.max_len = max_len
        self.keys, self.values = [None] * num_layers, [None] * num_layers
        self.memory = [None] * num_layers
        self._buffers = [None] * num_layers  # with max_len: [key, value] buffers, then two spares

    def __len__(self):
        return self.length()

    def length(self):
        """Positions cached in every layer (the last layer is the last to append). The models call
        this rather than len(): len() must return a Python int, which pins a traced length (ONNX
        export) to the one seen while tracing."""
        return 0 if self.keys[-1] is None else self.keys[-1].size(-2)

    def append(self, layer: int, key, value):
        """Add the newest positions' keys and values of `layer`; return all of that layer's so far."""
        if self.max_len is None:
            if self.keys[layer] is not None:
                key = torch.cat([self.keys[layer], key], dim=-2)
                value = torch.cat([self.values[layer], value], dim=-2)
            self.keys[layer], self.values[layer] = key, value
            return key, value
        past = 0 if self.keys[layer] is None else self.keys[layer].size(-2)
        rows, end = key.size(0) if self.keys[layer] is None else self.keys[layer].size(0), past + key.size(-2)
        if self._buffers[layer] is None:
            shape = (*key.shape[:-2], self.max_len, key.size(-1))
            self._buffers[layer] = [key.new_empty(shape), value.new_empty(shape)]
        if end > self.max_len:
            raise ValueError(f"the cache holds {self.max_len} positions; {end} were asked for")
        if key.size(0) != rows:
            raise ValueError(f"the cache holds {rows} rows; {key.size(0)} were given")
        key_buffer, value_buffer = self._buffers[layer][:2]
        key_buffer[:rows, ..., past:end, :] = key
        value_buffer[:rows, ..., past:end, :] = value
        self.keys[layer], self.values[layer] = key_buffer[:rows, ..., :end, :], value_buffer[:rows, ..., :end, :]
        return self.keys[layer], self.values[layer]

    def reorder(self, index: torch.Tensor):
        """Keep the self-attention rows in `index`, in that order: beam search follows its best
        beams every step, and finished rows drop out (fewer rows than before is allowed)."""
        for layer, (key, value) in enumerate(zip(self.keys, self.values)):
            if key is None:
                continue
            if self.max_len is None:
                self.keys[layer], self.values[layer] = key.index_select(0, index), value.index_select(0, index)
                continue
            buffers = self._buffers[layer]
            if len(buffers) == 2:
                buffers += [torch.empty_like(buffers[0]), torch.empty_like(buffers[1])]
            n, length = index.numel(), key.size(-2)
            spare_key, spare_value = buffers[2][:n, ..., :length, :], buffers[3][:n, ..., :length, :]
            torch.index_select(key, 0, index, out=spare_key)
            torch.index_select(value, 0, index, out=spare_value)
            self._buffers[layer] = buffers[2:] + buffers[:2]
            self.keys[layer], self.values[layer] = spare_key, spare_value

    def reorder_sources(self, index: torch.Tensor):
        """Keep the encoder-decoder rows in `index` (the sources of the sentences still decoding)."""
        self.memory = [None if kv is None else (kv[0].index_select(0, index), kv[1].index_select(0, index))
                       for kv in self.memory]
