"""`bertlab pretrain` as one function a notebook can call: the run folder claimed, the model chosen
(a preset sized to the data's vocabulary, a config file, or an existing model's), and the run trained."""
import dataclasses
import os

from ..interop.pretrained import read_config, resolve
from ..io import read_json
from ..models import AlbertConfig, BertConfig
from ..training.checkpoint import check_resume
from .trainer import PretrainSettings, open_shards, preset_config, train_pretraining


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
                 position_embedding_type=None, **settings) -> dict:
    """Pretrain BERT on the shard folder `data` into the run folder `out`, the model as
    pretraining_config chooses it (`init_from` also gives the starting weights), with the other
    PretrainSettings fields given as keywords (data_512, eval_data, max_steps, lr, ...). A run
    already in OUT is replaced only with `overwrite`, continued only with `resume`. Returns the
    summary (also OUT/summary.json); trainer.report words it."""
    check_resume(out, resume, overwrite)
    s = PretrainSettings(data=data, out=out, model=pretraining_config(data, preset, config, init_from, position_embedding_type),
                         init_from=resolve(init_from) if init_from else None, resume=resume, **settings)
    return train_pretraining(s)
