"""Writes the golden folders of tests/test_relative_positions.py: tiny BERT models with relative
positions and the logits transformers 4.57.3 computes for them (5.x no longer has
position_embedding_type relative_key / relative_key_query, nor the deprecated NEZHA model).

    pip install --target /tmp/hf4 --no-deps 'transformers==4.57.3' 'huggingface_hub==0.36.0' \
        'tokenizers==0.22.1' requests urllib3 idna certifi charset_normalizer
    BERTLAB_HF_LEGACY=/tmp/hf4 PYTHONPATH=src python data/hf_relative_positions/make_golden.py

relative_key/, relative_key_query/: an HF BertForPreTraining with random weights, saved by HF.
nezha/: a bertlab BertForPreTraining (position_embedding_type nezha, max_relative_position 5) with
random weights, saved by bertlab; the logits are HF's NezhaForPreTraining on the same weights.
Each folder: config.json, model.safetensors, vocab.txt, inputs.pt (a padded batch of 2 x 12),
hf_logits.pt (MLM and NSP logits)."""
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests"))

import test_relative_positions as t  # noqa: E402


def main():
    for kind in ("relative_key", "relative_key_query", "nezha"):
        folder = os.path.join(HERE, kind)
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(folder)
        if kind == "nezha":
            t.save_random_model(kind, folder)
            t.write_inputs(folder)
            t.hf("nezha", folder)
        else:
            t.write_inputs(folder)
            t.hf("make", kind, folder)
            t.tiny_tokenizer().save_pretrained(folder)
        for name in os.listdir(folder):
            if name not in ("config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json", "inputs.pt",
                            "hf_logits.pt"):
                os.remove(os.path.join(folder, name))


if __name__ == "__main__":
    main()
