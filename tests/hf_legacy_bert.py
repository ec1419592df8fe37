"""The HF side of tests/test_relative_positions.py, run in a subprocess under transformers 4.x
(5.x dropped BERT's relative_key / relative_key_query and the deprecated NEZHA model):

    python tests/hf_legacy_bert.py make TYPE FOLDER   a random HF BertForPreTraining saved in FOLDER
    python tests/hf_legacy_bert.py run FOLDER         HF's logits of the model in FOLDER
    python tests/hf_legacy_bert.py nezha FOLDER       HF NezhaForPreTraining on FOLDER's weights

Each writes FOLDER/hf_logits.pt (MLM and NSP logits for FOLDER/inputs.pt)."""
import sys

import torch

SIZES = dict(vocab_size=40, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
             max_position_embeddings=16, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def randomize(model):
    """Every tensor random (LayerNorm and biases too), so no term can hide behind a zero or a one."""
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.5)


def logits(model, folder):
    inputs = torch.load(f"{folder}/inputs.pt")
    with torch.no_grad():
        out = model.eval()(**inputs)
    torch.save({"mlm": out.prediction_logits, "nsp": out.seq_relationship_logits}, f"{folder}/hf_logits.pt")


def main(command, *args):
    import transformers
    if command == "make":
        kind, folder = args
        torch.manual_seed(0)
        model = transformers.BertForPreTraining(transformers.BertConfig(position_embedding_type=kind, **SIZES))
        randomize(model)
        model.save_pretrained(folder)
        logits(model, folder)
    elif command == "run":
        (folder,) = args
        logits(transformers.BertForPreTraining.from_pretrained(folder), folder)
    elif command == "nezha":
        (folder,) = args
        from safetensors.torch import load_file
        from transformers.models.deprecated.nezha import NezhaConfig, NezhaForPreTraining
        config = transformers.BertConfig.from_pretrained(folder).to_dict()
        model = NezhaForPreTraining(NezhaConfig(**{k: config[k] for k in SIZES}, type_vocab_size=2,
                                                max_relative_position=config["max_relative_position"]))
        state = {k.replace("bert.", "nezha.", 1): v for k, v in load_file(f"{folder}/model.safetensors").items()}
        state["cls.predictions.decoder.weight"] = state["nezha.embeddings.word_embeddings.weight"]
        missing, unexpected = model.load_state_dict(state, strict=False)
        assert not unexpected and all("position_ids" in k or "token_type_ids" in k or "decoder.bias" in k
                                      for k in missing), (missing, unexpected)
        model.cls.predictions.decoder.bias = model.cls.predictions.bias
        logits(model, folder)


if __name__ == "__main__":
    main(*sys.argv[1:])
