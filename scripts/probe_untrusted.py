"""Hand bertlab crafted files and flags and say how each case ends.

Each case runs `python -m bertlab ...` in a child process with a deadline and a cap on its address
space, so a hang, a crash, a runaway allocation and a traceback are each seen as such. A case
passes when it ends the way a careful tool would: a one-line `bertlab CMD: error: ...` naming the
problem (exit 2), or a correct run where the input is acceptable; its own check then looks at what
is left on disk (a user's file that must survive, a finished model that must not be replaced).

    python scripts/probe_untrusted.py [--only SUBSTRING] [--keep DIR]

Prints one line a case and a count of how the cases ended; exits 1 if any case did not pass.
"""
import argparse
import gzip
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile

import torch

MEMORY_CAP = 6 << 30  # address space of each child: a runaway allocation fails instead of swapping
DEADLINE = 180  # seconds a case may take
CORPUS = ("The cat sat on the mat. The dog ran to the park. A bird sang in the tree. " * 3 + "\n\n") * 40
WORDS = "the cat sat on mat dog ran to park a bird sang in tree . , and it was".split()


def run(argv, cwd):
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))
    start = time.perf_counter()
    try:
        done = subprocess.run([sys.executable, "-m", "bertlab", *map(str, argv)], cwd=cwd, capture_output=True,
                              text=True, timeout=DEADLINE, preexec_fn=limit, stdin=subprocess.DEVNULL,
                              env={**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"})
    except subprocess.TimeoutExpired:
        return "hung", "", time.perf_counter() - start
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    last = lines[-1] if lines else ""
    if done.returncode < 0:
        end = f"crashed (signal {-done.returncode})"
    elif "Traceback" in done.stderr:
        end = "traceback"
    elif done.returncode == 2 and last.startswith("bertlab") and "error:" in last:
        end = "clear error" + (" (out of memory)" if "out of memory" in last else "")
    elif "out of memory" in done.stderr.lower() or "MemoryError" in done.stderr:
        end = "ran out of memory"
    elif done.returncode == 0:
        end = "ran"
    else:
        end = f"exit {done.returncode}"
    return end, last if end != "ran" else done.stdout.strip().splitlines()[-1:] and done.stdout.strip().splitlines()[-1], \
        time.perf_counter() - start


# ---- fixtures ---------------------------------------------------------------------------------

def bert_folder(root):
    from bertlab import BertConfig, BertForPreTraining, BertTokenizer, save_pretrained
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=64)
    folder = os.path.join(root, "bert")
    save_pretrained(BertForPreTraining(config).eval(), folder, BertTokenizer({t: i for i, t in enumerate(vocab)}))
    return folder


def text_file(root, name="corpus.txt", text=CORPUS):
    path = os.path.join(root, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


def copy(src, root, name):
    dst = os.path.join(root, name)
    shutil.copytree(src, dst, symlinks=True)
    return dst


def edit_json(path, **changes):
    values = json.load(open(path))
    values.update(changes)
    with open(path, "w") as f:
        f.write(json.dumps(values))


def write_bytes(path, data: bytes):
    with open(path, "wb") as f:
        f.write(data)


def rezip_deflated(path):
    with zipfile.ZipFile(path) as src:
        records = [(i.filename, src.read(i)) for i in src.infolist()]
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as dst:
        for name, data in records:
            dst.writestr(name, data)


def tamper_checkpoint(path, change):
    state = torch.load(path, weights_only=True)
    change(state)
    torch.save(state, path)


# ---- the cases --------------------------------------------------------------------------------

def cases(root, fx):
    """(name, argv or a function of a case folder returning argv, expected end, check or None)."""
    bert, corpus = fx["bert"], fx["corpus"]

    def embed_with(name, prepare, *extra):
        def make(case):
            folder = copy(bert, case, "model")
            prepare(folder)
            return ["embed", text_file(case, "in.txt", "the cat sat\n"), "-o", os.path.join(case, "o.npy"),
                    "--model", folder, *extra]
        return name, make
    config = lambda **c: (lambda f: edit_json(os.path.join(f, "config.json"), **c))  # noqa: E731

    def raw_config(text):
        return lambda f: write_bytes(os.path.join(f, "config.json"), text.encode())

    def weights(change):
        def prepare(f):
            from safetensors.torch import load_file, save_file
            path = os.path.join(f, "model.safetensors")
            tensors = load_file(path)
            change(f, tensors)
            if os.path.exists(path):
                save_file(tensors, path)
        return prepare

    def as_bin(mangle):
        def change(f, tensors):
            os.remove(os.path.join(f, "model.safetensors"))
            path = os.path.join(f, "pytorch_model.bin")
            mangle(path, tensors)
        return change

    def int_weights(dtype):
        def change(f, tensors):
            name = "bert.embeddings.word_embeddings.weight"
            name = name if name in tensors else next(n for n in tensors if "word_embeddings" in n)
            tensors[name] = tensors[name].to(dtype)
        return change

    def fifo(name):
        def prepare(f):
            os.remove(os.path.join(f, name))
            os.mkfifo(os.path.join(f, name))
        return prepare

    error = "clear error"
    out = []
    # 100,000 layers of this tiny model are 5 GB, which a large machine may hold: refused by the size
    # rule there, by the allocator under this probe's cap; 10^9 layers are refused by the rule anywhere
    out.append((*embed_with("config num_hidden_layers 100000", config(num_hidden_layers=100_000)), None, None))
    out.append((*embed_with("config num_hidden_layers 10^9", config(num_hidden_layers=10**9)), error, None))
    for field, value in (("hidden_size", 4 * 10**8), ("intermediate_size", 10**12), ("max_position_embeddings", 10**12),
                         ("type_vocab_size", 10**12), ("vocab_size", 10**12), ("num_attention_heads", 10**9),
                         ("hidden_size", -1), ("hidden_size", 0), ("layer_norm_eps", 0)):
        out.append((*embed_with(f"config {field} {value}", config(**{field: value})), error, None))
    for name, text in (("nested 200,000 deep", "[" * 200_000 + "]" * 200_000), ("NaN", '{"hidden_size": NaN}'),
                       ("Infinity", '{"layer_norm_eps": Infinity}'), ("a string size", '{"hidden_size": "32"}'),
                       ("a bool size", '{"hidden_size": true}'), ("a list", "[1, 2]"), ("not JSON", "{hidden_size: 32"),
                       ("empty", "")):
        out.append((*embed_with(f"config.json {name}", raw_config(text)), error, None))
    out.append((*embed_with("config.json not UTF-8", lambda f: write_bytes(os.path.join(f, "config.json"),
                                                                           b'{"x": "\xff"}')), error, None))
    out.append((*embed_with("config.json a 100 MB file", lambda f: write_bytes(
        os.path.join(f, "config.json"), b'{"x": "' + b"a" * (100 << 20) + b'"}')), error, None))
    out.append((*embed_with("config.json a named pipe", fifo("config.json")), error, None))
    out.append((*embed_with("vocab.txt a named pipe", fifo("vocab.txt")), error, None))
    out.append((*embed_with("model.safetensors a named pipe", fifo("model.safetensors")), error, None))
    out.append((*embed_with("config.json a folder", lambda f: (os.remove(os.path.join(f, "config.json")),
                                                               os.mkdir(os.path.join(f, "config.json")))), error, None))
    out.append((*embed_with("tokenizer_config.json do_lower_case \"yes\"", lambda f: write_bytes(
        os.path.join(f, "tokenizer_config.json"), b'{"do_lower_case": "yes"}')), error, None))
    out.append((*embed_with("tokenizer_config.json a list", lambda f: write_bytes(
        os.path.join(f, "tokenizer_config.json"), b'[1]')), error, None))
    for dtype in (torch.int64, torch.int32, torch.bool, torch.uint8):
        out.append((*embed_with(f"weights of dtype {dtype}", weights(int_weights(dtype))), error, None))
    out.append((*embed_with("pytorch_model.bin deflated (a zip bomb's shape)", weights(as_bin(
        lambda p, t: (torch.save(t, p), rezip_deflated(p))))), error, None))
    out.append((*embed_with("pytorch_model.bin in the pre-1.6 format", weights(as_bin(
        lambda p, t: torch.save(t, p, _use_new_zipfile_serialization=False)))), error, None))
    out.append((*embed_with("pytorch_model.bin with a pickle payload", weights(as_bin(
        lambda p, t: _pickle_payload(p)))), error, None))
    out.append((*embed_with("pytorch_model.bin a list of tensors", weights(as_bin(
        lambda p, t: torch.save(list(t.values()), p)))), error, None))
    out.append((*embed_with("pytorch_model.bin as plain", weights(as_bin(lambda p, t: torch.save(t, p)))), "ran", None))

    # ---- run folders: checkpoints handed back to --resume
    gpt = fx["gpt"]

    def resume_gpt(name, change, expect=error):
        def make(case):
            run_folder = copy(gpt, case, "run")
            change(os.path.join(run_folder, "checkpoint.pt"), run_folder)
            return ["gpt-train", corpus, "-o", run_folder, "--preset", "test", "--max-steps", "6", "--resume", "--quiet",
                    "--block-size", "16", "--batch-size", "4"]
        return name, make, expect, None

    def optimizer_shape(state):
        moments = state["optimizer"]["state"]
        first = moments[next(iter(moments))]
        first["exp_avg"] = torch.zeros(3)
    out += [
        resume_gpt("checkpoint: optimizer moment of the wrong shape",
                   lambda p, _: tamper_checkpoint(p, optimizer_shape)),
        resume_gpt("checkpoint: a model tensor of the wrong shape", lambda p, _: tamper_checkpoint(
            p, lambda s: s["model"].__setitem__(next(iter(s["model"])), torch.zeros(2, 2)))),
        resume_gpt("checkpoint: a model tensor of dtype int64", lambda p, _: tamper_checkpoint(
            p, lambda s: s["model"].__setitem__(next(iter(s["model"])), s["model"][next(iter(s["model"]))].long()))),
        resume_gpt("checkpoint: negative step", lambda p, _: tamper_checkpoint(p, lambda s: s.__setitem__("step", -5))),
        resume_gpt("checkpoint: step 10^12", lambda p, _: tamper_checkpoint(p, lambda s: s.__setitem__("step", 10**12))),
        resume_gpt("checkpoint: no optimizer", lambda p, _: tamper_checkpoint(p, lambda s: s.pop("optimizer"))),
        resume_gpt("checkpoint: torch RNG state of 3 bytes", lambda p, _: tamper_checkpoint(
            p, lambda s: s["rng"].__setitem__("torch", torch.zeros(3, dtype=torch.uint8)))),
        resume_gpt("checkpoint: deflated", lambda p, _: rezip_deflated(p)),
        resume_gpt("checkpoint: truncated", lambda p, _: write_bytes(p, open(p, "rb").read()[:5000])),
        resume_gpt("checkpoint: a named pipe", lambda p, _: (os.remove(p), os.mkfifo(p))),
        resume_gpt("data/meta.json dtype \"O\"", lambda p, r: edit_json(os.path.join(r, "data", "meta.json"), dtype="O")),
        resume_gpt("data/meta.json dtype float64",
                   lambda p, r: edit_json(os.path.join(r, "data", "meta.json"), dtype="float64")),
        resume_gpt("data: token ids past the vocabulary", lambda p, r: _poke_ids(os.path.join(r, "data"))),
        resume_gpt("checkpoint: intact (control)", lambda p, _: None, expect="ran"),
    ]

    # ---- outputs that are not bertlab's to replace
    def finished_gpt_rerun(case):
        run_folder = copy(gpt, case, "run")
        os.remove(os.path.join(run_folder, "checkpoint.pt"))
        return ["gpt-train", corpus, "-o", run_folder, "--preset", "test", "--max-steps", "2", "--quiet"]

    def model_survives(case):
        return os.path.exists(os.path.join(case, "run", "model", "model.safetensors"))

    def foreign_overwrite(case):
        folder = os.path.join(case, "mine")
        os.makedirs(folder)
        text_file(folder, "thesis.txt", "years of work\n")
        return ["gpt-train", corpus, "-o", folder, "--preset", "test", "--max-steps", "2", "--quiet", "--overwrite"]

    def export_foreign(case):
        folder = os.path.join(case, "mine")
        os.makedirs(folder)
        text_file(folder, "thesis.txt", "years of work\n")
        return ["export", bert, "--onnx", folder, "--overwrite", "--no-check"]

    def export_sibling_tmp(case):
        os.makedirs(os.path.join(case, "out.tmp"))
        text_file(os.path.join(case, "out.tmp"), "thesis.txt", "years of work\n")
        return ["export", os.path.join(case, "missing-model"), "--onnx", os.path.join(case, "out"), "--no-check"]

    def user_tmp_file(case):
        folder = copy(gpt, case, "run")
        text_file(folder, ".tmp-notes", "mine\n")
        return ["gpt-train", corpus, "-o", folder, "--preset", "test", "--max-steps", "6", "--resume", "--quiet",
                "--block-size", "16", "--batch-size", "4"]

    def cpd_npy(case):  # a data folder bertlab made, where the user then kept a file of their own
        folder = os.path.join(case, "pdata")
        argv = ["create-pretraining-data", "--vocab", os.path.join(bert, "vocab.txt"), corpus, "-o", folder,
                "--max-seq-length", "32", "--dupe-factor", "1"]
        assert run(argv, case)[0] == "ran"
        write_bytes(os.path.join(folder, "notes.npy"), b"mine")
        return [*argv, "--overwrite"]

    def thesis_survives(case):
        return open(os.path.join(case, "mine", "thesis.txt")).read() == "years of work\n"
    out += [
        ("gpt-train rerun on a finished run (no checkpoint, no --overwrite)", finished_gpt_rerun, error, model_survives),
        ("gpt-train --overwrite on a folder bertlab did not make", foreign_overwrite, error, thesis_survives),
        ("export --overwrite on a folder bertlab did not make", export_foreign, error, thesis_survives),
        ("export leaves a user's sibling OUT.tmp", export_sibling_tmp, error,
         lambda case: os.path.exists(os.path.join(case, "out.tmp", "thesis.txt"))),
        ("a user's .tmp-notes survives a run start", user_tmp_file, "ran",
         lambda case: os.path.exists(os.path.join(case, "run", ".tmp-notes"))),
        ("create-pretraining-data --overwrite leaves a user's notes.npy", cpd_npy, "ran",
         lambda case: open(os.path.join(case, "pdata", "notes.npy"), "rb").read() == b"mine"),
    ]

    # ---- corpora, vectors, prompts, flags
    def gz_bomb(case):
        folder = os.path.join(case, "root", "var", "lib", "apt", "lists")
        os.makedirs(folder)
        with gzip.open(os.path.join(folder, "example.org_dists_x_Translation-en.gz"), "wb") as f:
            for _ in range(512):
                f.write(b"\0" * (1 << 20))  # 512 MB of zeros, half a megabyte packed
        return ["data", "english-corpus", "--sources", "apt", "--root", os.path.join(case, "root"), "--min-mb", "0",
                "-o", os.path.join(case, "corpus")]

    def vectors(text):
        def make(case):
            path = text_file(case, "vectors.txt", text)
            return ["word2vec", "similar", "--vectors", path, "cat"]
        return make
    out += [
        ("english-corpus: a 512 MB gzip bomb under --root", gz_bomb, None, None),
        ("vectors.txt with a NaN row", vectors("2 3\ncat 1 2 3\ndog nan 1 2\n"), error, None),
        ("vectors.txt with a duplicate word", vectors("2 3\ncat 1 2 3\ncat 1 2 3\n"), error, None),
        ("vectors.txt declaring 10^12 words", vectors("1000000000000 3\ncat 1 2 3\n"), error, None),
        ("vectors.txt declaring 10^12 dimensions", vectors("1 1000000000000\ncat 1 2 3\n"), error, None),
        ("word2vec train --dim 10^9", lambda case: ["word2vec", "train", corpus, "-o", os.path.join(case, "w"),
                                                    "--dim", 10**9, "--min-count", 1, "--quiet"], error, None),
        ("word2vec train --window 10^9", lambda case: ["word2vec", "train", corpus, "-o", os.path.join(case, "w"),
                                                       "--window", 10**9, "--min-count", 1, "--quiet"], error, None),
        ("gpt-train --n-layer 10^6", lambda case: ["gpt-train", corpus, "-o", os.path.join(case, "g"), "--preset", "test",
                                                   "--n-layer", 10**6, "--quiet"], error, None),
        ("gpt-train --n-embd 10^7", lambda case: ["gpt-train", corpus, "-o", os.path.join(case, "g"), "--preset", "test",
                                                  "--n-embd", 10**7, "--n-head", 1, "--quiet"], error, None),
        ("generate --beam-like --batch-size 10^9", lambda case: ["generate", "--model", os.path.join(gpt, "model"),
                                                                 "the cat", "--batch-size", 10**9, "-n", 4], None, None),
        ("generate -n 10^12", lambda case: ["generate", "--model", os.path.join(gpt, "model"), "the cat",
                                            "-n", 10**12], None, None),
        ("generate --prompts with CRLF lines", lambda case: ["generate", "--model", os.path.join(gpt, "model"),
                                                             "--prompts", _crlf(case), "-n", 2, "--seed", 1],
         "ran", None),
    ]
    return out


def _crlf(case):
    path = os.path.join(case, "prompts.txt")
    write_bytes(path, b"the cat\r\nthe dog\r\n")
    return path


def _pickle_payload(path):
    import pickle

    class Payload:
        def __reduce__(self):
            return (os.system, ("touch /tmp/bertlab-probe-pwned",))
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("archive/data.pkl", pickle.dumps(Payload(), protocol=2))
        z.writestr("archive/version", "3\n")


def _poke_ids(data):
    meta = json.load(open(os.path.join(data, "meta.json")))
    import numpy as np
    for name in ("train.bin", "val.bin"):
        path = os.path.join(data, name)
        if os.path.exists(path):
            ids = np.memmap(path, dtype=np.dtype(meta.get("dtype", "uint16")), mode="r+")
            ids[: len(ids) // 2] = np.iinfo(ids.dtype).max
            ids.flush()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="run the cases whose name holds this text")
    parser.add_argument("--keep", help="build the cases in this folder and keep it (default: a temporary one)")
    args = parser.parse_args()
    root = args.keep or tempfile.mkdtemp(prefix="bertlab-probe-")
    os.makedirs(root, exist_ok=True)
    fx = {"bert": bert_folder(root), "corpus": text_file(root)}
    gpt = os.path.join(root, "gpt")
    end, last, _ = run(["gpt-train", fx["corpus"], "-o", gpt, "--preset", "test", "--max-steps", "4",
                        "--save-every", "2", "--quiet", "--block-size", "16", "--batch-size", "4"], root)
    assert end == "ran" and os.path.exists(os.path.join(gpt, "checkpoint.pt")), (end, last)
    fx["gpt"] = gpt
    tally, failed = {}, 0
    for number, (name, make, expected, check) in enumerate(cases(root, fx)):
        if args.only and args.only not in name:
            continue
        case = os.path.join(root, f"case-{number:03d}")
        os.makedirs(case, exist_ok=True)
        argv = make(case) if callable(make) else make
        end, last, seconds = run(argv, case)
        ok = end.startswith(("clear error", "ran")) if expected is None else end == expected
        if ok and check is not None and not check(case):
            ok, end = False, end + ", but the check of what it left failed"
        if os.path.exists("/tmp/bertlab-probe-pwned"):
            ok, end = False, end + ", AND THE PAYLOAD RAN"
            os.remove("/tmp/bertlab-probe-pwned")
        tally[end] = tally.get(end, 0) + 1
        failed += not ok
        print(f"{'ok ' if ok else 'BAD'} {seconds:6.1f}s  {name}: {end}" + (f"\n      {last[:300]}" if last else ""),
              flush=True)
    print(f"\n{sum(tally.values())} cases: " + ", ".join(f"{n} {e}" for e, n in sorted(tally.items(), key=lambda x: -x[1]))
          + f"; {failed} not as they should be")
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
