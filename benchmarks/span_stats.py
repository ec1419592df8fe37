"""Span statistics of a create-pretraining-data --masking span folder (python benchmarks/span_stats.py DIR): share of pieces masked,
pieces and words per span, how spans were replaced."""
import sys
import numpy as np
from bertlab.pretraining.shards import PretrainingData
data = PretrainingData(sys.argv[1])
r = data.rows(np.arange(len(data)))
sub = np.array([t.startswith("##") for t in data.vocab.id_to_token])
mask_id = data.vocab.token_to_id["[MASK]"]
words = pieces = spans = masked = tokens = 0
kinds = {"mask": 0, "random": 0, "keep": 0}
for i in range(len(data)):
    m, k = int(r["masked_lm_counts"][i]), int(r["lengths"][i])
    ids = r["input_ids"][i, :k].astype(np.int64)
    orig = ids.copy(); orig[r["masked_lm_positions"][i, :m]] = r["masked_lm_ids"][i, :m]
    tokens += k; masked += m
    for left, right in {tuple(b) for b in r["masked_lm_boundaries"][i, :m].tolist()}:
        span = np.arange(left + 1, right)
        spans += 1; pieces += len(span); words += int((~sub[orig[span]]).sum())
        kinds["mask" if (ids[span] == mask_id).all() else "keep" if (ids[span] == orig[span]).all() else "random"] += 1
print(f"{data.folder}: {len(data)} instances, masked {masked / tokens:.3%} of pieces, {spans} spans, "
      f"{words / spans:.2f} words and {pieces / spans:.2f} pieces per span; spans replaced "
      + ", ".join(f"{k} {v / spans:.1%}" for k, v in kinds.items()))
