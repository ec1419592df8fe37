#!/usr/bin/env bash
# bertlab's main job on what the repo ships: each feature shows itself on real data, in a few lines.
# Every step prints where its pictures and model folders are (under $BERTLAB_RUNS, default runs/).
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1  # bertlab never downloads; this keeps the HF peers offline too
RUNS=${BERTLAB_RUNS:-runs}
mkdir -p "$RUNS"
STARTED=$SECONDS
took() { echo "-- step took $((SECONDS - STEP)) s (job so far $((SECONDS - STARTED)) s)"; }

STEP=$SECONDS
echo "== 1. WordPiece, exactly as google-research/bert: the notes' sentences, English and Chinese =="
echo "==    (MiniLM's vocabulary is bert-base-uncased's: it has 我, 中 and 国 but not 爱, so 爱 is [UNK]; =="
echo "==    CJK characters are split one a token before WordPiece, as google does) =="
VOCAB=$(python -c "from bertlab.interop import resolve; print(resolve('minilm'))")/vocab.txt
printf "The animal didn't cross the street because it was too tired.\n我爱中国\n" | bertlab tokenize --vocab "$VOCAB"
took

STEP=$SECONDS
echo
echo "== 2. Semantic search: the real all-MiniLM-L6-v2 over 2,865 Python stdlib docstrings =="
bertlab similar --model minilm --corpus data/python-docs/summaries.txt -k 2 --quiet \
  "read a gzip compressed file" \
  "make a temporary directory" \
  "how many processors does this machine have"
took

STEP=$SECONDS
echo
echo "== 3. Classification: MiniLM learns which manual section (2 system calls, 3 library functions, 7 overviews) =="
echo "==    a page's one-line description belongs to (592 real Linux man-pages one-liners, shipped) =="
CLS=$RUNS/manpages
bertlab finetune --task classify --model minilm --text-a description --label section \
  --train data/manpages/train.tsv --dev data/manpages/dev.tsv --test data/manpages/test.tsv \
  --epochs 2 --batch-size 16 --lr 1e-4 --quiet -o "$CLS" --overwrite
printf 'description\nwait for a child process to change state\nformatted output conversion\noverview of the kernel keyring\n' \
  > "$CLS/new.tsv"
bertlab predict --model "$CLS/model" "$CLS/new.tsv" --quiet
echo "model folder: $CLS/model"
took

STEP=$SECONDS
echo
echo "== 4a. NER: MiniLM learns to tag functions, commands, options and paths in man-page sentences =="
echo "==     (800 / 150 training / dev sentences, tags from the pages' typesetting; data/manpages-ner) =="
NER=$RUNS/ner
bertlab finetune --task ner --model minilm --train data/manpages-ner/train.txt --dev data/manpages-ner/dev.txt \
  --max-seq-length 64 --epochs 2 --batch-size 16 --lr 1e-4 --quiet -o "$NER" --overwrite
# two test sentences that have entities, predicted by the model folder alone
awk -v RS= '/B-/ && n < 2 {print; print ""; n++}' data/manpages-ner/test.txt > "$NER/two.txt"
bertlab predict --model "$NER/model" "$NER/two.txt" --quiet 2>/dev/null | python -c "
import json, sys
for line in sys.stdin:
    r = json.loads(line)
    print(' '.join(w if t == 'O' else f'[{w}]{t[2:]}' for w, t in zip(r['words'], r['tags'])))"
echo "model folder: $NER/model"
took

STEP=$SECONDS
echo
echo "== 4b. Question answering: MiniLM learns to point at the answer span (SQuAD layout: 400 questions =="
echo "==     'What does NAME do?' over man-page NAME lines; data/manpages-qa) =="
QA=$RUNS/qa
bertlab finetune --task squad --model minilm --train data/manpages-qa/train.json --dev data/manpages-qa/dev.json \
  --max-seq-length 128 --epochs 3 --batch-size 8 --lr 3e-4 --quiet -o "$QA" --overwrite
cat > "$QA/new.json" <<'JSON'
{"version": "1.1", "data": [{"title": "new", "paragraphs": [{"context":
 "cp - copy files and directories\ngzip - compress or expand files\nuname - print system information\n",
 "qas": [{"id": "q1", "question": "What does gzip do?"}, {"id": "q2", "question": "What does uname do?"}]}]}]}
