#!/usr/bin/env bash
# Chinese end to end (docs/results/pretraining.md, "Chinese end to end"): Debian's zh_CN package descriptions -> a
# Chinese WordPiece vocabulary -> whole-word-masked (jieba) pretraining of a tiny BERT -> fill-mask
# -> section classification against TF-IDF. Needs apt's zh_CN lists:
#   apt-get update -o Acquire::Languages=zh_CN          (or LISTS=DIR holding them)
# Usage: bash scripts/chinese.sh [OUT]    (default runs/zh; about 25 minutes on a busy 2-core CPU)
# MINUTES=0.2 EPOCHS=1 SEEDS=1 make a quick smoke run.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-runs/zh}
LISTS=${LISTS:-/var/lib/apt/lists}
# One torch thread: on a 2-core machine shared with other jobs, two threads made a step 17x
# slower (each op waits for the thread that was descheduled).
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}

bertlab data debian-zh --lists "$LISTS" --gettext -o "$OUT" --overwrite
bertlab vocab "$OUT/train.txt" -o "$OUT/vocab" --vocab-size 8000 --overwrite --quiet
for part in train heldout; do
  bertlab create-pretraining-data "$OUT/$part.txt" --vocab "$OUT/vocab" -o "$OUT/${part}128" --jieba \
    --max-seq-length 128 --max-predictions-per-seq 20 --dupe-factor "$([ $part = train ] && echo 5 || echo 1)" \
    --overwrite --quiet
done
bertlab pretrain --data "$OUT/train128" --eval-data "$OUT/heldout128" --out "$OUT/bert" --preset tiny \
  --batch-size 16 --lr 1e-3 --warmup 80 --max-steps 1600 --max-minutes "${MINUTES:-10}" --eval-every 400 --overwrite --quiet
bertlab fill-mask --model "$OUT/bert/model" "我爱中[MASK]" "这是一个自由、开源的[MASK][MASK]。"

python benchmarks/tfidf_classify.py --data "$OUT" --features char
CLS="--task classify --train $OUT/train.tsv --dev $OUT/dev.tsv --test $OUT/test.tsv --text-a description \
  --label section --max-seq-length 128 --batch-size 16 --lr 1e-3 --epochs ${EPOCHS:-20} --quiet --overwrite"
for seed in ${SEEDS:-1 2 3 4 5}; do  # the test split is small: one seed says little
  bertlab finetune $CLS --seed "$seed" --model "$OUT/bert/model" -o "$OUT/cls-pretrained-$seed" | tail -1
  bertlab finetune $CLS --seed "$seed" --model "$OUT/bert/model" --init random -o "$OUT/cls-random-$seed" | tail -1
done
