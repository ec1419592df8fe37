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

echo
echo "== 3. Fine-tuning: MiniLM learns which manual section (2 system calls, 3 library functions, 7 overviews) =="
echo "==    a page's one-line description belongs to (592 real Linux man-pages one-liners, shipped) =="
OUT=${BERTLAB_RUNS:-runs}/manpages
bertlab finetune --task classify --model minilm --text-a description --label section \
  --train data/manpages/train.tsv --dev data/manpages/dev.tsv --test data/manpages/test.tsv \
  --epochs 3 --batch-size 16 --lr 1e-4 --quiet -o "$OUT" --overwrite
printf 'description\nwait for a child process to change state\nformatted output conversion\noverview of the kernel keyring\n' \
  > "$OUT/new.tsv"
bertlab predict --model "$OUT/model" "$OUT/new.tsv"

echo
echo "== 4. BERT pretraining from raw text: the shipped docstring summaries -> a WordPiece vocabulary -> =="
echo "==    google's masked, paired instances -> MLM + NSP training of a tiny BERT (about a minute) =="
PT=${BERTLAB_RUNS:-runs}/pretrain
bertlab data python-docs -o "$PT/corpus" --heldout 0.1 --overwrite
bertlab vocab "$PT/corpus/train.txt" --vocab-size 4000 -o "$PT/vocab" --overwrite
for split in train heldout; do
  bertlab create-pretraining-data "$PT/corpus/$split.txt" --vocab "$PT/vocab" -o "$PT/$split" \
    --max-seq-length 64 --max-predictions-per-seq 10 --dupe-factor 5 --overwrite
done
bertlab pretrain --data "$PT/train" --eval-data "$PT/heldout" --preset tiny --batch-size 16 --lr 1e-3 \
  --warmup 10 --max-steps 80 --eval-every 40 --save-every 80 --out "$PT/run" --overwrite
echo "held-out masked-LM / next-sentence accuracy: $PT/run/summary.json; curves: $PT/run/curves.png"

echo
echo "== 5. Translation: the Transformer of 'Attention Is All You Need' learns German -> English from the =="
echo "==    messages of nine GNU programs (2,926 pairs, shipped), then beam search on two programs it never saw =="
TR=${BERTLAB_RUNS:-runs}/translate
bertlab translate-train --data data/gettext-gnu-de --src de --tgt en --joint-vocab --vocab-size 4000 \
  --preset small --max-tokens 1024 --lr 1e-3 --warmup 100 --max-steps 500 --eval-every 250 \
  --bleu-sentences 100 --seed 0 --out "$TR" --overwrite
bertlab translate --model "$TR/model" data/gettext-gnu-de/test.de --beam 4 --ref data/gettext-gnu-de/test.en \
  > "$TR/test.hyp"
printf 'Datei nicht gefunden\nzu viele Argumente\nSpeicher erschöpft\n' | bertlab translate --model "$TR/model" --beam 4
echo "curves: $TR/curves.png; test translations: $TR/test.hyp"
