"""Fill in [MASK]: the masked-LM head's most probable tokens at every masked position.

The task BERT was pretrained on, so it needs a checkpoint that kept the masked-LM head
(cls.predictions.*); sentence-embedding models such as all-MiniLM-L6-v2 were saved without it.
"""
from dataclasses import dataclass

import torch

from ..interop.masked_lm import load_masked_lm
from ..tokenization.vocab import MASK
from ..validate import positive_int
from .embed import check_finite, length_sorted_batches, padded_tensors


@dataclass
class Prediction:
    token: str
    token_id: int
    probability: float


def encode_masked(tokenizer, text: str, max_length: int):
    """([CLS] ... [SEP] ids, positions of the masks). A tokenizer that keeps "[MASK]" whole (a
    tokenizer.json's added token, which also takes the space before it in ModernBERT's) encodes
    the text as it is; for BERT's, whose basic tokenizer would split it into "[", "mask", "]",
    the text is cut at each "[MASK]" and the parts encoded around it."""
    parts = text.split(MASK)
    if len(parts) == 1:
        raise ValueError(f"{text!r}: no {MASK} in the text; write {MASK} where a token should be predicted")
    mask = tokenizer.mask_token_id
    ids = tokenizer.tokenize_ids(text)
    if ids.count(mask) != len(parts) - 1:
        ids = []
        for i, part in enumerate(parts):
            ids += ([mask] if i else []) + tokenizer.tokenize_ids(part)
    ids = [tokenizer.cls_token_id, *ids, tokenizer.sep_token_id]
    if len(ids) > max_length:
        raise ValueError(f"{text[:40]!r}...: {len(ids)} tokens with [CLS] and [SEP], more than the model's "
                         f"max_position_embeddings {max_length}; give a shorter text")
    return ids, [i for i, token in enumerate(ids) if token == mask]


def top_predictions(probabilities: torch.Tensor, tokenizer, k: int) -> list[Prediction]:
    values, ids = probabilities.topk(min(k, probabilities.numel()))
    tokens = tokenizer.convert_ids_to_tokens(ids.tolist())
    return [Prediction(t, i, p) for t, i, p in zip(tokens, ids.tolist(), values.tolist())]


@torch.inference_mode()
def fill_mask(model, tokenizer, texts, top_k=5, batch_size=32) -> list[list[list[Prediction]]]:
    """For each text, for each [MASK] in it (left to right), the top_k predictions, most probable
    first. A text without [MASK] or too long for the model is an error naming it (text N, from 1)."""
    positive_int("top_k", top_k)
    positive_int("batch_size", batch_size)
    if not texts:
        return []
    model.eval()
    device = next(model.parameters()).device
    encoder = model.bert if hasattr(model, "bert") else model.modernbert  # BertForPreTraining or ModernBertForMaskedLM
    encoded = []
    for n, text in enumerate(texts, 1):
        try:
            encoded.append(encode_masked(tokenizer, text, model.config.max_position_embeddings))
        except ValueError as e:
            raise ValueError(f"text {n}: {e}" if len(texts) > 1 else str(e)) from None
    lengths = [len(ids) for ids, _ in encoded]
    result = [None] * len(texts)
    for batch in length_sorted_batches(lengths, batch_size, max_tokens=batch_size * max(lengths)):
        ids, mask = padded_tensors([encoded[i][0] for i in batch], tokenizer.pad_token_id)
        out = encoder(ids.to(device), attention_mask=mask.to(device))
        # the head runs only at the masked positions, as in pretraining
        probabilities = [model.mlm(out.sequence_output[row, encoded[i][1]]).float().softmax(-1).cpu()
                         for row, i in enumerate(batch)]
        check_finite([p.numpy() for p in probabilities], "text", numbers=[i + 1 for i in batch])
        for i, p in zip(batch, probabilities):
            result[i] = [top_predictions(q, tokenizer, top_k) for q in p]
    return result


def fill_mask_texts(model_dir, texts: list[str], top_k: int = 5, device: str = "auto"):
    """fill_mask with a model folder (or a LoadedModel) and its masked-LM head on `device`: the top_k
    predictions for every [MASK] of every text. A BERT folder whose config names no head class is
    read again for the head (load_masked_lm), a ModernBERT folder as ModernBertForMaskedLM; either
    says clearly when the checkpoint has no head."""
    from ..device import pick_device
    from ..interop.load import load_model_of
    from ..models import BertForPreTraining, ModernBertForMaskedLM
    loaded = load_model_of(model_dir, ("bert", "modernbert"), "fill-mask")
    if loaded.kind == "modernbert" and not isinstance(loaded.model, ModernBertForMaskedLM):
        from ..interop.hf_modernbert import load_modernbert
        folder = loaded.folder or model_dir
        try:
            loaded = load_modernbert(folder, ModernBertForMaskedLM)
        except ValueError:
            raise ValueError(f"{folder}: a {type(loaded.model).__name__} without the masked-LM head (head.*, "
                             "decoder.bias) that fill-mask needs; give a ModernBertForMaskedLM folder") from None
    elif loaded.kind == "bert" and not isinstance(loaded.model, BertForPreTraining):
        loaded = load_masked_lm(loaded.folder or model_dir)
    from ..models.accelerate import accelerate  # the head models read here come plain from their readers
    return fill_mask(accelerate(loaded.model).to(pick_device(device)), loaded.tokenizer, texts, top_k)
