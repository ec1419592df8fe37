"""A UniLM sequence-to-sequence model folder: an ordinary HF-format BERT folder with its masked-LM
head (config.json, model.safetensors, vocab.txt, tokenizer_config.json: HF's BertForPreTraining
loads it) and unilm.json, the source and target budgets it was fine-tuned with."""
import json
import os

from ..io import atomic_write_text, read_json

SETTINGS = "unilm.json"
FIELDS = {"max_source_tokens": int, "max_target_tokens": int}


def check_budgets(settings: dict, positions: int, path):
    """unilm.json's budgets as unilm-train checks them: the source at least 3 tokens ([CLS] a token
    [SEP]), the target at least 2 (a token and [SEP]), both within BERT's positions. Decoding reads
    max_target_tokens - 1 as its length limit, so -1 or 10**12 would mean no limit (or a cache of
    that many positions); either is refused here, naming the file."""
    from ..validate import check_number
    source = check_number(f"{path}: max_source_tokens", settings["max_source_tokens"], integer=True, minimum=3,
                          maximum=positions - 2)
    if "max_target_tokens" in settings:
        check_number(f"{path}: max_target_tokens", settings["max_target_tokens"], integer=True, minimum=2,
                     maximum=positions - source)


def save_unilm_model(folder, model, tokenizer, settings: dict):
    """model: the BertForPreTraining; settings: at least max_source_tokens and max_target_tokens."""
    from .hf_bert import save_pretrained
    save_pretrained(model, folder, tokenizer)
    atomic_write_text(os.path.join(folder, SETTINGS), json.dumps(settings, indent=2) + "\n")


def load_unilm_model(folder, device="cpu"):
    """The LoadedModel (kind "unilm": UniLMSeq2Seq in eval mode, tokenizer, extra "settings") of a
    folder save_unilm_model wrote."""
    from .folder import LoadedModel
    from ..models.unilm import UniLMSeq2Seq
    from .masked_lm import load_masked_lm  # the encoder and its masked-LM head, both checked
    path = os.path.join(folder, SETTINGS)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{folder}: no {SETTINGS} (a UniLM model folder is what `bertlab unilm-train` "
                                "writes to OUT/model)")
    settings = read_json(path, fields=FIELDS)
    if "max_source_tokens" not in settings:
        raise ValueError(f"{path}: needs max_source_tokens (a whole number), the source budget it was trained with")
    masked_lm = load_masked_lm(folder)
    model, tokenizer = masked_lm.model, masked_lm.tokenizer
    check_budgets(settings, model.config.max_position_embeddings, path)
    seq2seq = UniLMSeq2Seq(model, tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.mask_token_id,
                           settings["max_source_tokens"])
    return LoadedModel("unilm", seq2seq.to(device).eval(), tokenizer, {"settings": settings})
