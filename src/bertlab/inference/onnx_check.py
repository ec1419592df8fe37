"""Does an ONNX export compute what bertlab computes? onnxruntime on the export against the bertlab
model (its usual path, CPU speed paths included) on real text of varied length: the largest
absolute difference of every output at real (non-padding) positions, and for the decoders the
tokens of greedy decoding (GPT, translation) and beam search (translation), which must be identical.
"""
import torch

from .embed import padded_tensors
from .generate import SamplingOptions, generate
from .onnx_runtime import load_onnx
from .translate import beam_search, greedy_decode

# Real sentences of varied length (descriptions from the Linux man pages, data/manpages).
SAMPLE_TEXTS = (
    "change ownership of a file",
    "get memory page size",
    "create a child process",
    "copy files and directories, preserving their modes, owners and timestamps when asked to",
    "list directory contents",
    "send a signal to a process or a group of processes, such as the request to terminate or to stop",
    "report file system disk space usage",
    "search a file for lines that match a pattern",
)


def check_export(loaded, folder, texts=None, tolerance: float = 1e-4, log=print, strict: bool = True) -> dict:
    """{output name: max abs difference, ...} of the export in `folder` against `loaded` (a
    LoadedModel); with `strict`, a difference beyond `tolerance`, or a token that differs, is a
    ValueError (without, the report only says it: an int8 export's cost)."""
    texts = list(texts or SAMPLE_TEXTS)
    onnx_model = load_onnx(folder)
    check = {"bert": _check_bert, "modernbert": _check_bert, "finetuned": _check_bert, "gpt": _check_gpt,
             "translation": _check_translation}[loaded.kind]
    with torch.inference_mode():
        report = check(loaded, onnx_model, texts)
    for name, value in report.items():
        log(f"check {name}: {value}")
    if not strict:
        return report
    bad = {k: v for k, v in report.items() if k.startswith("max_abs") and not v <= tolerance}
    if bad:
        raise ValueError(f"{folder}: onnxruntime differs from bertlab beyond {tolerance}: {bad}")
    if report.get("tokens_identical") is False:
        raise ValueError(f"{folder}: onnxruntime's decoded tokens differ from bertlab's")
    return report


def _max_abs(a, b, real=None) -> float:
    """max |a - b|, over the rows of `real` (bool, the leading dims of a) only when given."""
    diff = (a.float() - b.float()).abs()
    if real is not None:
        diff = diff[real]
    return float(diff.max()) if diff.numel() else 0.0


