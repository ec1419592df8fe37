"""ELECTRA's objective on the engine (Clark et al., 2020): replaced-token detection.

Masked LM learns from the ~15% of positions it masks (notes 001, BERT 的不足). ELECTRA keeps the
masking but uses it to make a harder, denser task: a small generator (a masked LM) fills each masked
position with a token sampled from its softmax, and the discriminator labels *every* real position
"original" or "replaced". A sampled token that equals the original counts as original. The two
train together, sharing the embeddings; the loss is MLM + 50 x the discriminator's binary loss, and
no gradient flows through the sampling. The discriminator is the model that is kept.

Everything else is BERT pretraining's (trainer.py): the create-pretraining-data shards and their
phases, dynamic masks, data order, optimizer, held-out data and resume. Only the model, the loss,
the held-out metrics and the export differ.
"""
import os
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F

from .. import validate
from ..models import BertConfig
from ..models.electra import Electra
from ..training.engine import Objective, fit
from .evaluation import evaluate
from .objective import MaskedLMPretraining, PretrainSettings, _tokenizer

DISC_WEIGHT = 50.0  # the paper's lambda (google-research/electra disc_weight)


def generator_config(discriminator: BertConfig, size: float = 0.25) -> BertConfig:
    """The generator: the discriminator's depth, `size` times its width (hidden, heads, feed-forward),
    the same embedding tables (width E, projected to the generator's width, down where it is
    narrower: ELECTRA-Small's generator is 64 wide under E = 128). The paper finds 1/4 to 1/2 of the
    width best (Figure 3) and uses 1/4 for ELECTRA-Small."""
    validate.positive_fraction("generator size", size)
    heads = max(1, round(discriminator.num_attention_heads * size))
    hidden = heads * round(discriminator.hidden_size * size / heads)
    width = discriminator.embedding_size or discriminator.hidden_size
    return replace(discriminator, hidden_size=hidden, num_attention_heads=heads,
                   intermediate_size=max(1, round(discriminator.intermediate_size * size)), embedding_size=width)


def electra_configs(model: BertConfig, init_from=None, embedding_size=None, generator_size=None,
                    fresh=True) -> tuple[BertConfig, BertConfig]:
    """(discriminator, generator) configs. From `init_from` (a run's OUT/model): both as saved, the
    generator read from OUT/generator. Else `model` is the discriminator, with `embedding_size`
    (default: half the width for a preset, `fresh`; the config's own otherwise) and the generator
    `generator_size` times as wide (default 0.25, ELECTRA-Small's)."""
    if init_from:
        if embedding_size is not None or generator_size is not None:
            raise ValueError("--init-from: the sizes come from the ELECTRA folders; no embedding or generator size")
        from ..interop.hf_electra import load_electra_configs
        return load_electra_configs(init_from)
    if embedding_size is None and fresh:
        embedding_size = model.hidden_size // 2
    if embedding_size is not None:
        model = replace(model, embedding_size=embedding_size)
    return model, generator_config(model, 0.25 if generator_size is None else generator_size)


@dataclass(kw_only=True)
class ElectraSettings(PretrainSettings):
    """BERT pretraining's settings (`model` is the discriminator) plus the generator and the weight."""
    generator: BertConfig
    disc_weight: float = DISC_WEIGHT

    def checks(self) -> dict:
        return {**super().checks(), "disc_weight": validate.nonnegative_float}


def electra_loss(model: Electra, batch: dict, disc_weight: float = DISC_WEIGHT, accuracy: bool = False,
                 generator: torch.Generator | None = None) -> tuple[torch.Tensor, dict]:
    """(MLM + disc_weight x replaced-token-detection loss, detached parts) for one batch of
    PretrainingData.batch tensors. With `accuracy`, the counts held-out evaluation sums."""
    positions, labels, weights = batch["masked_lm_positions"], batch["masked_lm_ids"], batch["masked_lm_weights"]
    logits, disc_logits, replaced = model(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"],
                                          positions, labels, weights, generator)
    w = weights.reshape(-1)
    per_token = F.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), labels.reshape(-1), reduction="none")
    mlm_loss = (per_token * w).sum() / (w.sum() + 1e-5)
    disc_loss = F.binary_cross_entropy_with_logits(disc_logits.float(), replaced.float())
    parts = {"mlm_loss": mlm_loss.detach(), "disc_loss": disc_loss.detach(),
             "replaced": replaced.float().mean().detach()}
    if accuracy:
        hits = (logits.argmax(-1).reshape(-1) == labels.reshape(-1)).float()
        parts.update(mlm_correct=(hits * w).sum().detach(), mlm_total=w.sum().detach(),
                     disc_correct=((disc_logits > 0).long() == replaced).sum().detach(),
                     disc_total=torch.tensor(float(replaced.numel())))
    return mlm_loss + disc_weight * disc_loss, parts


