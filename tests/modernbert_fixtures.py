"""Tiny ModernBERT folders for the tests: HF's classes on random weights, a byte-level BPE
tokenizer.json trained by `tokenizers` on this machine's text, in ModernBERT's settings."""
import glob
import gzip
import json

import torch

VOCAB = 400
SPECIALS = ["<|padding|>", "<|endoftext|>", "[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"]


def local_text(limit=200_000) -> str:
    """Real English text from /usr/share/doc (copyright files and gzipped changelogs)."""
    out, size = [], 0
    for path in sorted(glob.glob("/usr/share/doc/*/copyright"))[:80] + sorted(glob.glob("/usr/share/doc/*/*.gz"))[:20]:
        try:
            text = gzip.open(path, "rt", errors="replace").read() if path.endswith(".gz") else open(path, errors="replace").read()
        except OSError:
            continue
        out.append(text)
        size += len(text)
        if size > limit:
            break
    return "\n".join(out)


def train_tokenizer_json(path, text=None, vocab_size=VOCAB):
    """tokenizer.json as ModernBERT's is built: NFC, ByteLevel without a prefix space, [CLS] $A [SEP],
    [MASK] taking the space before it, and runs of spaces as (normalized) added tokens."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size - len(SPECIALS) - 3, special_tokens=[],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator((text or local_text()).splitlines(), trainer)
    tok.add_tokens([AddedToken(" " * n, normalized=True) for n in (2, 3, 4)])
    tok.add_special_tokens([AddedToken(t, lstrip=t == "[MASK]", normalized=False) for t in SPECIALS])
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(single="[CLS]:0 $A:0 [SEP]:0", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
                                                       special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    tok.save(str(path))
    return tok


def hf_config(**overrides):
    from transformers import ModernBertConfig
    settings = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=40, num_hidden_layers=4, num_attention_heads=4,
                    local_attention=6, global_attn_every_n_layers=2, max_position_embeddings=64,
                    attn_implementation="eager")
    settings.update(overrides)
    return ModernBertConfig(**settings)


def make_folder(folder, hf_class="ModernBertForMaskedLM", seed=0, **overrides):
    """An HF ModernBERT folder of `hf_class` on random weights (norm weights and biases random too,
    so a name mixed up cannot hide), with tokenizer.json; returns the HF model."""
    import transformers
    folder.mkdir(parents=True, exist_ok=True)
    tok = train_tokenizer_json(folder / "tokenizer.json")
    ids = {t: tok.token_to_id(t) for t in ("[PAD]", "[CLS]", "[SEP]")}
    config = hf_config(pad_token_id=ids["[PAD]"], cls_token_id=ids["[CLS]"], sep_token_id=ids["[SEP]"],
                       bos_token_id=ids["[CLS]"], eos_token_id=ids["[SEP]"], **overrides)
    torch.manual_seed(seed)
    model = getattr(transformers, hf_class)(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name or name.endswith("bias"):
                p.add_(torch.randn_like(p) * 0.1)
    model.save_pretrained(folder)
    return model


def batch(seed=1, lengths=(20, 13, 5, 17), pad_id=0, vocab=VOCAB, left_padded=()):
    """ids and an attention mask of rows of `lengths`, right-padded (left-padded rows as named)."""
    g = torch.Generator().manual_seed(seed)
    length = max(lengths)
    ids = torch.randint(10, vocab, (len(lengths), length), generator=g)
    mask = torch.zeros(len(lengths), length, dtype=torch.long)
    for i, n in enumerate(lengths):
        if i in left_padded:
            mask[i, length - n:] = 1
        else:
            mask[i, :n] = 1
    return ids.masked_fill(mask == 0, pad_id), mask


def read_config(folder):
    return json.loads((folder / "config.json").read_text())
