"""Do we learn to translate as well as HF from the same data and the same work? Seeds x sides.

    python benchmarks/translate_parity.py --data CORPUS --src de --tgt en -o OUT \
        [--seeds 42 1 2] [--steps 967] [--max-tokens 2048] [--test-lines 1000]

CORPUS comes from `bertlab data gettext --lang de -o CORPUS`: whole catalogs go to one split, so the
test programs are ones neither side trained on. Each seed trains two models on the same joint BPE
vocabulary (learned once, OUT/vocab) with the paper's small Transformer, Adam (0.9, 0.98, 1e-9),
--lr with --warmup steps then inverse square root, clip 1.0, label smoothing 0.1, --steps steps:

* ours: `bertlab translate-train` with token-budget batches of --max-tokens padded tokens a side;
* HF: `MarianMTModel` of the same shape trained the way HF's translation example trains one
  (`translate_hf_trainer.py --batches sentences --init hf`): Seq2SeqTrainer, shuffled pairs padded by
  DataCollatorForSeq2Seq, HF's own initialisation. Its batch holds as many pairs as ours hold on
  average (training pairs / our batches per epoch), so at equal steps both sides see the same pairs
  and epochs; the target tokens each side saw are reported.

Then beam 4 on the first --test-lines test pairs. Both sides are scored here, by the same sacreBLEU
calls, and by the same validation NLL (`validation_loss`, per target token). The sides run one at a
time, alternating which goes first; the table (OUT/results.md) and OUT/results.json give every run
and the mean of the seeds. A finished run is not repeated when the command is run again.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def threads_env(threads: int) -> dict:
    return {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}


def run(command, log, threads):
    print("$ " + " ".join(command), file=sys.stderr, flush=True)
    with open(log, "w") as f:
        done = subprocess.run(command, stdout=f, stderr=subprocess.STDOUT, env=threads_env(threads))
    if done.returncode:
        with open(log) as f:
            sys.exit(f"failed ({done.returncode}); the end of {log}:\n" + "".join(f.readlines()[-20:]))


def score(hyp_file, ref_lines, target_language) -> dict:
    import sacrebleu
    from bertlab.interop.translation_folder import bleu_tokenize
    from bertlab.io import read_lines
    hyps = read_lines(hyp_file)
    if len(hyps) != len(ref_lines):
        sys.exit(f"{hyp_file}: {len(hyps)} translations for {len(ref_lines)} references")
    bleu = sacrebleu.corpus_bleu(hyps, [ref_lines], tokenize=bleu_tokenize(target_language))
    return {"bleu": bleu.score, "brevity_penalty": bleu.bp, "chrf": sacrebleu.corpus_chrf(hyps, [ref_lines]).score}


def ours(args, seed, out, test_src):
    model_out = os.path.join(out, "run")
    if not os.path.exists(os.path.join(model_out, "summary.json")):
        run(["bertlab", "translate-train", "--data", args.data, "--src", args.src, "--tgt", args.tgt,
             "--vocab", args.vocab, "--preset", "small", "--out", model_out, "--overwrite",
             "--max-steps", str(args.steps), "--max-tokens", str(args.max_tokens), "--lr", str(args.lr),
             "--warmup", str(args.warmup), "--grad-clip", "1.0", "--label-smoothing", "0.1",
             "--eval-every", str(args.steps), "--bleu-sentences", "0", "--seed", str(seed), "--quiet",
             "--device", "cpu"], os.path.join(out, "train.log"), args.threads)
    hyp = os.path.join(out, "test.hyp")
    if not os.path.exists(hyp):
        with open(hyp + ".part", "w") as f:
            done = subprocess.run(["bertlab", "translate", "--model", os.path.join(model_out, "model"), test_src,
                                   "--beam", "4", "--device", "cpu"], stdout=f,
                                  env=threads_env(args.threads))
        if done.returncode:
            sys.exit(f"bertlab translate failed ({done.returncode})")
        os.replace(hyp + ".part", hyp)
    with open(os.path.join(model_out, "summary.json")) as f:
        s = json.load(f)
    return {"valid_nll": s["valid_nll"], "target_tokens": s.get("target_tokens"), "seconds": s["seconds"]}, hyp


HF_BATCHES = {"hf": "sentences", "hf_tokens": "tokens"}  # HF's sides and the batches each is fed


def hf(args, seed, out, sentences, batches):
    summary = os.path.join(out, "summary.json")
    if not os.path.exists(summary):
        run([sys.executable, os.path.join(HERE, "translate_hf_trainer.py"), "--data", args.data, "--src", args.src,
             "--tgt", args.tgt, "--vocab", args.vocab, "--preset", "small", "-o", out,
             "--batches", batches, "--train-batch-sentences", str(sentences), "--init", "hf",
             "--scale-embedding", args.hf_scale_embedding, "--max-steps", str(args.steps),
             "--max-tokens", str(args.max_tokens), "--lr", str(args.lr), "--warmup", str(args.warmup),
             "--clip-norm", "1.0", "--label-smoothing", "0.1", "--seed", str(seed), "--beam", "4",
             "--test-limit", str(args.test_lines), "--threads", str(args.threads)], os.path.join(out, "train.log"),
            args.threads)
    with open(summary) as f:
        s = json.load(f)
    return {"valid_nll": s["valid_nll"], "target_tokens": s["target_tokens"], "seconds": s["seconds"]}, \
        os.path.join(out, "test.hyp")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", required=True, metavar="DIR", help="a `bertlab data gettext` corpus")
    p.add_argument("--src", default="de")
    p.add_argument("--tgt", default="en")
    p.add_argument("-o", "--out", required=True, metavar="DIR")
    p.add_argument("--seeds", type=int, nargs="+", default=[42, 1, 2])
    p.add_argument("--steps", type=int, default=967)
    p.add_argument("--max-tokens", type=int, default=2048, help="our batches' padded tokens a side")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--warmup", type=int, default=500)
    p.add_argument("--test-lines", type=int, default=1000)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--hf-scale-embedding", choices=("yes", "no"), default="yes",
                   help="MarianConfig.scale_embedding for HF's model (its default is no; the paper's is yes)")
    p.add_argument("--sides", default="ours,hf",
                   help="comma-separated: ours, hf (HF's example: pairs a batch), hf_tokens (HF's model, loop "
                        "and initialisation fed our token-budget batches: the batching held equal)")
    args = p.parse_args()
    unknown = set(args.sides.split(",")) - {"ours", *HF_BATCHES}
    if unknown:
        p.error(f"--sides: unknown side(s) {', '.join(sorted(unknown))}; known: ours, {', '.join(HF_BATCHES)}")
    os.makedirs(args.out, exist_ok=True)

    from bertlab.data.parallel import ParallelData
    from bertlab.io import read_lines
    from bertlab.translation.objective import translation_vocabularies
    path = lambda split, lang: os.path.join(args.data, f"{split}.{lang}")  # noqa: E731
    args.vocab = os.path.join(args.out, "vocab")
    reuse = os.path.isdir(os.path.join(args.vocab, "source_tokenizer"))
    source, target = translation_vocabularies(args.out, path("train", args.src), path("train", args.tgt),
                                              joint_vocab=True, resume=reuse)
    train = ParallelData.from_files(path("train", args.src), path("train", args.tgt), source, target, 254)
    our_batches = len(train.batches(0, args.max_tokens, seed=0))
    sentences = round(len(train) / our_batches)
    print(f"{len(train):,} training pairs; ours: {our_batches} batches an epoch of <= {args.max_tokens} padded "
          f"tokens a side; HF: {sentences} pairs a batch", file=sys.stderr)
    test_src = os.path.join(args.out, f"test.{args.src}")
    refs = read_lines(path("test", args.tgt))[:args.test_lines]
    with open(test_src, "w", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in read_lines(path("test", args.src))[:args.test_lines])

    sides = args.sides.split(",")
    results = []
    for n, seed in enumerate(args.seeds):
        for side in (sides if n % 2 == 0 else sides[::-1]):  # alternate which side runs first
            out = os.path.join(args.out, f"{side}_seed{seed}")
            os.makedirs(out, exist_ok=True)
            if side == "ours":
                values, hyp = ours(args, seed, out, test_src)
            else:
                values, hyp = hf(args, seed, out, sentences, HF_BATCHES[side])
            values.update(score(hyp, refs, args.tgt), side=side, seed=seed)
            results.append(values)
            print(json.dumps(values), file=sys.stderr, flush=True)

    lines = ["| side | seed | valid NLL | test BLEU | BP | test chrF | target tokens seen | train s |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        lines.append(f"| {r['side']} | {r['seed']} | {r['valid_nll']:.3f} | {r['bleu']:.2f} | {r['brevity_penalty']:.2f} "
                     f"| {r['chrf']:.1f} | {int(r['target_tokens'] or 0):,} | {r['seconds']:.0f} |")
    for side in sides:
        mine = [r for r in results if r["side"] == side]
        mean = {k: statistics.mean(r[k] for r in mine) for k in ("valid_nll", "bleu", "brevity_penalty", "chrf")}
        lines.append(f"| **{side}, mean of {len(mine)}** | | **{mean['valid_nll']:.3f}** | **{mean['bleu']:.2f}** | "
                     f"{mean['brevity_penalty']:.2f} | **{mean['chrf']:.1f}** | | |")
    table = "\n".join(lines)
    print(table)
    with open(os.path.join(args.out, "results.md"), "w") as f:
        f.write(table + "\n")
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump({"settings": vars(args), "hf_batch_pairs": sentences, "runs": results}, f, indent=1)


if __name__ == "__main__":
    main()
