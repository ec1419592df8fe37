"""run_pretraining.py's objective: masked-LM cross-entropy at the masked positions only (gathered,
weighted by masked_lm_weights so padding predictions count zero) plus next-sentence cross-entropy."""
import torch
import torch.nn.functional as F


def pretraining_loss(model, batch: dict, nsp: bool = True, accuracy: bool = False,
                     span_boundary: bool = False) -> tuple[torch.Tensor, dict]:
    """(loss, parts) for one batch of PretrainingData.batch tensors; `parts` holds detached
    mlm_loss and nsp_loss, and with `accuracy` the correct/total counts for MLM and NSP accuracy
    (evaluation asks for them; a training step does not pay for the argmax over the vocabulary).
    span_boundary: SpanBERT's span-boundary loss is added (a BertForSpanBoundaryPreTraining and a
    batch with masked_lm_boundaries), its part sbo_loss."""
    inputs = (batch["input_ids"], batch["token_type_ids"], batch["attention_mask"], batch["masked_lm_positions"])
    if span_boundary:
        mlm_logits, nsp_logits, sbo_logits = model(*inputs, batch["masked_lm_boundaries"])
    else:
        mlm_logits, nsp_logits = model(*inputs)
    weights = batch["masked_lm_weights"].reshape(-1)
    mlm_loss = masked_lm_loss(mlm_logits, batch["masked_lm_ids"], batch["masked_lm_weights"])
    loss, parts = mlm_loss, {"mlm_loss": mlm_loss.detach()}
    if span_boundary:  # SpanBERT sums the two: L(x_i) = L_MLM(x_i) + L_SBO(x_i)
        sbo_loss = masked_lm_loss(sbo_logits, batch["masked_lm_ids"], batch["masked_lm_weights"])
        loss, parts["sbo_loss"] = loss + sbo_loss, sbo_loss.detach()
    if accuracy:
        hits = (mlm_logits.argmax(-1).reshape(-1) == batch["masked_lm_ids"].reshape(-1)).float()
        parts.update(mlm_correct=(hits * weights).sum().detach(), mlm_total=weights.sum().detach())
    if nsp:
        nsp_loss = F.cross_entropy(nsp_logits.float(), batch["next_sentence_labels"])
        loss = loss + nsp_loss
        parts["nsp_loss"] = nsp_loss.detach()
        if accuracy:
            parts.update(nsp_correct=(nsp_logits.argmax(-1) == batch["next_sentence_labels"]).sum().detach(),
                         nsp_total=torch.tensor(float(len(nsp_logits))))
    return loss, parts


def masked_lm_loss(mlm_logits, masked_lm_ids, masked_lm_weights) -> torch.Tensor:
    """Cross-entropy at the masked positions, each weighted by masked_lm_weights (0 for the padding
    of the prediction slots), over google's denominator sum(weights) + 1e-5."""
    weights = masked_lm_weights.reshape(-1)
    per_token = F.cross_entropy(mlm_logits.reshape(-1, mlm_logits.size(-1)).float(), masked_lm_ids.reshape(-1),
                                reduction="none")
    return (per_token * weights).sum() / (weights.sum() + 1e-5)
