"""Local ONNX embedder (pinned files, deterministic, batch-independent) and the OpenAI-compatible one."""

from __future__ import annotations

import hashlib
import math
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from trustgraph_flow.model.embeddings import (
    LOCAL_DIMENSION,
    LOCAL_MODEL_ID,
    Embedder,
    EmbeddingError,
    LocalEmbedder,
    OpenAIEmbedder,
    embedder_names,
    get_embedder,
)
from trustgraph_flow.model.embeddings.local import (
    MODEL_SHA256,
    TOKENIZER_SHA256,
    default_model_path,
    default_tokenizer_path,
)
from trustgraph_flow.model.testserver import start_server

pytestmark = pytest.mark.unit


def _cos(a, b):
    return sum(x * y for x, y in zip(a, b, strict=True)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


@pytest.fixture(scope="module")
def embedder():
    """One uncached local embedder for the module (loading costs ~0.5 s)."""
    return LocalEmbedder(cache_size=0)


@pytest.fixture(scope="module")
def server(embedder):
    with start_server(embedder=embedder) as handle:
        yield handle


# ------------------------------------------------------------------------------ pinned files
def test_packaged_files_have_the_pinned_digests():
    assert hashlib.sha256(default_model_path().read_bytes()).hexdigest() == MODEL_SHA256 == (
        "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6")
    tokenizer = default_tokenizer_path()
    assert tokenizer.stat().st_size == 466_247
    assert hashlib.sha256(tokenizer.read_bytes()).hexdigest() == TOKENIZER_SHA256
    notice = tokenizer.parent / "NOTICE.txt"
    assert "Apache License" in notice.read_text() and (tokenizer.parent / "LICENSE.txt").is_file()


def test_a_tampered_model_file_is_refused(tmp_path):
    model = tmp_path / "model.onnx"
    shutil.copyfile(default_model_path(), model)
    with open(model, "r+b") as handle:
        handle.seek(1000)
        byte = handle.read(1)
        handle.seek(1000)
        handle.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(EmbeddingError, match=rf"model file .* has sha256 [0-9a-f]{{64}}, expected {MODEL_SHA256}"):
        LocalEmbedder(model_path=model).embed(["radium"])


def test_a_tampered_tokenizer_is_refused(tmp_path):
    tokenizer = tmp_path / "tokenizer.json"
    tokenizer.write_bytes(default_tokenizer_path().read_bytes().replace(b'"[UNK]"', b'"[UNX]"', 1))
    with pytest.raises(EmbeddingError, match="tokenizer file .* refusing to load a different file"):
        LocalEmbedder(tokenizer_path=tokenizer).embed(["radium"])


def test_a_missing_model_file_is_reported(tmp_path):
    with pytest.raises(EmbeddingError, match="model file not found"):
        LocalEmbedder(model_path=tmp_path / "nothing.onnx").embed(["radium"])


# ------------------------------------------------------------------------------- vectors
def test_dimension_normalisation_and_protocol(embedder):
    vectors = embedder.embed(["Marie Curie discovered polonium.", ""])
    assert isinstance(embedder, Embedder)
    assert embedder.model_id == LOCAL_MODEL_ID == "all-MiniLM-L6-v2-onnx-int8"
    assert embedder.dimension == LOCAL_DIMENSION == 384
    assert [len(v) for v in vectors] == [384, 384]
    for vector in vectors:
        assert all(isinstance(x, float) for x in vector)
        assert math.isclose(math.sqrt(sum(x * x for x in vector)), 1.0, abs_tol=1e-5)


def test_deterministic_and_independent_of_the_batch(embedder):
    texts = ["radium glows", "a much longer sentence about the Radium Institute in Paris, founded in 1909", "x"]
    batch = embedder.embed(texts)
    singles = [embedder.embed([t])[0] for t in texts]
    assert batch == singles
    assert LocalEmbedder(cache_size=0).embed(list(reversed(texts))) == list(reversed(batch))


def test_similar_words_are_closer(embedder):
    cat, kitten, stocks = embedder.embed(["cat", "kitten", "stocks"])
    assert _cos(cat, kitten) > _cos(cat, stocks) + 0.3


def test_long_texts_are_truncated_not_rejected(embedder):
    assert len(embedder.embed(["polonium " * 2000])[0]) == 384


def test_concurrent_calls_give_the_same_vectors(embedder):
    texts = [f"sentence number {i} about radioactivity" for i in range(12)]
    expected = embedder.embed(texts)
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda t: embedder.embed([t])[0], texts))
    assert results == expected


