"""`bertlab pretrain` as one function a notebook can call: the run folder claimed, the model chosen
(a preset sized to the data's vocabulary, a config file, or an existing model's), and the run trained."""
import os

from ..interop.pretrained import read_config, resolve
from ..models import BertConfig
from ..training.checkpoint import check_resume
from .trainer import PretrainSettings, open_shards, preset_config, train_pretraining


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
                 unilm=False, **settings) -> dict:
    """Pretrain BERT on the shard folder `data` into the run folder `out`, the model as
    pretraining_config chooses it (`init_from` also gives the starting weights), with the other
    PretrainSettings fields given as keywords (data_512, eval_data, max_steps, lr, ...). A run
    already in OUT is replaced only with `overwrite`, continued only with `resume`. Returns the
    summary (also OUT/summary.json); trainer.report words it. unilm: UniLM's objective, the masked LM
    under the bidirectional, left-to-right and seq2seq masks in turn (pretraining.unilm)."""
    check_resume(out, resume, overwrite)
    s = PretrainSettings(data=data, out=out, model=pretraining_config(data, preset, config, init_from),
                         init_from=resolve(init_from) if init_from else None, resume=resume, **settings)
    if unilm:
        from ..training.engine import fit
        from .unilm import UniLMPretraining
        return fit(UniLMPretraining(s), s)
    return train_pretraining(s)
