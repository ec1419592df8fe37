"""Training-step time of BERT with absolute against relative positions, interleaved round by round
in one process so machine load falls on every kind alike.

    python benchmarks/bench_position_speed.py [--preset tiny] [--length 64] [--batch-size 32] [--steps 10]
        [--rounds 3] [--threads 1]

One step: forward (the masked-LM head at 10 positions), loss, backward, AdamW, dropout on. Prints
the median seconds per step of each kind and its ratio to absolute."""
import argparse
import statistics
import time

import torch


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", default="tiny")
    p.add_argument("--length", type=int, default=64)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    from bertlab.models import BertForPreTraining
    from bertlab.models.accelerate import accelerate
    from bertlab.pretraining.objective import preset_config
    kinds = ["absolute", "relative_key", "relative_key_query", "nezha"]
    models = {}
    for kind in kinds:
        torch.manual_seed(0)
        model = accelerate(BertForPreTraining(preset_config(args.preset, 8000, max_position_embeddings=args.length,
                                                            position_embedding_type=kind))).train()
        models[kind] = model, torch.optim.AdamW(model.parameters(), lr=1e-4)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, 8000, (args.batch_size, args.length), generator=g)
    positions = torch.randint(1, args.length, (args.batch_size, 10), generator=g)
    labels = torch.randint(5, 8000, (args.batch_size, 10), generator=g)
    times = {k: [] for k in kinds}
    for _ in range(args.rounds):
        for kind in kinds:
            model, opt = models[kind]
            for step in range(args.steps + 1):
                start = time.perf_counter()
                mlm, _ = model(ids, masked_lm_positions=positions)
                loss = torch.nn.functional.cross_entropy(mlm.reshape(-1, mlm.size(-1)), labels.reshape(-1))
                opt.zero_grad()
                loss.backward()
                opt.step()
                if step:  # the first step of a round warms up
                    times[kind].append(time.perf_counter() - start)
    base = statistics.median(times["absolute"])
    print("| position_embedding_type | s / step (median) | vs absolute |\n|---|---|---|")
    for kind in kinds:
        t = statistics.median(times[kind])
        print(f"| {kind} | {t:.3f} | {t / base:.2f}x |")


if __name__ == "__main__":
    main()
