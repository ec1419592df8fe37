"""Knowledge distillation (Hinton et al., 2015) as DistilBERT does it (Sanh et al., 2019): the
notes' first remedy for a BERT too big and too slow (notes 001, "BERT 的不足" and the list of
improvements after it). A smaller student learns from the teacher's outputs with three terms,

    loss = alpha_soft · T² · CE(softmax(z_teacher / T), softmax(z_student / T))   soft targets
         + alpha_hard · CE(labels, z_student)                                     hard labels (MLM or task)
         + alpha_cos  · mean over real tokens of (1 - cos(h_student, h_teacher))  last hidden states

T > 1 softens both distributions so the student sees how the teacher ranks the wrong answers (its
"dark knowledge"); T² keeps the soft term's gradients on the scale of the hard term's as T grows.

One file, two objectives on the one engine `fit`, each the existing objective of its data with the
loss replaced:
- TaskDistillation (a FineTuning): a fine-tuned teacher's logits on the task's training batches;
  the student is kept, evaluated and saved exactly as `bertlab finetune` keeps its model.
- GeneralDistillation (a MaskedLMPretraining): masked LM on create-pretraining-data shards; the
  soft targets are the teacher's masked-LM distributions where the teacher has that head. Without
  it (a sentence-transformers encoder such as all-MiniLM-L6-v2) only the hidden-state cosine is
  available, and the inputs are then read unmasked, as the student will read text when it embeds.
The teacher runs in eval mode (no dropout) without gradients; the student trains with dropout.
"""
import os
import shutil
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from .. import validate
from ..finetune.objective import FinetuneSettings, FineTuning
from ..models import BertForMultipleChoice, BertForSequenceClassification, BertForTokenClassification
from ..models.losses import masked_lm_loss
from ..models.modernbert import ModernBertForSequenceClassification, ModernBertForTokenClassification, pool
from ..pretraining.objective import MaskedLMPretraining, PretrainSettings
from ..training.engine import Objective

TERMS = ("soft", "hard", "cos")


# ---- settings ---------------------------------------------------------------------------------------
@dataclass(kw_only=True)
class DistillationWeights:
    """The three terms' weights and the temperature (DistilBERT's train.py: 5, 2, 1 and T = 2), mixed
    into the settings of either mode."""
    alpha_soft: float = 5.0
    alpha_hard: float = 2.0
    alpha_cos: float = 1.0
    temperature: float = 2.0
    teacher: str = ""  # the teacher's folder: recorded in the summary, and a resume must use the same

    def checks(self) -> dict:
        v = validate
        return {**super().checks(), "alpha_soft": v.nonnegative_float, "alpha_hard": v.nonnegative_float,
                "alpha_cos": v.nonnegative_float, "temperature": v.positive_float}

    def __post_init__(self):
        super().__post_init__()
        if not (self.alpha_soft or self.alpha_hard or self.alpha_cos):
            raise ValueError("alpha_soft, alpha_hard and alpha_cos are all 0: the student would learn nothing")

    def alphas(self) -> dict:
        return {"soft": self.alpha_soft, "hard": self.alpha_hard, "cos": self.alpha_cos}


@dataclass(kw_only=True)
class TaskDistillSettings(DistillationWeights, FinetuneSettings):
    """Fine-tuning's settings and defaults, plus the distillation weights."""


@dataclass(kw_only=True)
class GeneralDistillSettings(DistillationWeights, PretrainSettings):
    """Pretraining's settings (model: the student's config), plus the distillation weights."""


# ---- the loss terms ---------------------------------------------------------------------------------
def soft_target_loss(student_logits, teacher_logits, temperature: float, weights=None) -> torch.Tensor:
    """T² times the cross-entropy -sum_k p_teacher(k) log p_student(k), both softened by T, over the
    last dimension; the mean over rows, or their `weights`-weighted mean (masked positions, tags)."""
    p_teacher = F.softmax(teacher_logits.float() / temperature, dim=-1)
    log_p_student = F.log_softmax(student_logits.float() / temperature, dim=-1)
    per_row = -(p_teacher * log_p_student).sum(-1).reshape(-1)
    return temperature ** 2 * weighted_mean(per_row, weights)


