"""`bertlab pretrain` as one function a notebook can call: the run folder claimed, the model chosen
(a preset sized to the data's vocabulary, a config file, or an existing model's), and the run trained."""
import dataclasses
import os

from ..interop.pretrained import read_config, resolve
from ..io import read_json
from ..models import AlbertConfig, BertConfig, ModernBertConfig
from ..training.checkpoint import check_resume
from .objective import PretrainSettings, open_shards, preset_config, train_pretraining

OBJECTIVES = ("bert", "electra", "unilm")


def pretraining_config(data, preset=None, config=None, init_from=None, position_embedding_type=None) -> BertConfig:
    """The model: `init_from`'s (a BERT, ALBERT or ModernBERT folder or name), the `config` file's
    (config.json / bert_config.json; model_type "albert" or "modernbert" gives that config), or the
    `preset` (default small; albert-base etc. for ALBERT, modernbert-small etc.) sized to the
    vocabulary of the shards `data`; `position_embedding_type`
    (absolute, relative_key, relative_key_query, nezha) replaces theirs."""
    if init_from:
        folder = resolve(init_from)
        kind = _model_type(os.path.join(folder, "config.json"))
        if kind == "albert":
            chosen = AlbertConfig.from_json_file(os.path.join(folder, "config.json"))
        elif kind == "modernbert":
            from ..interop.hf_modernbert import read_modernbert_config
            chosen = read_modernbert_config(folder)[0]
        else:
            chosen = read_config(folder)
        if position_embedding_type and position_embedding_type != getattr(chosen, "position_embedding_type", None):
            raise ValueError(f"--init-from {init_from}: its position_embedding_type is "
                             f"{getattr(chosen, 'position_embedding_type', 'rotary')!r}; its weights cannot continue "
                             f"as {position_embedding_type!r}")
        return chosen
    if config:
        if not os.path.exists(config):
            raise FileNotFoundError(f"--config {config}: no such file")
        kind = _model_type(config)
        chosen = {"albert": AlbertConfig, "modernbert": ModernBertConfig}.get(kind, BertConfig).from_json_file(config)
    else:
        shards = open_shards(data, "--data")
        chosen = preset_config(preset or "small", shards.meta["vocab_size"], vocab=shards.vocab)
    if position_embedding_type and isinstance(chosen, ModernBertConfig):
        raise ValueError(f"--position-embedding-type {position_embedding_type}: ModernBERT's positions are rotary")
    if position_embedding_type:
        chosen = dataclasses.replace(chosen, position_embedding_type=position_embedding_type)
    return chosen


def recipe_settings(recipe, data, preset=None, optimizer=None, model_given=False, phase2_rope_theta=None) -> dict:
    """{"preset", "optimizer", "phase2_rope_theta"} of a named recipe (recipes.py) for the shards
    `data`, checked against them."""
    from .recipes import training_settings
    meta = open_shards(data, "--data").meta if recipe else {}
    return training_settings(recipe, meta, data, preset, optimizer, model_given, phase2_rope_theta)


def _model_type(path) -> str | None:
    """config.json's model_type ("albert" builds an ALBERT), None where there is no such file."""
    if not os.path.exists(path):
        return None
    settings = read_json(path)
    return settings.get("model_type") if isinstance(settings, dict) else None


