"""`POST /v1/embeddings` driven by the real `openai` package against a live server on loopback:
the float and base64 paths give the same vectors, equal to sentence-transformers' for the real
all-MiniLM-L6-v2 within 1e-5; every input shape; errors in OpenAI's shape, raised by the client as
its own exceptions."""
import base64

import numpy as np
import pytest

pytest.importorskip("fastapi")
openai = pytest.importorskip("openai")
from serve_fixtures import running_server

from bertlab.interop.load import load_model
from bertlab.serve import create_app

pytestmark = pytest.mark.usefixtures("one_thread")

TEXTS = ["The cat sat on the mat.", "A dog ran in the park.", "Stocks fell sharply today.",
         "naïve café — 東京", "an unusually long sentence " + "with many words " * 20]
LONG = "the history of the word " * 80  # 400 word pieces (402 tokens): past MiniLM's 256


@pytest.fixture(scope="module")
def minilm_loaded():
    return load_model("minilm")


@pytest.fixture(scope="module")
def reference(minilm_dir):
    st = pytest.importorskip("sentence_transformers")
    return st.SentenceTransformer(minilm_dir, device="cpu")


@pytest.fixture(scope="module")
def client(minilm_loaded):
    import torch
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    with running_server(create_app({"minilm": minilm_loaded}, max_wait_ms=2)) as (url, _):
        yield openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=60)
    torch.set_num_threads(before)


def vectors(answer) -> np.ndarray:
    """The vectors; asked for base64 explicitly, the client hands over the strings, which it decodes
    (when it asked for base64 itself) as little-endian float32: decoded here the same way."""
    return np.array([np.frombuffer(base64.b64decode(d.embedding), dtype="<f4") if isinstance(d.embedding, str)
                     else d.embedding for d in answer.data], dtype=np.float32)


def test_float_and_base64_equal_sentence_transformers(client, reference, minilm_loaded):
    expected = reference.encode(TEXTS, convert_to_numpy=True)
    as_float = client.embeddings.create(model="minilm", input=TEXTS, encoding_format="float")
    as_base64 = client.embeddings.create(model="minilm", input=TEXTS, encoding_format="base64")
    assert all(isinstance(d.embedding, str) for d in as_base64.data)
    default = client.embeddings.create(model="minilm", input=TEXTS)  # the client asks for base64 itself
    np.testing.assert_allclose(vectors(as_float), expected, atol=1e-5)
    np.testing.assert_array_equal(vectors(as_base64), vectors(as_float))  # float32 both ways: bit for bit
    np.testing.assert_array_equal(vectors(default), vectors(as_float))
    assert as_float.object == "list" and as_float.model == "minilm"
    assert [d.index for d in as_float.data] == list(range(len(TEXTS)))
    assert all(d.object == "embedding" for d in as_float.data)
    tokens = sum(len(ids) for ids in minilm_loaded.tokenizer.tokenize_ids_batch(TEXTS))  # [CLS] and [SEP] included
    assert as_float.usage.prompt_tokens == as_float.usage.total_tokens == tokens


def test_every_input_shape(client, reference, minilm_loaded):
    one = client.embeddings.create(model="minilm", input=TEXTS[0], encoding_format="float")
    assert len(one.data) == 1 and len(one.data[0].embedding) == 384
    np.testing.assert_allclose(vectors(one)[0], reference.encode(TEXTS[0]), atol=1e-5)
    ids = [minilm_loaded.tokenizer.tokenize_ids(t) for t in TEXTS[:2]]  # word pieces, no [CLS]/[SEP]
    from_ids = client.embeddings.create(model="minilm", input=ids[0], encoding_format="float")
    np.testing.assert_allclose(vectors(from_ids)[0], vectors(one)[0], atol=1e-6)
    from_lists = client.embeddings.create(model="minilm", input=ids)
    np.testing.assert_allclose(vectors(from_lists), reference.encode(TEXTS[:2]), atol=1e-5)
    assert from_lists.usage.prompt_tokens == sum(len(i) + 2 for i in ids)
    same_width = client.embeddings.create(model="minilm", input="x", dimensions=384)
    assert len(same_width.data[0].embedding) == 384


def test_too_long_is_413_unless_truncate_and_then_equals_sentence_transformers(client, reference):
    with pytest.raises(openai.APIStatusError) as e:
        client.embeddings.create(model="minilm", input=["short", LONG])
    assert e.value.status_code == 413
    error = e.value.body  # the client hands over the body's "error" object
    assert "input[1] has 402 tokens" in error["message"] and "256" in error["message"]
    assert error["type"] == "invalid_request_error" and error["param"] == "input"
    raw = client.embeddings.with_raw_response.create(model="minilm", input=["short", LONG],
                                                     encoding_format="float", extra_body={"truncate": True})
    assert raw.headers["x-truncated-inputs"] == "1"
    # sentence-transformers cuts at its max_seq_length (256) too: the cut vector is the same
    np.testing.assert_allclose(vectors(raw.parse()), reference.encode(["short", LONG]), atol=1e-5)


def test_errors_come_in_openais_shape(client):
    with pytest.raises(openai.NotFoundError) as e:
        client.embeddings.create(model="text-embedding-3-small", input="x")
    assert e.value.body["code"] == "model_not_found" and "loaded models: minilm" in e.value.body["message"]
    with pytest.raises(openai.BadRequestError) as e:
        client.embeddings.create(model="minilm", input="x", dimensions=128)
    assert e.value.body["param"] == "dimensions" and "384" in e.value.body["message"]
    for bad in ([], "", ["a", ""], [[]]):
        with pytest.raises(openai.BadRequestError) as e:
            client.embeddings.create(model="minilm", input=bad)
        assert e.value.body["param"] == "input", bad
    with pytest.raises(openai.BadRequestError) as e:
        client.embeddings.create(model="minilm", input=[10 ** 9])
    assert "token id 1000000000" in e.value.body["message"]
    with pytest.raises(openai.BadRequestError) as e:  # a wrong type: 400 as OpenAI answers it, not FastAPI's 422
        client.embeddings.create(model="minilm", input=[{"text": "x"}])
    assert e.value.body["type"] == "invalid_request_error" and e.value.body["param"] == "input"
    with pytest.raises(openai.BadRequestError) as e:
        client.embeddings.create(model="minilm", input="x", encoding_format="int8")
    assert e.value.body["param"] == "encoding_format"