def cosine_loss(student_hidden, teacher_hidden, attention_mask) -> torch.Tensor:
    """DistilBERT's cosine embedding loss (target +1): the mean of 1 - cos(h_s, h_t) over the real
    (unpadded) tokens of the last layer; it aligns the directions of the two hidden states."""
    real = attention_mask.bool()
    cos = F.cosine_similarity(student_hidden[real].float(), teacher_hidden[real].float(), dim=-1)
    return (1 - cos).mean()


def weighted_mean(values, weights=None) -> torch.Tensor:
    if weights is None:
        return values.mean()
    weights = weights.reshape(-1).to(values.dtype)
    return (values * weights).sum() / weights.sum().clamp(min=1e-9)


class TermLog:
    """Each micro-batch's terms (detached), averaged over a step for the metrics log."""

    def __init__(self, alphas: dict):
        self.alphas, self.parts = alphas, []

    def combine(self, terms: dict) -> torch.Tensor:
        self.parts.append({name: value.detach() for name, value in terms.items()})
        return sum(self.alphas[name] * value for name, value in terms.items())

    def step_values(self) -> dict:
        parts, self.parts = self.parts, []
        return {f"{name}_loss": float(sum(p[name] for p in parts) / len(parts)) for name in parts[0]} if parts else {}


def frozen(teacher, device):
    """The teacher on `device`, in eval mode (no dropout), its weights out of every gradient."""
    teacher = teacher.to(device).eval()
    teacher.requires_grad_(False)
    return teacher


def one_process(run):
    """The losses call the models' encoders directly (for the hidden states), past DDP's wrapper."""
    if run.info.world_size > 1:
        raise ValueError("distillation runs in one process; start it without torchrun")


def inner(model):
    return getattr(model, "module", model)


# ---- task distillation --------------------------------------------------------------------------------
HEADS = (BertForSequenceClassification, BertForTokenClassification, BertForMultipleChoice,
         ModernBertForSequenceClassification, ModernBertForTokenClassification)


def logits_with_hidden(model, batch):
    """(the head's logits, the last layer's hidden states, their attention mask) of a BertFor* or
    ModernBertFor* classification model: the head applied to a full forward pass, since the
    hidden-state term needs every position's last-layer output (BERT's heads' own forward runs the
    last layer for [CLS] alone)."""
    model = inner(model)
    ids, types, mask = batch["input_ids"], batch["token_type_ids"], batch["attention_mask"]
    if isinstance(model, (ModernBertForSequenceClassification, ModernBertForTokenClassification)):
        x = model.modernbert(ids, mask).sequence_output
        read = x if isinstance(model, ModernBertForTokenClassification) else pool(model.config, x, mask)
        return model.classifier(model.dropout(model.head(read))), x, mask
    choices = ids.shape[1] if isinstance(model, BertForMultipleChoice) else None
    if choices:
        ids, types, mask = (t.reshape(-1, t.shape[-1]) for t in (ids, types, mask))
    out = model.bert(ids, types, mask)
    if isinstance(model, BertForTokenClassification):
        return model.classifier(model.dropout(out.sequence_output)), out.sequence_output, mask
    logits = model.classifier(model.dropout(out.pooled_output))
    return (logits.view(-1, choices) if choices else logits), out.sequence_output, mask