def pretrain_job(data, out, *, preset=None, config=None, init_from=None, resume=False, overwrite=False,
                 position_embedding_type=None, objective="bert", embedding_size=None, generator_size=None,
                 disc_weight=None, **settings) -> dict:
    """Pretrain BERT on the shard folder `data` into the run folder `out`, the model as
    pretraining_config chooses it (`init_from` also gives the starting weights), with the other
    PretrainSettings fields given as keywords (data_512, eval_data, max_steps, lr, ...). A run
    already in OUT is replaced only with `overwrite`, continued only with `resume`. Returns the
    summary (also OUT/summary.json); trainer.report words it.

    objective="unilm" trains UniLM's masked LM under the bidirectional, left-to-right and seq2seq
    masks in turn (pretraining/unilm.py); objective="electra" trains ELECTRA instead (pretraining/electra.py): the config chosen is the
    discriminator's, with `embedding_size` E (default half its width, as ELECTRA-Small's 128 of
    256), and the generator `generator_size` times as wide (default 0.25); `disc_weight` (50)."""
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}; choose one of {OBJECTIVES}")
    if objective != "bert" and settings.get("span_boundary"):
        raise ValueError(f"the span-boundary objective adds a head to BERT's masked LM, not to {objective}'s")
    if objective != "electra" and (embedding_size, generator_size, disc_weight) != (None, None, None):
        raise ValueError("embedding size, generator size and discriminator weight are ELECTRA's settings: "
                         "give them with objective electra")
    resume = check_resume(out, resume, overwrite, outputs=("generator",), command="pretrain")
    model = pretraining_config(data, preset, config, init_from, position_embedding_type)
    common = dict(data=data, out=out, init_from=resolve(init_from) if init_from else None, resume=resume, **settings)
    if objective == "bert":
        return train_pretraining(PretrainSettings(model=model, **common))
    if objective == "unilm":
        from ..training.engine import fit
        from .unilm import UniLMPretraining
        s = PretrainSettings(model=model, **common)
        return fit(UniLMPretraining(s), s)
    from .electra import ElectraSettings, electra_configs, train_electra
    discriminator, generator = electra_configs(model, init_from, embedding_size, generator_size,
                                               fresh=not (init_from or config))
    extra = {} if disc_weight is None else {"disc_weight": disc_weight}
    return train_electra(ElectraSettings(model=discriminator, generator=generator, **extra, **common))


# What an HF BERT/ALBERT folder holds (interop.hf_bert.save_pretrained / hf_albert.save_albert)
MODEL_FOLDER_FILES = ("config.json", "model.safetensors", "pytorch_model.bin", "vocab.txt", "tokenizer_config.json",
                      "special_tokens_map.json", "tokenizer.json")


def export_pretraining_checkpoint(run: str, out: str, overwrite: bool = False, state: dict | None = None) -> str:
    """The HF-format model folder a `bertlab pretrain` run writes at its end (OUT/model), made now
    from the run's last checkpoint, one file or sharded: the config and weights it holds, the
    tokenizer of the data it was reading (bertlab export --hf)."""
    from ..io import claim_output_folder
    from ..models import AlbertForPreTraining, BertForPreTraining, ModernBertForPreTraining
    from ..models.modernbert import set_global_rope_theta
    from ..training.checkpoint import checkpoint_model, read_checkpoint
    from .objective import _tokenizer, is_albert, phase_switch, save_model_folder

    def build(extra):
        settings, fields = extra["settings"], extra["model"]
        if settings.get("span_boundary") or "disc_weight" in settings:
            raise ValueError(f"{run}: a span-boundary or ELECTRA run; export --hf takes BERT, ALBERT and "
                             "ModernBERT pretraining runs (their OUT/model is written when the run ends)")
        if "global_rope_theta" in fields:
            return ModernBertForPreTraining(ModernBertConfig.from_dict(fields), init_weights=False)
        config = (AlbertConfig if "embedding_size" in fields else BertConfig).from_dict(fields)
        return (AlbertForPreTraining if is_albert(config) else BertForPreTraining)(config)

    state = state if state is not None else read_checkpoint(os.path.join(run, "checkpoint.pt"))
    model, extra = checkpoint_model(run, build, state)
    settings = extra["settings"]
    theta = settings.get("phase2_rope_theta")
    if theta and settings.get("data_512") and settings.get("phase2_fraction"):
        if state["step"] >= phase_switch(settings["max_steps"], settings["phase2_fraction"]):
            set_global_rope_theta(model, theta)  # the checkpoint's weights were trained in the long-context phase
    data = open_shards(settings["data"], "--data")
    claim_output_folder(out, MODEL_FOLDER_FILES, overwrite, what="a model folder", command="export")
    save_model_folder(model, out, _tokenizer(data))
    return out