JSON
bertlab predict --model "$QA/model" "$QA/new.json" --quiet 2>/dev/null | python -c "
import json, sys
for line in sys.stdin:
    r = json.loads(line)
    print(f\"{r['id']}: {r['answer']!r}\")"
echo "model folder: $QA/model"
took

STEP=$SECONDS
echo
echo "== 5. BERT pretraining from raw text: the shipped docstring summaries -> a WordPiece vocabulary -> =="
echo "==    google's masked, paired instances -> MLM + NSP training of a tiny BERT (about a minute) =="
PT=$RUNS/pretrain
bertlab data python-docs -o "$PT/corpus" --heldout 0.1 --overwrite
bertlab vocab "$PT/corpus/train.txt" --vocab-size 1000 -o "$PT/vocab" --overwrite > /dev/null
for split in train heldout; do
  bertlab create-pretraining-data "$PT/corpus/$split.txt" --vocab "$PT/vocab" -o "$PT/$split" \
    --max-seq-length 32 --max-predictions-per-seq 5 --dupe-factor 5 --overwrite --quiet
done
bertlab pretrain --data "$PT/train" --eval-data "$PT/heldout" --preset tiny --batch-size 32 --lr 2e-3 \
  --warmup 100 --max-steps 1000 --eval-every 500 --save-every 1000 --out "$PT/run" --overwrite --quiet
# its last lines: held-out masked-LM accuracy beside always predicting the most frequent masked token
echo "model folder: $PT/run/model; curves: $PT/run/curves.png; numbers: $PT/run/summary.json"
took

STEP=$SECONDS
echo
echo "== 6. Fill-mask with the BERT pretrained in step 5 (its masked-LM head; MiniLM has none) =="
bertlab fill-mask --model "$PT/run/model" --top-k 3 \
  "Return the [MASK] of the file." "Create a new [MASK] object."
took

STEP=$SECONDS
echo
echo "== 7. Inside MiniLM: where 'it' looks (last layer, all heads) and every token's vectors from 2 layers =="
bertlab attention --model minilm --layer -1 --head all -o "$RUNS/attention.png" --overwrite --print-top it
printf "The animal didn't cross the street because it was too tired.\n" > "$RUNS/lines.txt"
bertlab extract-features --model minilm "$RUNS/lines.txt" -o "$RUNS/features.jsonl" --layers=-1,-2 --overwrite --quiet
python -c "
import json
row = json.loads(open('$RUNS/features.jsonl').readline())
layers = row['features'][0]['layers']
print(f\"{len(row['features'])} tokens x {len(layers)} layers x {len(layers[0]['values'])} values\")"
echo "picture: $RUNS/attention.png; features: $RUNS/features.jsonl"
took

STEP=$SECONDS
echo
echo "== 8. A Chinese BERT: the zh_CN messages of this machine's gettext catalogs -> a vocabulary whose CJK =="
echo "==    characters are single tokens -> whole-word masking by jieba -> MLM + NSP of a tiny BERT -> fill-mask =="
ZH=$RUNS/chinese
bertlab data gettext --lang zh_CN -o "$ZH/corpus" --overwrite 2> /dev/null | tail -1
bertlab vocab "$ZH/corpus/train.zh_CN" --vocab-size 4000 -o "$ZH/vocab" --overwrite > /dev/null
for split in train valid; do
  bertlab create-pretraining-data "$ZH/corpus/$split.zh_CN" --vocab "$ZH/vocab" -o "$ZH/$split" --jieba \
    --max-seq-length 32 --max-predictions-per-seq 5 --dupe-factor 3 --overwrite --quiet 2> /dev/null | head -1
done
OMP_NUM_THREADS=1 bertlab pretrain --data "$ZH/train" --eval-data "$ZH/valid" --preset tiny --batch-size 32 \
  --lr 2e-3 --warmup 100 --max-steps 1000 --eval-every 1000 --out "$ZH/run" --overwrite --quiet
bertlab fill-mask --model "$ZH/run/model" --top-k 5 "我爱中[MASK]"
echo "model folder: $ZH/run/model (docs/results/: the same on Debian's Chinese descriptions, and classification vs TF-IDF)"
took

STEP=$SECONDS
echo
echo "== 9. Translation: the Transformer of 'Attention Is All You Need' learns German -> English from the =="
echo "==    messages of nine GNU programs (2,926 pairs, shipped), then beam search on two programs it never saw =="
TR=$RUNS/translate
bertlab translate-train --data data/gettext-gnu-de --src de --tgt en --joint-vocab --vocab-size 4000 \
  --preset small --max-tokens 1024 --lr 1e-3 --warmup 100 --max-steps 500 --eval-every 500 \
  --bleu-sentences 100 --seed 0 --out "$TR" --overwrite --quiet
bertlab translate --model "$TR/model" data/gettext-gnu-de/test.de --beam 4 --ref data/gettext-gnu-de/test.en \
  > "$TR/test.hyp"
printf 'Datei nicht gefunden\nzu viele Argumente\nSpeicher erschöpft\n' | bertlab translate --model "$TR/model" --beam 4
echo "model folder: $TR/model; curves: $TR/curves.png; test translations: $TR/test.hyp"
took

STEP=$SECONDS
echo
echo "== 10. GPT: a small decoder-only language model learns the docstring summaries, then samples =="
GPT=$RUNS/gpt
bertlab gpt-train data/python-docs/summaries.txt --out "$GPT" --preset tiny --vocab-size 2000 --block-size 64 \
  --batch-size 16 --lr 2e-3 --warmup 20 --max-steps 600 --eval-every 600 --overwrite --quiet
for prompt in "Return the" "Create a"; do
  bertlab generate --model "$GPT/model" "$prompt" -n 16 --temperature 0.8 --top-p 0.95 --stop '\n'
done
echo "model folder: $GPT/model"
took
echo
echo "main job done in $((SECONDS - STARTED)) s"