class TaskDistillation(FineTuning):
    """FineTuning of the student with the distillation loss: the same batches, dev evaluation,
    early stopping and OUT/model (what `bertlab predict` and load_model read); the teacher's
    logits on each training batch are its soft targets."""

    def __init__(self, task, student, teacher, tokenizer, train_examples, dev_examples, s: TaskDistillSettings):
        super().__init__(task, student, tokenizer, train_examples, dev_examples, s)
        self.teacher, self.name, self.terms = teacher, f"distill {task.name}", TermLog(s.alphas())

    def setup(self, run):
        one_process(run)
        model = super().setup(run)
        self.teacher = frozen(self.teacher, run.device)
        return model

    def outputs(self, model, batch):
        """(logits, hidden states or None, mask): the fast head forward unless the cosine needs states."""
        if self.s.alpha_cos:
            return logits_with_hidden(model, batch)
        return self.task.forward(model, batch), None, None

    def loss(self, model, batch):
        s = self.s
        student, hidden, mask = self.outputs(model, batch)
        if s.alpha_soft or s.alpha_cos:
            with torch.no_grad():
                teacher, teacher_hidden, _ = self.outputs(self.teacher, batch)
        terms = {}
        if s.alpha_soft:  # per-token tasks: the tagged positions (first word pieces) only
            rows = batch["label_ids"] != -100 if student.dim() == 3 else None
            terms["soft"] = soft_target_loss(student, teacher, s.temperature, rows)
        if s.alpha_hard:
            terms["hard"] = self.task.loss(student, batch)
        if s.alpha_cos:
            terms["cos"] = cosine_loss(hidden, teacher_hidden, mask)
        return self.terms.combine(terms)

    def step_stats(self):
        values, examples = super().step_stats()
        return {**values, **self.terms.step_values()}, examples

    def summary(self, summary):
        return {**super().summary(summary), **distillation_summary(self.s, self.teacher, self.model)}


def distillation_summary(s: DistillationWeights, teacher, student) -> dict:
    return {"teacher": s.teacher, "teacher_layers": inner(teacher).config.num_hidden_layers,
            "student_layers": inner(student).config.num_hidden_layers,
            "teacher_parameters": sum(p.numel() for p in teacher.parameters()),
            "student_parameters": sum(p.numel() for p in student.parameters()),
            "alphas": s.alphas(), "temperature": s.temperature}


# ---- general distillation ------------------------------------------------------------------------------
def unmasked(batch) -> torch.Tensor:
    """The instances' original tokens: masked_lm_ids put back at the masked positions (the
    prediction slots' padding, weight 0, left alone)."""
    ids = batch["input_ids"].clone()
    real = batch["masked_lm_weights"].bool()
    rows = torch.arange(ids.shape[0], device=ids.device)[:, None].expand_as(real)
    ids[rows[real], batch["masked_lm_positions"][real]] = batch["masked_lm_ids"][real]
    return ids


