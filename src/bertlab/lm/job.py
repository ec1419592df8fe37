"""`bertlab gpt-train` as a function a notebook can call: the run folder claimed, the tokenizer and
token files made from the text files (by the main process under torchrun, the others then read
them), the GPT sized to the tokenizer, and the run trained. The command line only turns its flags
into these arguments and prints the report (objective.report)."""
from ..io import make_folder
from ..models.gpt_config import GPTConfig
from ..training import run_inputs
from ..training.jobs import claim_run, main_process_first
from .data import gpt_data_settings, prepare_gpt_data
from .objective import GPTSettings, train_gpt

# What a GPT run writes into OUT besides the engine's files (checkpoint.RUN_OUTPUTS)
GPT_OUTPUTS = ("tokenizer", "data", run_inputs.NAME, "samples.txt")


def gpt_train_job(files, out, *, tokenizer="bpe", vocab_size=8000, val_fraction=0.05, preset="tiny", model=None,
                  block_size=256, device="auto", resume=False, overwrite=False, **settings) -> dict:
    """Train a GPT on the text `files` into the run folder `out`: a `tokenizer` ("bpe": learn
    `vocab_size` byte-level BPE tokens; "char"; or a folder with vocab.json + merges.txt) and token
    files (`val_fraction` of the lines held out) made in OUT, the `preset`'s GPTConfig sized to that
    vocabulary and `block_size` positions (`model`: fields to change, e.g. {"n_layer": 2}), trained
    with the other GPTSettings fields given as keywords (max_steps, lr, ...). A run already in OUT
    is replaced only with `overwrite`, continued only with `resume` (with the same files and
    tokenizer settings). Returns the summary (also OUT/summary.json); objective.report words it."""
    data = (tokenizer, vocab_size, val_fraction)
    resume = claim_run(out, files, resume, overwrite, gpt_data_settings(*data), GPT_OUTPUTS, "gpt-train")
    make_folder(out)
    tokenizer, data_dir = main_process_first(device, lambda reuse: prepare_gpt_data(files, out, *data, reuse=reuse), resume)
    eos = getattr(tokenizer, "eos_token_id", None)
    eos = 0 if eos is None else eos  # a character tokenizer has no end-of-text token
    config = GPTConfig.preset(preset, vocab_size=tokenizer.vocab_size, n_positions=block_size, bos_token_id=eos,
                              eos_token_id=eos, **(model or {}))
    s = GPTSettings(data=data_dir, out=out, model=config, block_size=block_size, device=device, resume=resume,
                    **settings)
    return train_gpt(s, tokenizer)


def export_gpt_checkpoint(run: str, out: str, overwrite: bool = False, state: dict | None = None) -> str:
    """The HF GPT-2 folder a `bertlab gpt-train` run writes at its end (OUT/model), made now from the
    run's last checkpoint, one file or sharded, with the run's tokenizer (bertlab export --hf)."""
    import os

    from ..interop.hf_gpt2 import save_pretrained
    from ..io import claim_output_folder
    from ..models.gpt import GPT
    from ..tokenization.char_level import load_gpt_tokenizer
    from ..training.checkpoint import checkpoint_model
    model, _ = checkpoint_model(run, lambda extra: GPT(GPTConfig.from_dict(extra["model"])), state)
    tokenizer = load_gpt_tokenizer(os.path.join(run, "tokenizer"))
    claim_output_folder(out, ("config.json", "model.safetensors", "vocab.json", "merges.txt", "chars.json",
                              "tokenizer_config.json", "generation_config.json"), overwrite, what="a model folder",
                        command="export")
    save_pretrained(model, out, tokenizer)
    return out
