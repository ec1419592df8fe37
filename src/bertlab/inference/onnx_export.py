"""`bertlab export DIR --onnx OUT`: a model folder as ONNX graphs that onnxruntime runs, checked
against bertlab on real inputs before the folder is written.

OUT is a folder: the graphs of onnx_graphs (model.onnx, or encoder.onnx and decoder_step.onnx) and
onnx.json, which says the kind, the model folder it came from, the config and the graphs' input
and output names (inference.onnx_runtime.load_onnx reads it). Batch and sequence axes (and past
positions) are dynamic: one export runs any batch of any length the model's positions allow.

The graphs are traced with PyTorch's exporter (torch.export, `dynamo=True`) inside
models.accelerate.plain_model(): the padded computation with a padding mask, never the CPU packing
that depends on which tokens of a batch are padding.
"""
import contextlib
import dataclasses
import io
import json
import logging
import os
import shutil
import warnings

import torch

from ..io import (
    MARKER,
    atomic_write_text,
    check_output_folder_path,
    claim_output_folder,
    foreign_entries,
    is_bertlab_folder,
    make_folder,
    mark_folder,
    output_entries,
    remove_entry,
    remove_stale_temp_files,
    temp_folder,
)
from ..models.accelerate import plain_model
from . import onnx_graphs as graphs
from .onnx_runtime import FORMAT, require_onnx


