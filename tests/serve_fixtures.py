"""Tiny random models of every kind `bertlab serve` answers for, and a real uvicorn server on a free
loopback port: shared by tests/test_serve.py and tests/test_serve_browser.py."""
import contextlib
import socket
import threading
import time

import torch

WORDS = ("good great fine bad awful poor movie film plot the a is was not very cat sat on mat who where what "
         "does live peter paris lives in ate fish dog ran ? .").split()
GPT_TEXT = [f"the cat sat on mat number {i}." for i in range(50)]


def _bert_tokenizer():
    from bertlab.tokenization import BertTokenizer, Vocab
    return BertTokenizer(Vocab(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS))


def _bert_config(tokenizer):
    from bertlab.models import BertConfig
    # a wide initialiser spreads the logits, so top-k lists and argmaxes have no near-ties
    return BertConfig(vocab_size=len(tokenizer.vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                      intermediate_size=64, max_position_embeddings=64, initializer_range=0.5)


def _finetuned(folder, task):
    from bertlab.interop.finetuned import save_finetuned
    tokenizer = _bert_tokenizer()
    save_finetuned(str(folder), task.build_model(_bert_config(tokenizer)).eval(), tokenizer, task.state())
    return str(folder)


def build_models(root) -> dict:
    """{name: folder} of a BERT with its masked-LM head, a classifier, a tagger, a squad reader, a GPT
    and a translation model, all random and test-size, saved with the library's save functions."""
    from bertlab import BertForPreTraining, save_pretrained
    from bertlab.finetune.tasks import make_task
    from bertlab.interop.hf_gpt2 import save_pretrained as save_gpt2
    from bertlab.interop.translation_folder import save_translation_model
    from bertlab.models import GPT, GPTConfig
    from bertlab.models.transformer import Seq2SeqTransformer, TransformerConfig
    from bertlab.tokenization.char_level import CharTokenizer
    from bertlab.tokenization.subword import SubwordTokenizer
    torch.manual_seed(0)
    tokenizer = _bert_tokenizer()
    folders = {"mlm": str(root / "mlm")}
    save_pretrained(BertForPreTraining(_bert_config(tokenizer)).eval(), folders["mlm"], tokenizer)
    folders["sentiment"] = _finetuned(root / "sentiment", make_task("classify", labels=["negative", "positive"]))
    folders["tagger"] = _finetuned(root / "tagger", make_task("ner", labels=["O", "B-PER", "I-PER", "B-LOC"]))
    folders["reader"] = _finetuned(root / "reader", make_task("squad", max_seq_length=64, doc_stride=16))
    chars = CharTokenizer.train(GPT_TEXT)
    config = GPTConfig.preset("test", vocab_size=chars.vocab_size, n_positions=160, bos_token_id=0, eos_token_id=0)
    folders["gpt"] = str(root / "gpt")
    save_gpt2(GPT(config).eval(), folders["gpt"], chars)
    subwords = SubwordTokenizer.train(["die datei öffnen speichern", "open the file save"], 60, 1)
    config = TransformerConfig.preset("test", source_vocab_size=len(subwords), target_vocab_size=len(subwords),
                                      share_embeddings=True, max_position_embeddings=16)
    folders["translator"] = str(root / "translator")
    save_translation_model(folders["translator"], Seq2SeqTransformer(config).eval(), subwords, subwords,
                           {"source_lang": "en", "target_lang": "de"})
    return folders


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def running_server(app, timeout=60.0):
    """A real uvicorn server for `app` on 127.0.0.1 in a thread, ready (every model loaded) when the
    block starts; yields (base url, uvicorn.Server). Leaving the block shuts it down as SIGTERM does."""
    import httpx
    import uvicorn
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                           timeout_graceful_shutdown=10))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if server.started and httpx.get(url + "/readyz").status_code == 200:
                break
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    else:
        raise RuntimeError(f"the server at {url} did not get ready in {timeout} s")
    try:
        yield url, server
    finally:
        server.should_exit = True
        thread.join(30)
