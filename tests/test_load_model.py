"""load_model reads every kind of model folder — ours and HF's — through one entry point, and gives
the same model as the specialised loader of that kind."""
import os
import shutil

import pytest
import torch

from bertlab.finetune.tasks import task_from_state
from bertlab import BertConfig, BertForPreTraining, BertModel, BertTokenizer, LoadedModel, load_model, save_pretrained
from bertlab.interop import load_pretrained
from bertlab.models.accelerate import is_accelerated, plain_class
from bertlab.interop.hf_gpt2 import load_gpt2
from bertlab.interop.translation_folder import load_translation_model
from bertlab.tokenization.char_level import load_gpt_tokenizer
import test_hardening_matrix
from cli_cases import write

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: threads only add overhead
folders = test_hardening_matrix.folders  # the fixture of tiny folders of every kind, made as the commands make them

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + "the cat dog sat ran on a mat . , tired".split()
IDS = torch.tensor([[2, 5, 6, 8, 3]])


@pytest.fixture(scope="module")
def bare_bert(tmp_path_factory):
    """A BERT saved without heads (architectures BertModel), beside the matrix's folder of every kind."""
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(VOCAB), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=64)
    folder = str(tmp_path_factory.mktemp("load_model") / "bert")
    save_pretrained(BertModel(config).eval(), folder, BertTokenizer({t: i for i, t in enumerate(VOCAB)}))
    return folder


def assert_same_model(ours, theirs):
    """load_model's model is accelerated (models.accelerate); the per-kind readers' is plain."""
    assert plain_class(type(ours)) is plain_class(type(theirs)) and is_accelerated(ours) and not ours.training
    a, b = ours.state_dict(), theirs.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("model_class", [BertForPreTraining, BertModel])
def test_bert_loads_with_the_class_its_config_names(folders, bare_bert, model_class):
    folder = folders["bert"] if model_class is BertForPreTraining else bare_bert
    loaded = load_model(folder)
    direct = load_pretrained(folder, model_class)
    model, tokenizer, report = direct.model, direct.tokenizer, direct.extra["report"]
    assert isinstance(loaded, LoadedModel) and loaded.kind == "bert"
    assert_same_model(loaded.model, model)
    assert loaded.tokenizer.tokenize("the cat sat") == tokenizer.tokenize("the cat sat")
    assert str(loaded.extra["report"]) == str(report)
    encoder = (lambda m: m.bert) if model_class is BertForPreTraining else (lambda m: m)
    with torch.no_grad():
        assert torch.equal(encoder(loaded.model)(IDS).sequence_output, encoder(model)(IDS).sequence_output)


def test_hf_masked_lm_folder_loads_with_its_head(tmp_path):
    """HF's BertForMaskedLM (no NSP head) loads as BertForPreTraining whose masked-LM logits are HF's."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=len(VOCAB), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=32, max_position_embeddings=64)
    hf = transformers.BertForMaskedLM(config).eval()
    hf.save_pretrained(tmp_path)
    (tmp_path / "vocab.txt").write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    loaded = load_model(str(tmp_path))
    assert loaded.kind == "bert" and isinstance(loaded.model, BertForPreTraining)
    with torch.no_grad():
        torch.testing.assert_close(loaded.model(IDS)[0], hf(IDS).logits, atol=1e-5, rtol=1e-5)


def test_finetuned_folder_loads_with_its_task(folders):
    """The head comes from task.json's task name and config.json's labels alone (interop reads the
    folder without finetune): the same logits as HF's class for the same folder, and the task
    rebuilt from the state is the one trained."""
    import json

    from transformers import BertForSequenceClassification
    folder = folders["classifier"]
    loaded = load_model(folder)
    with open(os.path.join(folder, "task.json"), encoding="utf-8") as f:
        state = json.load(f)
    assert loaded.kind == "finetuned" and loaded.extra["task_state"] == state
    task = task_from_state(loaded)
    assert task.name == state["task"] and task.labels == state["labels"]
    assert loaded.model.num_labels == len(task.labels)
    hf = BertForSequenceClassification.from_pretrained(folder).eval()
    with torch.no_grad():
        torch.testing.assert_close(loaded.model(IDS), hf(IDS).logits, atol=1e-5, rtol=1e-5)


def test_gpt_folder_loads_with_its_tokenizer(folders):
    loaded = load_model(folders["gpt"])
    direct = load_gpt2(folders["gpt"])
    model, report = direct.model, direct.extra["report"]
    assert loaded.kind == "gpt"
    assert loaded.tokenizer.encode("the fox") == load_gpt_tokenizer(folders["gpt"]).encode("the fox")
    assert loaded.tokenizer.vocab_size == model.config.vocab_size and str(loaded.extra["report"]) == str(report)
    assert_same_model(loaded.model, model)
    ids = torch.tensor([loaded.tokenizer.encode("the fox")])
    with torch.no_grad():
        assert torch.equal(loaded.model(ids)[0], model(ids)[0])


def test_hf_gpt2_folder_loads_as_gpt(folders, tmp_path):
    transformers = pytest.importorskip("transformers")
    vocab_size = load_model(folders["gpt"]).model.config.vocab_size
    torch.manual_seed(0)
    hf = transformers.GPT2LMHeadModel(transformers.GPT2Config(vocab_size=vocab_size, n_embd=16, n_layer=1, n_head=2,
                                                              n_positions=16)).eval()
    hf.save_pretrained(tmp_path)
    shutil.copy(os.path.join(folders["gpt"], "chars.json"), tmp_path)  # its tokenizer: any of the right size
    loaded = load_model(tmp_path)
    assert loaded.kind == "gpt"
    ids = torch.tensor([[1, 2, 3, 4]])
    with torch.no_grad():
        torch.testing.assert_close(loaded.model(ids)[0], hf(ids).logits, atol=1e-5, rtol=1e-5)


def test_translation_folder_loads_with_both_tokenizers(folders):
    loaded = load_model(folders["translation"])
    direct = load_translation_model(folders["translation"])
    model, source, target, settings = (direct.model, direct.tokenizer, direct.extra["target_tokenizer"],
                                       direct.extra["settings"])
    assert loaded.kind == "translation" and loaded.extra["settings"] == settings
    assert loaded.tokenizer.encode("a cat") == source.encode("a cat")
    assert loaded.extra["target_tokenizer"].encode("a cat") == target.encode("a cat")
    assert_same_model(loaded.model, model)


def test_minilm_loads_as_bert(minilm_dir):
    loaded = load_model("minilm")
    assert loaded.kind == "bert" and isinstance(loaded.model, BertModel)
    assert not loaded.extra["report"].new and loaded.tokenizer.model_max_length == 256
    assert_same_model(loaded.model, load_pretrained(minilm_dir).model)


def test_a_folder_without_a_model_names_what_is_missing(tmp_path):
    with pytest.raises(ValueError, match=rf"{tmp_path}: not a model folder: no config.json"):
        load_model(tmp_path)
    write(tmp_path / "config.json", '{"model_type": "t5"}')
    with pytest.raises(ValueError, match="model_type 't5' is not a model bertlab reads"):
        load_model(tmp_path)