def bert_inputs(tokenizer, texts, config, choices: int = 0):
    """(input_ids, attention_mask, token_type_ids) of `texts` padded into one batch; the second half
    of each text is segment B where the model has two segments (ModernBERT has none: all zeros,
    which its graph does not take); with `choices`, (batch, choices, len)."""
    sequences = [s[:config.max_position_embeddings] for s in tokenizer.tokenize_ids_batch(texts)]
    ids, mask = padded_tensors(sequences, tokenizer.pad_token_id)
    types = torch.zeros_like(ids)
    if getattr(config, "type_vocab_size", 1) > 1:
        for row, s in enumerate(sequences):
            types[row, len(s) // 2:len(s)] = 1
    if choices:
        rows = ids.size(0) // choices * choices
        ids, mask, types = (t[:rows].view(-1, choices, t.size(1)) for t in (ids, mask, types))
    return ids, mask, types


def _check_bert(loaded, onnx_model, texts):
    model = loaded.model
    choices = 2 if type(model).__name__ == "BertForMultipleChoice" else 0
    ids, mask, types = bert_inputs(loaded.tokenizer, texts, model.config, choices)
    report = {"inputs": f"{ids.shape[0]} texts of {int(mask.sum(-1).min())}-{int(mask.sum(-1).max())} tokens"}
    inputs = {"token_type_ids": types, "attention_mask": mask}
    if loaded.kind in ("bert", "modernbert"):
        ours, theirs = loaded.encoder(ids, **inputs), onnx_model(ids, **inputs)
        report["max_abs sequence_output"] = _max_abs(ours.sequence_output, theirs.sequence_output, mask.bool())
        if ours.pooled_output is not None:  # ModernBERT has no pooler
            report["max_abs pooled_output"] = _max_abs(ours.pooled_output, theirs.pooled_output)
        return report
    ours, theirs = model(ids, **inputs), onnx_model(ids, **inputs)
    ours, theirs = (ours, theirs) if isinstance(ours, tuple) else ((ours,), (theirs,))
    names = onnx_model.meta["graphs"]["model.onnx"]["outputs"]
    per_token = type(model).__name__.endswith(("ForTokenClassification", "ForQuestionAnswering"))
    for name, a, b in zip(names, ours, theirs):
        report[f"max_abs {name}"] = _max_abs(a, b, mask.bool() if per_token else None)
    return report


def _check_gpt(loaded, onnx_model, texts, new_tokens: int = 12):
    model, tokenizer = loaded.model, loaded.tokenizer
    room = model.config.n_positions - new_tokens
    prompts = [ids[:room] for ids in (tokenizer.encode(t) for t in texts) if ids]
    from .generate import left_pad
    ids, mask = left_pad(prompts, 0)
    mask = torch.ones_like(ids) if mask is None else mask
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    report = {"inputs": f"{len(prompts)} prompts of {min(map(len, prompts))}-{max(map(len, prompts))} tokens"}
    # the prompt, then cached steps fed bertlab's greedy tokens: every step's logits compared
    cache, onnx_cache = model.new_cache(), onnx_model.new_cache()
    ours, _ = model(ids, cache=cache, attention_mask=mask, positions=positions)
    theirs, _ = onnx_model(ids, cache=onnx_cache, attention_mask=mask, positions=positions)
    worst = _max_abs(ours, theirs, mask.bool())
    for _ in range(4):
        token = ours[:, -1].argmax(-1, keepdim=True)
        mask, positions = torch.cat([mask, torch.ones_like(token)], 1), positions[:, -1:] + 1
        ours, _ = model(token, cache=cache, attention_mask=mask, positions=positions)
        theirs, _ = onnx_model(token, cache=onnx_cache, attention_mask=mask, positions=positions)
        worst = max(worst, _max_abs(ours, theirs))
    report["max_abs logits (prompt and 4 cached steps)"] = worst
    options = SamplingOptions(max_new_tokens=new_tokens)
    same = generate(model, prompts, options, prepack=False) == generate(onnx_model, prompts, options)
    report["tokens_identical"] = same
    return report


def _check_translation(loaded, onnx_model, texts):
    model, c = loaded.model, loaded.model.config
    longest = c.max_position_embeddings - 1
    sources = [loaded.tokenizer.encode(t)[:longest] for t in texts]
    sources = [s for s in sources if s]
    src = torch.full((len(sources), max(map(len, sources)) + 1), c.pad_token_id, dtype=torch.long)
    for row, s in enumerate(sources):
        src[row, :len(s) + 1] = torch.tensor(s + [c.eos_token_id])
    report = {"inputs": f"{len(sources)} sources of {min(map(len, sources))}-{max(map(len, sources))} tokens"}
    memory, src_mask = model.encode(src)
    cross_kv, onnx_mask = onnx_model.encode(src)
    tokens = torch.full((len(sources), 1), c.bos_token_id, dtype=torch.long)
    cache, onnx_cache = model.new_cache(), onnx_model.new_cache()
    worst = 0.0
    for _ in range(5):  # cached steps fed bertlab's greedy tokens
        ours = model.decode(tokens[:, -1:], memory, src_mask, cache)[:, -1]
        theirs = onnx_model.decode(tokens[:, -1:], cross_kv, onnx_mask, onnx_cache)[:, -1]
        worst = max(worst, _max_abs(ours, theirs))
        tokens = torch.cat([tokens, ours.argmax(-1, keepdim=True)], 1)
    report["max_abs logits (5 cached steps)"] = worst
    greedy = greedy_decode(model, src) == greedy_decode(onnx_model, src)
    beams = [[h.tokens for h in hyps] for hyps in beam_search(model, src, 4, nbest=4)]
    onnx_beams = [[h.tokens for h in hyps] for hyps in beam_search(onnx_model, src, 4, nbest=4)]
    report["tokens_identical"] = greedy and beams == onnx_beams
    return report
