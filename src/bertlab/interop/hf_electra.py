"""ELECTRA checkpoints in HF's layout: ElectraForPreTraining (the discriminator) and
ElectraForMaskedLM (the generator) folders, config.json with model_type "electra".

The encoder is BERT's, so its names map by hf_bert's table; ELECTRA adds the embedding projection
and its two heads. Both sides keep the encoder under `electra.`.
"""
import os

from ..models.electra import Electra, ElectraForMaskedLM, ElectraForPreTraining
from .folder import LoadedModel, LoadReport, copy_matching, read_state_dict, write_hf_folder
from .hf_bert import ELECTRA_HEAD as HEAD
from .hf_bert import IGNORED, NAME_TABLE, _rename

# (ours, HF), tried in order; BERT's encoder rows first, its mlm./nsp. rows never match here.
ELECTRA_NAME_TABLE = NAME_TABLE + [
    ("embedding_projection.", "embeddings_project."),
    ("discriminator.dense.", "discriminator_predictions.dense."),
    ("discriminator.dense_prediction.", "discriminator_predictions.dense_prediction."),
    ("generator.dense.", "generator_predictions.dense."),
    ("generator.norm.", "generator_predictions.LayerNorm."),
    ("generator.bias", "generator_lm_head.bias"),
    ("generator.embedding_table", "generator_lm_head.weight"),
]
# The generator's decoder is its word embedding table: HF re-ties it on load, safetensors stores it once.
TIED = {"generator.embedding_table": "electra.embeddings.word_embeddings.weight"}
ARCHITECTURES = {"ElectraForPreTraining": ElectraForPreTraining, "ElectraForMaskedLM": ElectraForMaskedLM}
ROLE = {ElectraForPreTraining: "discriminator", ElectraForMaskedLM: "generator"}


def to_hf_name(key: str) -> str:
    return _rename(key, ELECTRA_NAME_TABLE)


def from_hf_name(key: str) -> str:
    return _rename(key, [(hf, ours) for ours, hf in ELECTRA_NAME_TABLE])


def hf_state_dict(model) -> dict:
    """An ElectraForPreTraining / ElectraForMaskedLM state dict under HF's names, tied copy removed."""
    return {to_hf_name(k): t.detach().contiguous().cpu() for k, t in model.state_dict().items() if k not in TIED}


def hf_config(model) -> dict:
    """config.json as HF's ElectraConfig writes it: BERT's fields, embedding_size always (HF's
    default is 128, not hidden_size), model_type electra and the class."""
    config = model.config.to_dict(hf=True)
    config.pop("position_embedding_type", None)
    config.update(model_type="electra", architectures=[type(model).__name__],
                  embedding_size=model.config.embedding_size or model.config.hidden_size)
    return config


def save_electra(model, folder, tokenizer=None):
    """config.json, model.safetensors (and with a tokenizer vocab.txt, tokenizer_config.json): a
    folder HF's ElectraForPreTraining / ElectraForMaskedLM loads with no missing or unexpected keys."""
    if type(model) not in ROLE:
        raise TypeError(f"save_electra: expects ElectraForPreTraining or ElectraForMaskedLM, not {type(model).__name__}")
    write_hf_folder(folder, hf_config(model), hf_state_dict(model))
    if tokenizer is not None:
        tokenizer.save_pretrained(folder)


def save_electra_pair(model: Electra, folder, tokenizer=None):
    """The discriminator as FOLDER/model (what fine-tuning reads), the generator as FOLDER/generator."""
    save_electra(model.discriminator, os.path.join(folder, "model"), tokenizer)
    save_electra(model.generator, os.path.join(folder, "generator"), tokenizer)


def electra_architecture(folder, config: dict) -> str:
    """The ELECTRA class a config.json names; other Electra* classes are refused by name."""
    architecture = (config.get("architectures") or ["ElectraForPreTraining"])[0]
    if architecture not in ARCHITECTURES:
        raise ValueError(f"{os.path.join(folder, 'config.json')}: architectures {architecture!r}: bertlab reads "
                         f"the ELECTRA pretraining folders {sorted(ARCHITECTURES)} (fine-tune the discriminator "
                         "with `bertlab finetune --model FOLDER`)")
    return architecture


