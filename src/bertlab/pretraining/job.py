"""`bertlab pretrain` as one function a notebook can call: the run folder claimed, the model chosen
(a preset sized to the data's vocabulary, a config file, or an existing model's), and the run trained."""
import dataclasses
import os

from ..interop.pretrained import read_config, resolve
from ..io import read_json
from ..models import AlbertConfig, BertConfig
from ..training.checkpoint import check_resume
from .objective import PretrainSettings, open_shards, preset_config, train_pretraining

OBJECTIVES = ("bert", "electra", "unilm")


def pretraining_config(data, preset=None, config=None, init_from=None, position_embedding_type=None) -> BertConfig:
    """The model: `init_from`'s (a BERT or ALBERT folder or name), the `config` file's (config.json /
    bert_config.json; model_type "albert" gives an AlbertConfig), or the `preset` (default small;
    albert-base etc. for ALBERT) sized to the vocabulary of the shards `data`; `position_embedding_type`
    (absolute, relative_key, relative_key_query, nezha) replaces theirs."""
    if init_from:
        folder = resolve(init_from)
        if _model_type(os.path.join(folder, "config.json")) == "albert":
            chosen = AlbertConfig.from_json_file(os.path.join(folder, "config.json"))
        else:
            chosen = read_config(folder)
        if position_embedding_type and position_embedding_type != chosen.position_embedding_type:
            raise ValueError(f"--init-from {init_from}: its position_embedding_type is "
                             f"{chosen.position_embedding_type!r}; its weights cannot continue as {position_embedding_type!r}")
        return chosen
    if config:
        if not os.path.exists(config):
            raise FileNotFoundError(f"--config {config}: no such file")
        chosen = (AlbertConfig if _model_type(config) == "albert" else BertConfig).from_json_file(config)
    else:
        chosen = preset_config(preset or "small", open_shards(data, "--data").meta["vocab_size"])
    if position_embedding_type:
        chosen = dataclasses.replace(chosen, position_embedding_type=position_embedding_type)
    return chosen


def recipe_settings(recipe, data, preset=None, optimizer=None, model_given=False) -> dict:
    """{"preset", "optimizer"} of a named recipe (recipes.py) for the shards `data`, checked against them."""
    from .recipes import training_settings
    meta = open_shards(data, "--data").meta if recipe else {}
    return training_settings(recipe, meta, data, preset, optimizer, model_given)


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
    from ..interop.hf_albert import save_albert
    from ..interop.hf_bert import save_pretrained
    from ..io import claim_output_folder
    from ..models import AlbertForPreTraining, BertForPreTraining
    from ..training.checkpoint import checkpoint_model
    from .objective import _tokenizer, is_albert

    def build(extra):
        settings = extra["settings"]
        if settings.get("span_boundary") or "disc_weight" in settings:
            raise ValueError(f"{run}: a span-boundary or ELECTRA run; export --hf takes BERT and ALBERT "
                             "pretraining runs (their OUT/model is written when the run ends)")
        config = (AlbertConfig if "embedding_size" in extra["model"] else BertConfig).from_dict(extra["model"])
        return (AlbertForPreTraining if is_albert(config) else BertForPreTraining)(config)

    model, extra = checkpoint_model(run, build, state)
    data = open_shards(extra["settings"]["data"], "--data")
    claim_output_folder(out, MODEL_FOLDER_FILES, overwrite, what="a model folder", command="export")
    (save_albert if is_albert(model.config) else save_pretrained)(model, out, _tokenizer(data))
    return out