class ElectraPretraining(MaskedLMPretraining):
    """Generator + discriminator on BERT pretraining's data, phases and settings."""
    compile_whole_loss = False  # not checked to trace as one graph: --compile compiles the model
    name = "electra"

    def setup(self, run):
        model = super().setup(run)
        self.find_unused_parameters = False  # next-sentence data or not, every weight gets a gradient
        return model

    def build_model(self):
        s = self.s
        if s.init_from:  # a run's OUT/model, with its generator beside it in OUT/generator
            from ..interop.hf_electra import generator_beside, load_electra_pair
            return load_electra_pair(s.init_from, generator_beside(s.init_from))
        return Electra(s.model, s.generator)

    def loss(self, model, batch):
        loss, parts = electra_loss(model, batch, self.s.disc_weight)
        self.parts.append(parts)
        return loss

    def step_stats(self):
        k, parts = len(self.parts), self.parts
        values = {key: float(sum(p[key] for p in parts) / k) for key in ("mlm_loss", "disc_loss", "replaced")}
        tokens, self.parts, self.tokens = self.tokens, [], 0
        return values, tokens

    def evaluate(self, model):
        if self.eval_data is None:
            return None
        s, info, masks = self.s, self.run.info, self.eval_masks
        return evaluate_electra(model, self.eval_data, s.batch_size, self.run.device, info, s.eval_instances,
                                masks and (lambda i: masks(s.seed, 0, i, info.rank)), s.disc_weight, s.seed)

    def describe(self, metrics):
        text = (f"held-out generator MLM loss {metrics['mlm_loss']:.3f}, accuracy {metrics['mlm_accuracy']:.3f}; "
                f"discriminator loss {metrics['disc_loss']:.3f}, accuracy {metrics['disc_accuracy']:.3f}")
        if self.baseline:
            text += f" (MLM always {self.baseline['token']!r}: {self.baseline['mlm_accuracy']:.3f})"
        return text

    def identity(self):
        return {**super().identity(), "objective": "electra", "generator": self.s.generator.to_dict(hf=False),
                "disc_weight": self.s.disc_weight}

    def export(self, run, model, summary):
        """OUT/model: the discriminator (what `bertlab finetune --model OUT/model` reads);
        OUT/generator: the generator. Both HF Electra folders with the data's tokenizer."""
        from ..interop.hf_electra import save_electra_pair
        save_electra_pair(model, self.s.out, _tokenizer(self.phases[0].data))

    def curves(self, records, out, title):
        c = self.s.model
        Objective.curves(self, records, out, f"ELECTRA L{c.num_hidden_layers}/H{c.hidden_size}, "
                                             f"generator H{self.s.generator.hidden_size}")


def _unwrapped(model):
    return model.module if hasattr(model, "module") else model  # DDP's wrapper


@torch.no_grad()
def evaluate_electra(model, data, batch_size, device, info, limit=None, mask_fn_for=None,
                     disc_weight=DISC_WEIGHT, seed=0) -> dict:
    """Held-out generator MLM loss and accuracy, discriminator loss and accuracy (every real
    position) over the first `limit` instances; the samples are drawn from a generator seeded by
    `seed`, so every evaluation replaces the same way for the same model."""
    model = _unwrapped(model)
    draws = torch.Generator(device=device).manual_seed(seed)
    return evaluate(model, data, batch_size, device, info=info, limit=limit, mask_fn_for=mask_fn_for,
                    parts_of=lambda batch: electra_loss(model, batch, disc_weight, True, draws)[1],
                    second="disc", second_weight=disc_weight)


def train_electra(s: ElectraSettings) -> dict:
    """Train (or resume) ELECTRA to max_steps or max_minutes; write OUT/model (the discriminator),
    OUT/generator and OUT/summary.json; returns the summary with the Electra pair under "model"."""
    return fit(ElectraPretraining(s), s)


def report(summary: dict, out) -> str:
    """What a finished ELECTRA run says: steps and speed, held-out scores, where the two models are."""
    held = summary["held_out"]
    line = f"{summary['steps']} steps in {summary['seconds']:.0f} s ({summary['tokens_per_s']:,.0f} real tokens/s)"
    if summary["stopped_by_time"]:
        line += " (stopped by --max-minutes; --resume continues)"
    if held:
        line += (f"\nheld-out generator masked LM: loss {held['mlm_loss']:.3f}, accuracy {held['mlm_accuracy']:.3f}; "
                 f"discriminator: loss {held['disc_loss']:.3f}, accuracy {held['disc_accuracy']:.3f}")
    return (f"{line}\ndiscriminator (fine-tune this): {os.path.join(out, 'model')}\n"
            f"generator: {os.path.join(out, 'generator')}")