SAME_LENGTH = ["a b c", "x y z", "p q r", "the cat sat on the mat", "a dog ran in the park"]


def record_runs(embedder: LocalEmbedder) -> list[list[int]]:
    """Make ``embedder`` record each ``session.run`` it makes: the token count of every text in it."""
    runs: list[list[int]] = []
    original = embedder._run

    def recording(encodings):
        runs.append([len(e.ids) for e in encodings])
        return original(encodings)

    embedder._run = recording
    return runs


@pytest.mark.parametrize("workers", [1, 3])
def test_runs_shared_by_same_length_texts_give_the_vectors_of_one_by_one(workers):
    texts = SAME_LENGTH + ["polonium", "a much longer sentence about the Radium Institute, founded in 1909 " * 3,
                           "radium glows", "polonium", "", "Becquerel"]
    alone = LocalEmbedder(cache_size=0, workers=1)
    one_by_one = [alone.embed([t])[0] for t in texts]
    together = LocalEmbedder(cache_size=0, workers=workers)
    together.load()
    recorded = record_runs(together)
    assert together.embed(texts) == one_by_one  # bit for bit
    assert together._grouping is True  # rows of one run are independent with this model and runtime
    runs = [len(r) for r in recorded]
    assert max(runs) == 3 and sum(runs) == len(set(texts))  # "a b c" "x y z" "p q r" shared one run


def test_without_independent_rows_texts_run_one_by_one():
    embedder = LocalEmbedder(cache_size=0, workers=2)
    embedder.load()
    embedder._grouping = False  # what the load-time check decides when a run's rows influence each other
    recorded = record_runs(embedder)
    vectors = embedder.embed(SAME_LENGTH)
    assert [len(r) for r in recorded] == [1] * len(SAME_LENGTH)
    assert vectors == [LocalEmbedder(cache_size=0, workers=1).embed([t])[0] for t in SAME_LENGTH]


def test_a_text_repeated_in_one_call_is_embedded_once():
    embedder = LocalEmbedder(cache_size=0, workers=2)
    embedder.load()
    recorded = record_runs(embedder)
    vectors = embedder.embed(["radium", "polonium", "radium", "radium"])
    assert sum(len(r) for r in recorded) == 2
    assert vectors[0] == vectors[2] == vectors[3] != vectors[1]


def test_start_loading_loads_in_the_background_and_defers_errors(tmp_path):
    embedder = LocalEmbedder(cache_size=0)
    embedder.start_loading()
    deadline = time.monotonic() + 60
    while not embedder.loaded and time.monotonic() < deadline:
        time.sleep(0.01)
    assert embedder.loaded
    broken = LocalEmbedder(model_path=tmp_path / "nothing.onnx")
    broken.start_loading()  # no exception here ...
    with pytest.raises(EmbeddingError, match="model file not found"):
        broken.embed(["radium"])  # ... the first request reports it


def test_the_cache_returns_identical_vectors_and_stays_bounded():
    cached = LocalEmbedder(cache_size=2)
    first = cached.embed(["a", "b", "c", "a"])
    assert first[0] == first[3]
    assert len(cached._cache) == 2


@pytest.mark.parametrize("bad", ["just a string", [1, 2], ["ok", None]])
def test_bad_input_is_a_clear_error(embedder, bad):
    with pytest.raises(EmbeddingError, match="string|str"):
        embedder.embed(bad)


def test_empty_input(embedder):
    assert embedder.embed([]) == []