def load_state(model, hf_state: dict, source) -> LoadReport:
    """Copy an HF ELECTRA state dict into `model` strictly: a missing, mis-shaped or unused tensor
    is an error naming it (a bare ElectraModel checkpoint, whose keys lack `electra.`, is accepted)."""
    bare = not any(k.startswith("electra.") for k in hf_state)
    ours = {}
    for key, tensor in hf_state.items():
        if IGNORED.search(key):
            continue
        name = from_hf_name(key if not bare or HEAD.match(key) else "electra." + key)
        ours[name] = (key, tensor)
    report = copy_matching(model, {name: tensor for name, (_, tensor) in ours.items()}, skip=TIED, source=source,
                           file_names={name: key for name, (key, _) in ours.items()})
    own = model.state_dict()
    report.unused = sorted(key for name, (key, _) in ours.items() if name not in own and name not in TIED)
    problems = report.misfits() + [f"unexpected tensor {key}" for key in report.unused]
    if problems:
        raise ValueError(f"{source}: does not fit {type(model).__name__}:\n  " + "\n  ".join(problems))
    return report


def electra_role(folder) -> tuple[str, type]:
    """("discriminator" | "generator", model class) of an ELECTRA folder, from its config.json."""
    from ..io import read_json
    path = os.path.join(folder, "config.json")
    if not os.path.exists(path):
        raise FileNotFoundError(f"{folder}: no config.json (an ELECTRA folder holds one, model_type \"electra\")")
    raw = read_json(path)
    if raw.get("model_type") != "electra":
        raise ValueError(f"{path}: model_type {raw.get('model_type')!r}, not an ELECTRA folder (model_type \"electra\")")
    model_class = ARCHITECTURES[electra_architecture(folder, raw)]
    return ROLE[model_class], model_class


def check_role(folder, expect: str | None) -> type:
    """The folder's model class; a folder of the other role than `expect` is refused, saying which it is."""
    role, model_class = electra_role(folder)
    if expect is not None and role != expect:
        raise ValueError(f"{folder}: holds the ELECTRA {role} ({model_class.__name__}), but a {expect} is "
                         f"expected here (the {expect} is {'OUT/model' if expect == 'discriminator' else 'OUT/generator'} "
                         "of `bertlab pretrain --objective electra`)")
    return model_class


def load_electra(folder, expect: str | None = None) -> LoadedModel:
    """The LoadedModel (kind "electra", extra "report") of an ELECTRA folder; `expect` "discriminator" or "generator"
    refuses the other kind with an error that says which it is."""
    from .pretrained import load_tokenizer, read_config, resolve
    folder = resolve(folder)
    model_class = check_role(folder, expect)
    config = read_config(folder)
    model = model_class(config, init_weights=False)
    report = load_state(model, read_state_dict(folder), folder)
    return LoadedModel("electra", model.eval(), load_tokenizer(folder, config=config), {"report": report})


def generator_beside(discriminator_folder) -> str:
    """Where a run puts the generator: OUT/generator beside OUT/model."""
    return os.path.join(os.path.dirname(os.path.normpath(discriminator_folder)), "generator")


def load_electra_configs(discriminator_folder):
    """(discriminator, generator) configs of a run's OUT/model and OUT/generator, roles checked."""
    from .pretrained import read_config, resolve
    folder = resolve(discriminator_folder)
    check_role(folder, "discriminator")
    generator = generator_beside(folder)
    if not os.path.isdir(generator):
        raise FileNotFoundError(f"{folder}: no generator beside it ({generator}); ELECTRA training continues "
                                "from a run's OUT/model with its OUT/generator")
    check_role(generator, "generator")
    return read_config(folder), read_config(generator)


def load_electra_pair(discriminator_folder, generator_folder) -> Electra:
    """The two folders of one ELECTRA run joined again, the embeddings shared (the discriminator's)."""
    disc = load_electra(discriminator_folder, expect="discriminator").model
    gen = load_electra(generator_folder, expect="generator").model
    model = Electra(disc.config, gen.config, init_weights=False)
    model.generator.load_state_dict(gen.state_dict())  # its copy of the shared tables first: the
    model.discriminator.load_state_dict(disc.state_dict())  # discriminator's are the ones kept
    return model.train()
