"""Tiny model folders of every kind `bertlab export` takes (random weights), made as the commands
save them: a BERT encoder, fine-tuned classification / regression / NER / QA / multiple-choice
folders, a GPT and a translation Transformer."""
import torch

SENTENCES = ["change ownership of a file", "get memory page size", "create a child process",
             "list directory contents", "report file system disk space usage",
             "search a file for lines that match a pattern"]
FINETUNED = {"classify": ["negative", "positive"], "regression": None, "ner": ["O", "B-CMD", "I-CMD"],
             "squad": None, "multiple_choice": None}


def bert_vocab():
    words = sorted({w for s in SENTENCES for w in s.split()})
    return ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words


def make_folders(root) -> dict:
    from bertlab import BertConfig, BertModel, BertTokenizer, save_pretrained
    from bertlab.interop.finetuned import save_finetuned
    from bertlab.finetune.tasks import make_task
    from bertlab.interop.hf_gpt2 import save_pretrained as save_gpt2
    from bertlab.interop.translation_folder import save_translation_model
    from bertlab.models.gpt import GPT, GPTConfig
    from bertlab.models.transformer import Seq2SeqTransformer, TransformerConfig
    from bertlab.tokenization.char_level import CharTokenizer
    from bertlab.tokenization.subword import SubwordTokenizer
    torch.manual_seed(0)
    vocab = bert_vocab()
    tokenizer = BertTokenizer({t: i for i, t in enumerate(vocab)})
    config = BertConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=64)
    folders = {"bert": str(root / "bert")}
    save_pretrained(BertModel(config).eval(), folders["bert"], tokenizer)
    for name, labels in FINETUNED.items():
        task = make_task(name, labels=labels)
        folders[name] = str(root / name)
        save_finetuned(folders[name], task.build_model(config, init_weights=True).eval(), tokenizer, task.state())
    chars = CharTokenizer.train(SENTENCES)
    gpt = GPT(GPTConfig(vocab_size=chars.vocab_size, n_positions=64, n_embd=16, n_layer=2, n_head=2)).eval()
    folders["gpt"] = str(root / "gpt")
    save_gpt2(gpt, folders["gpt"], chars)
    subwords = SubwordTokenizer.train(SENTENCES, 80, 1)
    tconfig = TransformerConfig.preset("test", source_vocab_size=len(subwords), target_vocab_size=len(subwords),
                                       share_embeddings=True, max_position_embeddings=32)
    folders["translation"] = str(root / "translation")
    save_translation_model(folders["translation"], Seq2SeqTransformer(tconfig).eval(), subwords, subwords,
                           {"source_lang": "en", "target_lang": "de"})
    return folders