def test_invalid_options():
    with pytest.raises(ValueError, match="intra_op_threads"):
        LocalEmbedder(intra_op_threads=0)
    with pytest.raises(ValueError, match="workers"):
        LocalEmbedder(workers=0)


def test_importing_the_package_is_cheap():
    code = ("import sys, trustgraph_flow.model.embeddings as e; "
            "print(sorted(m for m in ('onnxruntime', 'tokenizers', 'openai', 'numpy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# ------------------------------------------------------------------------------ registry
def test_registry_by_name():
    assert embedder_names() == ["local", "openai"]
    assert get_embedder("local") is get_embedder("local")
    shared = get_embedder("local")
    deadline = time.monotonic() + 60
    while not shared.loaded and time.monotonic() < deadline:  # a shared one loads its model at once
        time.sleep(0.01)
    assert shared.loaded
    assert get_embedder("local", shared=False) is not get_embedder("local")
    assert isinstance(get_embedder("openai", base_url="http://127.0.0.1:9/v1"), OpenAIEmbedder)
    with pytest.raises(EmbeddingError, match="unknown embedder 'bert'; choose one of local, openai"):
        get_embedder("bert")
    with pytest.raises(EmbeddingError, match="invalid options for embedder 'local'"):
        get_embedder("local", colour="red")


# -------------------------------------------------------------- OpenAI-compatible backend
def test_openai_embedder_through_the_test_server_matches_local_vectors(embedder, server):
    remote = OpenAIEmbedder(server.base_url, "test-key", LOCAL_MODEL_ID)
    texts = ["Marie Curie", "polonium was named after Poland"]
    vectors = remote.embed(texts)
    # the openai client asks for base64 by default; the server answers little-endian float32
    assert server.requests[-1].body["encoding_format"] == "base64"
    for got, want in zip(vectors, embedder.embed(texts), strict=True):
        assert max(abs(a - b) for a, b in zip(got, want, strict=True)) < 1e-6
    assert remote.dimension == 384
    assert remote.model_id == f"openai:{LOCAL_MODEL_ID}" != embedder.model_id


def test_the_server_also_answers_float_encoding(embedder, server):
    import openai

    client = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
    response = client.embeddings.create(model="any", input="radium", encoding_format="float")
    assert response.model == LOCAL_MODEL_ID
    local = embedder.embed(["radium"])[0]
    assert max(abs(a - b) for a, b in zip(response.data[0].embedding, local, strict=True)) < 1e-6
    assert response.usage.prompt_tokens == 1


def test_openai_embedder_learns_the_dimension_from_a_probe(server):
    remote = OpenAIEmbedder(server.base_url, "k", "m")
    assert remote.dimension == 384
    assert server.requests[-1].body["input"] == ["dimension probe"]


def test_openai_embedder_errors_name_the_endpoint(server):
    remote = OpenAIEmbedder(server.base_url, "k", "mini", max_retries=0)
    server.fail_next(1, 503, "overloaded", endpoint="embeddings")
    with pytest.raises(EmbeddingError) as info:
        remote.embed(["radium"])
    message = str(info.value)
    assert server.base_url in message and "model mini" in message and "HTTP 503" in message


def test_openai_embedder_retries_server_errors(server):
    remote = OpenAIEmbedder(server.base_url, "k", "mini", max_retries=2)
    server.fail_next(1, 500, endpoint="embeddings", retry_after=0)
    assert len(remote.embed(["radium"])[0]) == 384


def test_openai_embedder_connection_refused_is_reported():
    remote = OpenAIEmbedder("http://127.0.0.1:9/v1", "k", "mini", max_retries=0, timeout=2)
    with pytest.raises(EmbeddingError, match=r"http://127.0.0.1:9/v1 \(model mini\) failed: connection error"):
        remote.embed(["radium"])


def test_openai_embedder_needs_an_endpoint(monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(EmbeddingError, match="no endpoint configured"):
        OpenAIEmbedder()


def test_server_rejects_token_id_input(server):
    import openai

    client = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
    with pytest.raises(openai.BadRequestError, match="token-id input is not supported"):
        client.embeddings.create(model="any", input=[[101, 102]])
