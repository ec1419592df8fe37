#!/bin/sh
# UniLM vs the encoder-decoder Transformer vs the lead sentence on Debian package synopses
# (docs/models/unilm.md). One thread per run; the three trainings run side by side, so the machine's load
# falls on them alike. Usage:
#   sh benchmarks/unilm_synopses.sh LISTS_DIR OUT_DIR [STEPS [PAIRS_PER_STEP [UNILM_LR [SCRATCH]]]]
# LISTS_DIR: apt lists with Translation-en (see `bertlab data debian-synopses --help`). The
# Transformer's token budget per batch is 56 x PAIRS_PER_STEP (the pairs average 46 source
# subword tokens, so its batches then hold a few more pairs than UniLM's). SCRATCH=0 leaves out
# UniLM from scratch.
set -e
LISTS=$1; OUT=$2; STEPS=${3:-120}; PAIRS=${4:-16}; LR=${5:-2e-4}; SCRATCH=${6:-1}
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
DATA=$OUT/data
COMMON="--max-steps $STEPS --eval-every $STEPS --warmup 20 --device cpu --quiet"
UNILM="--data $DATA --src desc --tgt syn --batch-size $PAIRS --lr $LR --max-source-tokens 64 --max-target-tokens 24 --rouge-sentences 100"
[ -f $DATA/stats.json ] || python -m bertlab data debian-synopses -o $DATA --lists $LISTS --max-words 36 \
    --max-train 8000 --max-test 500
mkdir -p $OUT/logs
[ -f $OUT/unilm-minilm/summary.json ] || python -m bertlab unilm-train $UNILM $COMMON --init-from minilm \
    --out $OUT/unilm-minilm 2> $OUT/logs/unilm-minilm.log &
[ -f $OUT/transformer/summary.json ] || python -m bertlab translate-train --data $DATA --src desc --tgt syn \
    --joint-vocab --vocab-size 8000 --layers 3 --d-model 384 --heads 12 --ffn-dim 1536 --max-tokens $((56 * PAIRS)) \
    --bleu-sentences 0 $COMMON --out $OUT/transformer 2> $OUT/logs/transformer.log &
[ $SCRATCH = 0 ] || [ -f $OUT/unilm-scratch/summary.json ] || python -m bertlab unilm-train $UNILM $COMMON --layers 6 --hidden 384 \
    --heads 12 --intermediate 1536 --out $OUT/unilm-scratch 2> $OUT/logs/unilm-scratch.log &
wait
for run in unilm-minilm $([ $SCRATCH = 0 ] || echo unilm-scratch); do
    python -m bertlab unilm-generate --model $OUT/$run/model $DATA/test.desc --ref $DATA/test.syn \
        > $OUT/$run/test.hyp 2> $OUT/$run/test.rouge
done
python -m bertlab translate --model $OUT/transformer/model $DATA/test.desc --beam 1 > $OUT/transformer/test.hyp
python benchmarks/rouge_files.py $DATA/test.syn lead=$DATA/test.lead transformer=$OUT/transformer/test.hyp \
    unilm-minilm=$OUT/unilm-minilm/test.hyp $([ $SCRATCH = 0 ] || echo unilm-scratch=$OUT/unilm-scratch/test.hyp)
