"""What a served model can do, and each task as one batched call of the library function.

Every `run_*` takes the jobs the batcher gathered (all with the same key) and returns one result per
job: the texts of every request go through ONE call of the inference function (embed_ids,
fill_mask, predict_examples, translate_ids, generate), and the output is cut back into requests.
Nothing here computes a model output itself."""
import numpy as np

from ..finetune.predict import examples_from_inputs, predict_examples
from ..finetune.tasks import task_from_state
from ..inference.attention import attention_weights, layer_number
from ..inference.embed import embed_ids, top_k
from ..inference.fill_mask import fill_mask
from ..inference.generate import TextStream, generate
from ..inference.translate import translate_ids
from ..models import BertForPreTraining, ModernBertForMaskedLM
from .batching import Cancelled

TASK_FAMILIES = {"classify": "classify", "regression": "classify", "ner": "ner", "squad": "qa"}


def model_tasks(loaded) -> list[str]:
    """The endpoints a loaded model (interop.load.LoadedModel) answers."""
    if loaded.kind == "finetuned":
        task = task_from_state(loaded)
        family = TASK_FAMILIES.get(task.name)
        if family is None and hasattr(task, "format"):  # a GLUE task: classification
            family = "classify"
        return ([family] if family else []) + ["attention"]
    if loaded.kind in ("bert", "modernbert"):
        has_head = isinstance(loaded.model, (BertForPreTraining, ModernBertForMaskedLM))
        return ["embed", "similar", "attention"] + (["fill-mask"] if has_head else [])
    return {"gpt": ["generate"], "translation": ["translate"]}.get(loaded.kind, [])


def _split(items: list, jobs) -> list[list]:
    out, start = [], 0
    for job in jobs:
        out.append(items[start:start + job.size])
        start += job.size
    return out


def run_embed(loaded, jobs, max_tokens: int):
    """Each job: its texts' ids (job.ids), measured and fitted by the request (serve.inputs); the batch's
    forward passes run longest first, each at most `max_tokens` padded tokens (embed_ids)."""
    pooling, normalize = jobs[0].key[1:]
    sequences = [s for j in jobs for s in j.ids]
    vectors = embed_ids(loaded.encoder, sequences, pooling, normalize, batch_size=len(sequences),
                        max_tokens=max_tokens, pad_id=loaded.tokenizer.pad_token_id)
    return [{"embeddings": rows} for rows in _split(vectors, jobs)]  # arrays: the answer's encoder writes them


def run_similar(loaded, jobs, max_tokens: int):
    """Each job: a query and its texts (their ids first the query's); every query and text of the
    batch is embedded in one call."""
    sequences = [s for j in jobs for s in j.ids]
    vectors = embed_ids(loaded.encoder, sequences, normalize=True, batch_size=len(sequences), max_tokens=max_tokens,
                        pad_id=loaded.tokenizer.pad_token_id)
    results, start = [], 0
    for job in jobs:
        query, docs = vectors[start], vectors[start + 1:start + job.size]
        start += job.size
        kept = [i for i, row in enumerate(docs) if row.any()]  # a blank text's zero row is never a hit
        hits = []
        if kept:
            scores, indices = top_k(query[None], docs[kept], job.payload["top_k"])
            hits = [{"index": kept[i], "text": job.payload["texts"][kept[i]], "score": float(s)}
                    for s, i in zip(scores[0], indices[0])]
        results.append({"results": hits})
    return results


def run_predict(loaded, jobs):
    """classify, ner and qa: the fine-tuned task's own featurize -> model -> predictions."""
    task = task_from_state(loaded)
    inputs = [i for j in jobs for i in j.payload["inputs"]]
    rows = predict_examples(task, loaded.model, loaded.tokenizer, examples_from_inputs(task, inputs),
                            batch_size=len(inputs))
    for row in rows:
        row.pop("id", None)  # "input N" counts across the whole batch: meaningless to one request
    return [{"predictions": part} for part in _split(rows, jobs)]


def run_fill_mask(loaded, jobs):
    texts = [t for j in jobs for t in j.payload["texts"]]
    masks = fill_mask(loaded.model, loaded.tokenizer, texts, top_k=jobs[0].key[1], batch_size=len(texts))
    return [{"results": [[[vars(p) for p in mask] for mask in text] for text in part]}
            for part in _split(masks, jobs)]


def run_translate(loaded, jobs):
    target = loaded.extra["target_tokenizer"]
    beam = jobs[0].key[1]
    sources = [ids for j in jobs for ids in j.ids]  # measured and fitted by the request
    hypotheses = translate_ids(loaded.model, sources, beam_size=beam, batch_size=len(sources))
    return [{"translations": [target.decode(h[0].tokens) for h in part]} for part in _split(hypotheses, jobs)]


def run_generate(loaded, jobs):
    """One prompt per job (its ids, fitted to the model's positions by the request); its text is handed to the job's `on_item` piece by piece as it is made.
    When every client of the batch has gone, the decoding stops (Cancelled)."""
    options = jobs[0].key[1]
    tokenizer = loaded.tokenizer
    streams = [TextStream(tokenizer.decode, options.stop) for _ in jobs]

    def on_token(row, token):
        if all(j.cancelled.is_set() for j in jobs):
            raise Cancelled("every client of this batch went away")
        piece = streams[row].add(token)
        if piece and jobs[row].on_item is not None and not jobs[row].cancelled.is_set():
            jobs[row].on_item(piece)

    new = generate(loaded.model, [j.ids[0] for j in jobs], options,
                   decode=tokenizer.decode, on_token=on_token, pad_id=options.eos_token_id or 0, prepack=False)
    results = []
    for job, stream, ids in zip(jobs, streams, new):
        rest = stream.finish()
        if rest and job.on_item is not None and not job.cancelled.is_set():
            job.on_item(rest)
        results.append({"text": stream.decode(stream.ids)[:stream.shown], "tokens": len(ids)})
    return results


def run_attention(loaded, jobs):
    """One text per job (the library draws one text at a time); heads x tokens x tokens weights."""
    model = loaded.encoder
    results = []
    for job in jobs:
        layer = layer_number(job.payload["layer"], model.config.num_hidden_layers)
        tokens, weights = attention_weights(model, loaded.tokenizer, job.payload["text"], layer)
        results.append({"tokens": tokens, "layer": layer, "layers": model.config.num_hidden_layers,
                        "weights": np.round(weights, 5).tolist()})
    return results


RUNNERS = {"embed": run_embed, "similar": run_similar, "classify": run_predict, "ner": run_predict,
           "qa": run_predict, "fill-mask": run_fill_mask, "translate": run_translate, "generate": run_generate,
           "attention": run_attention}


TOKEN_BUDGETED = ("embed", "similar")  # runners that cut their forward passes by the token budget


def run_batch(loaded, key, jobs, max_tokens: int = 16384):
    """The batcher's entry: key[0] names the task."""
    if key[0] in TOKEN_BUDGETED:
        return RUNNERS[key[0]](loaded, jobs, max_tokens)
    return RUNNERS[key[0]](loaded, jobs)
