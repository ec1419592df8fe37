#!/usr/bin/env bash
# bertlab's main job on what the repo ships: each feature shows itself on real data.
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1  # bertlab never downloads; this keeps the HF peers offline too

echo "== 1. WordPiece, exactly as google-research/bert: the notes' sentence =="
VOCAB=$(python -c "from bertlab.interop import resolve; print(resolve('minilm'))")/vocab.txt
echo "The animal didn't cross the street because it was too tired. 我爱中国" | bertlab tokenize --vocab "$VOCAB"

echo
echo "== 2. Semantic search: the real all-MiniLM-L6-v2 over 2,865 Python stdlib docstrings =="
bertlab similar --model minilm --corpus data/python-docs/summaries.txt -k 3 \
  "read a gzip compressed file" \
  "make a temporary directory" \
  "how many processors does this machine have" \
  "send an email"