def graphs_of(loaded) -> dict:
    """{file name: (graph module, sample inputs, dynamic shapes)} for a LoadedModel."""
    from torch.export import Dim
    D = Dim.DYNAMIC
    model = loaded.model.eval()
    if loaded.kind in ("bert", "modernbert", "finetuned"):
        return {"model.onnx": _encoder_graph(loaded, D)}
    if loaded.kind == "gpt":
        c = model.config
        past = [torch.randn(2, c.n_head, 3, c.n_embd // c.n_head) for _ in range(2 * c.n_layer)]
        ids = torch.randint(0, c.vocab_size, (2, 3))
        mask, positions = torch.ones(2, 6, dtype=torch.long), torch.arange(3, 6).expand(2, 3)
        shapes = ({0: D, 1: D}, {0: D, 1: D}, {0: D, 1: D}, tuple({0: D, 2: D} for _ in past))
        return {"model.onnx": (graphs.GPTStepGraph(model), (ids, mask, positions, tuple(past)), shapes)}
    if loaded.kind == "translation":
        c = model.config
        src = torch.randint(4, c.source_vocab_size, (2, 5))
        with torch.no_grad():
            cross_kv, src_mask = graphs.TranslationEncoderGraph(model)(src)
        heads, d_head = c.attention_heads, c.d_model // c.attention_heads
        past = tuple(torch.randn(2, heads, 3, d_head) for _ in range(2 * c.decoder_layers))
        tokens = torch.randint(4, c.target_vocab_size, (2, 1))
        step_shapes = ({0: D}, {0: D, 1: D}, {0: D, 3: D}, tuple({0: D, 2: D} for _ in past))
        return {"encoder.onnx": (graphs.TranslationEncoderGraph(model), (src,), ({0: D, 1: D},)),
                "decoder_step.onnx": (graphs.TranslationStepGraph(model), (tokens, cross_kv, src_mask, past),
                                      step_shapes)}
    raise ValueError(f"a model of kind {loaded.kind!r} cannot be exported "
                     "(bert, modernbert, finetuned, gpt, translation can)")


def _encoder_graph(loaded, D):
    """A BERT-family encoder (the one inside a pretraining or masked-LM model) or a fine-tuned
    model; its inputs are its graph's (onnx_graphs.encoder_inputs: ModernBERT has no segments)."""
    model = loaded.model
    graph = graphs.HeadGraph(model) if loaded.kind == "finetuned" else graphs.EncoderGraph(loaded.encoder)
    shape = (2, 2, 5) if type(model).__name__ == "BertForMultipleChoice" else (2, 5)
    ids = torch.randint(1, model.config.vocab_size, shape)
    mask = torch.ones(shape, dtype=torch.long)
    mask[0, ..., -2:] = 0
    sample = (ids, mask, torch.zeros(shape, dtype=torch.long))[:len(graph.inputs)]
    axes = {i: D for i in range(len(shape))}
    return graph, sample, (axes,) * len(sample)


def export_graph(graph, sample, shapes, path, opset: int = 18):
    """Trace `graph` on `sample` and write it to `path` (one file, weights inside)."""
    with torch.no_grad(), plain_model(graph), warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
            _quiet_logger("torch.onnx"):
        warnings.simplefilter("ignore")  # the tracer's notes on our Python-level checks; the check below decides
        program = torch.onnx.export(graph, sample, dynamic_shapes=shapes, input_names=list(graph.inputs),
                                    output_names=list(graph.outputs), opset_version=opset, dynamo=True,
                                    verbose=False)
        program.save(path, external_data=False)


@contextlib.contextmanager
def _quiet_logger(name):
    """The exporter logs a warning for every torchvision operator it cannot register: noise here."""
    logger = logging.getLogger(name)
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)



def metadata(loaded, folder, files: dict) -> dict:
    """onnx.json: what load_onnx needs to run the graphs without the model's weights."""
    config = loaded.model.config
    meta = {"format": FORMAT, "kind": loaded.kind, "source": os.path.abspath(folder),
            "model_class": type(loaded.model).__name__, "config_class": type(config).__name__,
            "config": dataclasses.asdict(config),
            "graphs": {name: {"inputs": list(g.inputs), "outputs": list(g.outputs)}
                       for name, (g, _, _) in files.items()}}
    if loaded.kind == "finetuned":
        meta["task"] = loaded.extra["task_state"]
    return meta


def quantize_onnx(folder):
    """Every graph of the export in `folder`, in place, with its MatMul weights in int8 (per output
    channel) and inputs quantised on the fly: onnxruntime's dynamic quantisation."""
    from onnxruntime.quantization import QuantType, quantize_dynamic
    for name in sorted(os.listdir(folder)):
        if name.endswith(".onnx"):
            path = os.path.join(folder, name)
            quantize_dynamic(path, path + ".int8", weight_type=QuantType.QInt8, per_channel=True)
            os.replace(path + ".int8", path)


def export_onnx(folder, out, *, overwrite: bool = False, check: bool = True, texts=None, texts_file=None,
                tolerance: float = 1e-4, opset: int = 18, int8: bool = False, log=print) -> dict:
    """Export the model folder `folder` to the folder `out` (module docstring) and, with `check`,
    run onnxruntime on it against bertlab on real inputs (onnx_check.check_export; `texts` are the
    inputs, default onnx_check.SAMPLE_TEXTS). A difference beyond `tolerance` is a ValueError and
    nothing is written. Returns the check's report (max abs differences, tokens compared).

    int8: after the fp32 check, quantise the graphs (quantize_onnx) and report, without failing,
    how far they are from bertlab's fp32 outputs (report["int8"]).

    texts_file: a UTF-8 file whose non-blank lines are the texts to check on (instead of `texts`)."""
    if texts_file:
        from ..io import read_lines
        texts = [t for t in read_lines(texts_file) if t.strip()]
        if not texts:
            raise ValueError(f"{texts_file}: no text to check on (every line is blank)")
    require_onnx()
    from ..interop.load import load_model
    out = os.fspath(out)
    if os.path.exists(out) and not os.path.isdir(out) and not os.path.islink(out):
        raise ValueError(f"{out}: is a file, not a folder (the export is a folder of graphs)")
    check_output_folder_path(out)  # a link is refused: never written through
    if os.path.exists(out) and not overwrite:
        raise ValueError(f"{out}: exists; pass overwrite=True (--overwrite) to replace it")
    if os.path.exists(out):  # --overwrite replaces only an export of bertlab's (see _replace_export)
        _export_entries(out)
    parent = make_folder(os.path.dirname(os.path.abspath(out)))  # before the work: a path under a file fails now
    remove_stale_temp_files(parent, depth=0)  # the temporary folder of an export that was killed
    loaded = load_model(folder)
    files = graphs_of(loaded)
    tmp = temp_folder(out)  # bertlab's own name beside OUT: never a user's OUT.tmp
    try:
        mark_folder(tmp, "export")
        for name, (graph, sample, shapes) in files.items():
            log(f"exporting {name} ({type(graph).__name__})")
            export_graph(graph, sample, shapes, os.path.join(tmp, name), opset)
        meta = {**metadata(loaded, folder, files), "int8": int8}
        atomic_write_text(os.path.join(tmp, "onnx.json"), json.dumps(meta, indent=2) + "\n")
        report = {}
        from .onnx_check import check_export
        if check:  # the fp32 graphs, before any quantisation
            report = check_export(loaded, tmp, texts=texts, tolerance=tolerance, log=log)
        if int8:
            quantize_onnx(tmp)
            if check:
                log("int8 graphs against bertlab fp32 (the cost of int8, not an error):")
                report["int8"] = check_export(loaded, tmp, texts=texts, log=log, strict=False)
        _replace_export(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return report


# What an export folder holds: its graphs, quantisation's scratch file, onnx.json (and the marker).
EXPORT_FILES = ("*.onnx", "*.onnx.int8", "*.onnx.data", "onnx.json")


def _export_entries(out) -> list[str]:
    """The export in the existing folder `out`, which --overwrite may replace: refused unless
    bertlab made the folder (its marker file) or it is empty (io.claim_output_folder's rule)."""
    entries = output_entries(out, EXPORT_FILES)
    if foreign_entries(out) and not is_bertlab_folder(out):
        claim_output_folder(out, EXPORT_FILES, overwrite=True, command="export")  # raises, naming the files
    return entries


def _replace_export(tmp, out):
    """Put the export made in `tmp` at `out`: a rename where there is none; else only the files of
    the old export go (onnx.json first: the folder reads unfinished, then the graphs) and the new
    ones move in (onnx.json last), so anything else in the folder stays."""
    if not os.path.lexists(out):
        os.rename(tmp, out)
        return
    old = _export_entries(out)
    for name in sorted(old, key=lambda n: n != "onnx.json"):
        remove_entry(os.path.join(out, name))
    mark_folder(out, "export")
    for name in sorted(os.listdir(tmp), key=lambda n: n == "onnx.json"):
        if name != MARKER:
            os.replace(os.path.join(tmp, name), os.path.join(out, name))
    shutil.rmtree(tmp, ignore_errors=True)
