"""`bertlab pretrain` as one function a notebook can call: the run folder claimed, the model chosen
(a preset sized to the data's vocabulary, a config file, or an existing model's), and the run trained."""
import os

from ..interop.pretrained import read_config, resolve
from ..models import BertConfig
from ..training.checkpoint import check_resume
from .trainer import PretrainSettings, open_shards, preset_config, train_pretraining

OBJECTIVES = ("bert", "electra")


def pretraining_config(data, preset=None, config=None, init_from=None) -> BertConfig:
    """The model: `init_from`'s (a BERT folder or name), the `config` file's (config.json /
    bert_config.json), or the `preset` (default small) sized to the vocabulary of the shards `data`."""
    if init_from:
        return read_config(resolve(init_from))
    if config:
        if not os.path.exists(config):
            raise FileNotFoundError(f"--config {config}: no such file")
        return BertConfig.from_json_file(config)
    return preset_config(preset or "small", open_shards(data, "--data").meta["vocab_size"])


def pretrain_job(data, out, *, preset=None, config=None, init_from=None, resume=False, overwrite=False,
                 objective="bert", embedding_size=None, generator_size=None, disc_weight=None, **settings) -> dict:
    """Pretrain BERT on the shard folder `data` into the run folder `out`, the model as
    pretraining_config chooses it (`init_from` also gives the starting weights), with the other
    PretrainSettings fields given as keywords (data_512, eval_data, max_steps, lr, ...). A run
    already in OUT is replaced only with `overwrite`, continued only with `resume`. Returns the
    summary (also OUT/summary.json); trainer.report words it.

    objective="electra" trains ELECTRA instead (pretraining/electra.py): the config chosen is the
    discriminator's, with `embedding_size` E (default half its width, as ELECTRA-Small's 128 of
    256), and the generator `generator_size` times as wide (default 0.5); `disc_weight` (50)."""
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}; choose one of {OBJECTIVES}")
    if objective == "bert" and (embedding_size, generator_size, disc_weight) != (None, None, None):
        raise ValueError("embedding size, generator size and discriminator weight are ELECTRA's settings: "
                         "give them with objective electra")
    check_resume(out, resume, overwrite)
    model = pretraining_config(data, preset, config, init_from)
    common = dict(data=data, out=out, init_from=resolve(init_from) if init_from else None, resume=resume, **settings)
    if objective == "bert":
        return train_pretraining(PretrainSettings(model=model, **common))
    from .electra import ElectraSettings, electra_configs, train_electra
    discriminator, generator = electra_configs(model, init_from, embedding_size, generator_size,
                                               fresh=not (init_from or config))
    extra = {} if disc_weight is None else {"disc_weight": disc_weight}
    return train_electra(ElectraSettings(model=discriminator, generator=generator, **extra, **common))