class GeneralDistillation(MaskedLMPretraining):
    """Masked-LM distillation on shard folders: MaskedLMPretraining's data order, phases, held-out
    shards and resume, with the student (a BertForPreTraining) and the distillation loss. Without a
    teacher masked-LM head, soft targets are impossible (refused by the job) and, with no masked-LM
    term left, both models read the original tokens."""
    name = "distill"

    def __init__(self, s: GeneralDistillSettings, student, teacher, tokenizer, teacher_has_head: bool):
        super().__init__(s)
        self.student, self.teacher, self.tokenizer, self.teacher_has_head = student, teacher, tokenizer, teacher_has_head
        self.terms = TermLog(s.alphas())
        self.masked_lm = bool(s.alpha_soft or s.alpha_hard)

    def setup(self, run):
        one_process(run)
        super().setup(run)  # the phases and held-out data; the fresh model it builds is not used
        self.find_unused_parameters = True
        self.teacher = frozen(self.teacher, run.device)
        return self.student.to(run.device)

    def loss(self, model, batch):
        s, student = self.s, inner(model)
        ids = batch["input_ids"] if self.masked_lm else unmasked(batch)
        types, mask = batch["token_type_ids"], batch["attention_mask"]
        out = student.bert(ids, types, mask)
        if s.alpha_soft or s.alpha_cos:
            with torch.no_grad():
                teacher_out = self.teacher.bert(ids, types, mask)
        terms = {}
        if self.masked_lm:
            positions, weights = batch["masked_lm_positions"], batch["masked_lm_weights"]
            logits = student.mlm(out.sequence_output, positions)
            if s.alpha_soft:
                with torch.no_grad():
                    teacher_logits = self.teacher.mlm(teacher_out.sequence_output, positions)
                terms["soft"] = soft_target_loss(logits, teacher_logits, s.temperature, weights)
            if s.alpha_hard:
                terms["hard"] = masked_lm_loss(logits, batch["masked_lm_ids"], weights)
        if s.alpha_cos:
            terms["cos"] = cosine_loss(out.sequence_output, teacher_out.sequence_output, mask)
        return self.terms.combine(terms)

    def step_stats(self):
        tokens, self.tokens, self.parts = self.tokens, 0, []
        return self.terms.step_values(), tokens

    @torch.no_grad()
    def evaluate(self, model):
        """How close the student is to the teacher on the held-out shards (original tokens): the
        mean cosine of their mean-pooled sentence vectors (what `bertlab embed` returns) and of
        their tokens' last hidden states; and the student's masked-LM scores where it learns MLM."""
        if self.eval_data is None:
            return None
        was_training, student = model.training, inner(model).eval()
        data, s, masks = self.eval_data, self.s, self.eval_masks
        n = min(s.eval_instances or 1024, len(data))
        sums = np.zeros(3)  # sentence cosines, token cosines, tokens
        for i, start in enumerate(range(0, n, s.batch_size)):
            batch = data.batch(np.arange(start, min(start + s.batch_size, n)),
                               masks(s.seed, 0, i, 0) if data.dynamic else None)
            batch = {k: v.to(self.run.device) for k, v in batch.items()}
            ids, types, mask = unmasked(batch), batch["token_type_ids"], batch["attention_mask"]
            h_s = student.bert(ids, types, mask).sequence_output.float()
            h_t = self.teacher.bert(ids, types, mask).sequence_output.float()
            m = mask[..., None].float()
            pooled = F.cosine_similarity((h_s * m).sum(1) / m.sum(1), (h_t * m).sum(1) / m.sum(1), dim=-1)
            real = mask.bool()
            sums += [pooled.sum().item(), F.cosine_similarity(h_s[real], h_t[real], dim=-1).sum().item(),
                     real.sum().item()]
        student.train(was_training)
        metrics = {"embedding_cosine": sums[0] / n, "token_cosine": sums[1] / sums[2], "instances": n}
        if self.masked_lm:
            metrics.update(super().evaluate(model))
        metrics["loss"] = 1 - metrics["token_cosine"]  # the held-out cosine term, which the curves plot
        return metrics

    def describe(self, metrics):
        text = (f"held-out cosine to the teacher: sentence vectors {metrics['embedding_cosine']:.4f}, "
                f"tokens {metrics['token_cosine']:.4f}")
        return text + (f"; MLM accuracy {metrics['mlm_accuracy']:.3f}" if "mlm_accuracy" in metrics else "")

    def identity(self):
        return {**super().identity(), "teacher": self.s.teacher, "alphas": self.s.alphas(),
                "temperature": self.s.temperature}

    def summary(self, summary):
        return {**super().summary(summary), **distillation_summary(self.s, self.teacher, self.student)}

    def export(self, run, model, summary):
        """OUT/model in HF format: the whole BertForPreTraining where the teacher had a masked-LM
        head, else the bare encoder, as the teacher is, with the teacher's sentence-transformers
        files (pooling, max_seq_length) so `bertlab embed` and sentence-transformers read it alike."""
        from ..interop.hf_bert import save_pretrained
        folder = os.path.join(self.s.out, "model")
        save_pretrained(inner(model) if self.teacher_has_head else inner(model).bert, folder, self.tokenizer)
        if not self.teacher_has_head:
            copy_sentence_transformers_files(self.s.teacher, folder)

    def curves(self, records, out, title):
        Objective.curves(self, records, out, title)  # the loss terms, not pretraining's MLM/NSP panels


SENTENCE_FILES = ("sentence_bert_config.json", "modules.json", "config_sentence_transformers.json",
                  os.path.join("1_Pooling", "config.json"))


def copy_sentence_transformers_files(teacher_folder, folder):
    for name in SENTENCE_FILES:
        source = os.path.join(teacher_folder, name)
        if os.path.isfile(source):
            os.makedirs(os.path.dirname(os.path.join(folder, name)), exist_ok=True)
            shutil.copyfile(source, os.path.join(folder, name))
