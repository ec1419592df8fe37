"""Absolute against relative positions: held-out masked-LM accuracy of pretrained models at the
trained length and beyond it (docs/models/relative_positions.md has the commands that make the runs).

    python benchmarks/bench_positions.py --run absolute=runs/absolute --run nezha=runs/nezha \
        --eval 64=held64 --eval 128=held128 [--instances 1000] [--threads 1]

Each --run is a `bertlab pretrain` folder (its model/ is loaded); each --eval a shard folder made
from held-out documents with create-pretraining-data at that --max-seq-length. A model that cannot
read a length (absolute positions past max_position_embeddings) shows the error it raises."""
import argparse
import json

import torch


def evaluate_at(model, folder, instances: int) -> dict:
    from bertlab.pretraining.evaluation import evaluate
    from bertlab.pretraining.shards import PretrainingData
    data = PretrainingData(folder)
    return evaluate(model, data, batch_size=32, device="cpu", limit=instances)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--run", action="append", required=True, metavar="NAME=DIR")
    p.add_argument("--eval", action="append", required=True, metavar="LENGTH=DIR")
    p.add_argument("--instances", type=int, default=1000)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    from bertlab.interop.load import load_model
    rows = []
    for name, folder in (r.split("=", 1) for r in args.run):
        model = load_model(f"{folder}/model").model.eval()
        for length, data in (e.split("=", 1) for e in args.eval):
            try:
                m = evaluate_at(model, data, args.instances)
                cell = {"mlm_accuracy": round(m["mlm_accuracy"], 4), "mlm_loss": round(m["mlm_loss"], 4)}
            except ValueError as e:
                cell = {"error": str(e)}
            rows.append({"model": name, "position_embedding_type": model.config.position_embedding_type,
                         "length": int(length), **cell})
            print(json.dumps(rows[-1]), flush=True)
    print("\n| model | length | held-out MLM accuracy | MLM loss |\n|---|---|---|---|")
    for r in rows:
        if "error" in r:
            print(f"| {r['model']} | {r['length']} | cannot run: {r['error']} | |")
        else:
            print(f"| {r['model']} | {r['length']} | {r['mlm_accuracy']:.3f} | {r['mlm_loss']:.3f} |")


if __name__ == "__main__":
    main()
