"""A BERT checkpoint with its masked-LM head, as fill-mask and UniLM need it: the encoder and the
head both read from the checkpoint, a missing head a clear error."""
from ..models import BertForPreTraining
from ..tokenization.vocab import MASK
from .folder import LoadedModel, read_state_dict
from .hf_bert import init_from_state_dict
from .pretrained import check_layers_used, load_tokenizer, read_config, resolve


def load_masked_lm(folder) -> LoadedModel:
    """The LoadedModel (kind "bert": BertForPreTraining, tokenizer) whose encoder and masked-LM head
    both come from the checkpoint;
    a checkpoint without the head is an error. The NSP head and the pooler may be missing (HF's
    BertForMaskedLM saves neither): fill-mask never uses them.

    Not load_pretrained(strict=False): that randomly initialises the whole model first, which costs
    seconds for the vocabulary-size tables, all overwritten here but the NSP head."""
    folder = resolve(folder)
    config = read_config(folder)
    tokenizer = load_tokenizer(folder, config=config)
    model = BertForPreTraining(config, init_weights=False)
    model.nsp.apply(model.bert._init_weights)
    model.bert.pooler.apply(model.bert._init_weights)
    report = init_from_state_dict(model, read_state_dict(folder))
    encoder = [p for p in problems(report, "bert.") if not p.startswith("missing bert.pooler.")]
    if encoder:
        raise ValueError(f"{folder}: the checkpoint does not fit its own config: {', '.join(encoder)}")
    check_layers_used(report, folder, config)
    head = problems(report, "mlm.")
    if head:
        raise ValueError(f"{folder}: this checkpoint has no masked-LM head (the cls.predictions.* tensors; "
                         f"missing or mis-shaped: {', '.join(head)}), so it cannot fill in {MASK}. Use a "
                         f"checkpoint saved with its pretraining heads, such as bert-base-uncased; "
                         f"sentence-embedding models like all-MiniLM-L6-v2 were saved without them.")
    return LoadedModel("bert", model.eval(), tokenizer)


def problems(report, prefix: str) -> list[str]:
    """The report's missing and mis-shaped tensors under `prefix`, one phrase each."""
    out = [f"missing {n}" for n in report.new if n.startswith(prefix)]
    out += [f"{n} has shape {theirs}, the config needs {ours}"
            for n, ours, theirs in report.mismatched if n.startswith(prefix)]
    return out
