"""Bi-encoder inference on ONNX Runtime: tokenize, run the graph, post-process.

Serving dependencies only: onnxruntime, tokenizers and numpy. Never import torch or
transformers here; the serving image does not have them.

The work is split in three steps so the server's batcher can pipeline them:
``tokenize`` (pre) for the next batch runs on one thread while ``infer`` (core) runs the
current batch on another, and ``postprocess`` (post) turns the graph's outputs into
vectors. ORT's ``InferenceSession.run`` is thread-safe, and the tokenizer is configured
once in ``load`` and only read afterwards, so ``tokenize`` and ``infer`` may run
concurrently.

Two graph shapes are served (the manifest's ``outputs`` say which outputs exist):

* a plain encoder (MiniLM) outputs ``last_hidden_state``; ``postprocess`` pools it (mean
  or CLS) and normalises it as the manifest says;
* BGE-M3 computes all three heads in one forward pass: ``dense`` (normalised CLS),
  ``sparse_weights`` (ReLU of the sparse head, one weight per token) and
  ``colbert_vectors`` (the ColBERT head on every token but CLS, masked, normalised).
  ``postprocess`` does what FlagEmbedding's ``BGEM3FlagModel.encode`` does after the
  model: the highest weight per token id, special tokens dropped, and the ColBERT
  vectors of the real tokens.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

from groundwire_core.errors import BackendFailure, InvalidInput
from groundwire_core.model_manifest import refuse_cost_model
from groundwire_core.onnx_models import (
    load_tokenizer,
    model_files,
    open_sessions,
)
from groundwire_embedder.models.manifest import ModelManifest

HIDDEN_OUTPUT = "last_hidden_state"
DENSE_OUTPUT = "dense"
SPARSE_OUTPUT = "sparse_weights"
COLBERT_OUTPUT = "colbert_vectors"

GraphOutputs = dict[str, np.ndarray]


@dataclass
class EncodedBatch:
    """Token ids for one batch, padded to the longest text in this batch."""

    input_ids: np.ndarray  # int64 [n, L]
    attention_mask: np.ndarray  # int64 [n, L]
    token_type_ids: np.ndarray  # int64 [n, L], zeros
    token_counts: list[int]  # real tokens per text, after truncation, incl. special tokens

    def __len__(self) -> int:
        return len(self.token_counts)


@dataclass(frozen=True)
class SparseWeights:
    """Learned lexical weights of one text: token ids (ascending) and their weights."""

    indices: np.ndarray  # int64 [k], ascending, unique
    values: np.ndarray  # float32 [k], all > 0

    def as_dict(self) -> dict[int, float]:
        return dict(zip(self.indices.tolist(), self.values.tolist(), strict=True))


@dataclass
class EncoderOutput:
    """What one batch produces; ``sparse`` and ``multi_vector`` only for models that have them."""

    dense: np.ndarray  # float32 [n, dense_dims]
    sparse: list[SparseWeights] | None = None
    multi_vector: list[np.ndarray] | None = None  # float32 [tokens - 1, multi_vector_dims] each


class OnnxEncoder:
    """One exported encoder (a directory with a manifest), served by ONNX Runtime.

    With ``lanes`` > 1 it also opens a one-thread session for runs that share the cores
    with others (``infer(batch, shared=True)``; see ``onnx_models.open_sessions``).
    """

    def __init__(
        self,
        model_dir: Path,
        *,
        intra_op_threads: int = 0,
        inter_op_threads: int = 1,
        allow_spinning: bool = True,
        lanes: int = 1,
        serve_cost_model: bool = False,
    ) -> None:
        self.model_dir = Path(model_dir)
        self.serve_cost_model = serve_cost_model
        self.intra_op_threads = intra_op_threads
        self.inter_op_threads = inter_op_threads
        self.allow_spinning = allow_spinning
        self.lanes = lanes
        self._manifest: ModelManifest | None = None
        self._session: ort.InferenceSession | None = None
        self._shared: ort.InferenceSession | None = None
        self._tokenizer: Tokenizer | None = None
        self._counter: Tokenizer | None = None
        self._feed_names: tuple[str, ...] = ()
        self._fetch_names: list[str] = []
        self._ignored_ids = np.zeros(0, dtype=np.int64)
        self._pad_id = 0
        self._load_lock = threading.Lock()

    # -- lifecycle -----------------------------------------------------------------

    def load(self) -> None:
        """Read the manifest, open the ONNX session and the tokenizer. Idempotent.

        Raises NotFound (no model directory, manifest or file) and InvalidInput (the
        files do not load or do not match the manifest).
        """
        with self._load_lock:
            if self._session is not None:
                return
            manifest = ModelManifest.load(self.model_dir)
            refuse_cost_model(
                self.model_dir,
                cost_model=manifest.cost_model,
                serve_cost_model=self.serve_cost_model,
            )
            onnx_path, tokenizer_path = model_files(
                self.model_dir,
                manifest.onnx_file,
                manifest.tokenizer_file,
                profile=manifest.profile,
            )

            session, shared = open_sessions(
                onnx_path,
                intra_op_threads=self.intra_op_threads,
                inter_op_threads=self.inter_op_threads,
                allow_spinning=self.allow_spinning,
                lanes=self.lanes,
                profile=manifest.profile,
            )

            graph_inputs = tuple(i.name for i in session.get_inputs())
            unknown = [n for n in graph_inputs if n not in manifest.input_names]
            if unknown or "input_ids" not in graph_inputs:
                raise InvalidInput(
                    f"{onnx_path} takes inputs {list(graph_inputs)}, which do not match the "
                    f"manifest's input_names {list(manifest.input_names)}"
                )
            fetch = _outputs_to_fetch(onnx_path, manifest, session)

            tokenizer = load_tokenizer(tokenizer_path)
            padding = tokenizer.padding
            pad_id = int(padding["pad_id"]) if padding else _guess_pad_id(tokenizer)
            tokenizer.no_padding()  # we pad per batch ourselves
            tokenizer.enable_truncation(max_length=manifest.max_tokens)
            counter = load_tokenizer(tokenizer_path)
            counter.no_padding()
            counter.no_truncation()

            self._tokenizer = tokenizer
            self._counter = counter
            self._pad_id = pad_id
            self._feed_names = graph_inputs
            self._fetch_names = fetch
            self._ignored_ids = np.asarray(sorted(manifest.sparse_ignored_ids), dtype=np.int64)
            self._manifest = manifest
            self._shared = shared
            self._session = session  # last: marks the encoder loaded

    @property
    def loaded(self) -> bool:
        return self._session is not None

    @property
    def manifest(self) -> ModelManifest:
        if self._manifest is None or self._session is None:
            raise RuntimeError("OnnxEncoder.load() has not been called")
        return self._manifest

    # -- the three steps -----------------------------------------------------------

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Tokens per text with special tokens, without truncation (no inference)."""
        if self._counter is None:
            raise RuntimeError("the encoder is not loaded; call load() first")
        return [len(e.ids) for e in self._counter.encode_batch(list(texts))]

    def tokenize(self, texts: Sequence[str]) -> EncodedBatch:
        """Pre: tokenize (truncating to ``max_tokens``) and pad to this batch's longest.

        Raises InvalidInput when ``texts`` is not a sequence of strings.
        """
        tokenizer = self._require_tokenizer()
        if isinstance(texts, str):
            raise InvalidInput("texts must be a sequence of strings, not a single string")
        items = list(texts)
        for i, text in enumerate(items):
            if not isinstance(text, str):
                raise InvalidInput(f"texts[{i}] is {type(text).__name__}, not a string")
        if not items:
            empty = np.zeros((0, 0), dtype=np.int64)
            return EncodedBatch(empty, empty.copy(), empty.copy(), [])

        encodings = tokenizer.encode_batch(items, add_special_tokens=True)
        counts = [len(e.ids) for e in encodings]
        length = max(counts)
        input_ids = np.full((len(items), length), self._pad_id, dtype=np.int64)
        attention_mask = np.zeros((len(items), length), dtype=np.int64)
        for row, (enc, count) in enumerate(zip(encodings, counts, strict=True)):
            input_ids[row, :count] = enc.ids
            attention_mask[row, :count] = 1
        token_type_ids = np.zeros((len(items), length), dtype=np.int64)
        return EncodedBatch(input_ids, attention_mask, token_type_ids, counts)

    def infer(self, batch: EncodedBatch, shared: bool = False) -> GraphOutputs:
        """Core: run the graph; returns its outputs by name (float32). ``shared``: other
        runs go at the same time, so run on one thread (the shared session, when open).

        Raises BackendFailure when ONNX Runtime fails on the batch.
        """
        session = self._require_session()
        if shared and self._shared is not None:
            session = self._shared
        n, length = batch.input_ids.shape
        if n == 0:
            return {}
        available = {
            "input_ids": batch.input_ids,
            "attention_mask": batch.attention_mask,
            "token_type_ids": batch.token_type_ids,
        }
        feed = {name: available[name] for name in self._feed_names}
        try:
            values = session.run(self._fetch_names, feed)
        except Exception as exc:  # ORT's exceptions carry internal detail: don't leak it
            raise BackendFailure(
                f"ONNX Runtime failed to run the {self.manifest.profile} encoder "
                f"on a batch of {n} x {length} tokens"
            ) from exc
        return {
            name: np.asarray(value, dtype=np.float32)
            for name, value in zip(self._fetch_names, values, strict=True)
        }

    def postprocess(self, batch: EncodedBatch, raw: GraphOutputs) -> EncoderOutput:
        """Post: dense vectors and, when the model has them, sparse weights and ColBERT rows."""
        manifest = self.manifest
        n = len(batch)
        if n == 0:
            return EncoderOutput(
                dense=np.zeros((0, manifest.dense_dims), dtype=np.float32),
                sparse=[] if "sparse" in manifest.outputs else None,
                multi_vector=[] if "multi_vector" in manifest.outputs else None,
            )
        if DENSE_OUTPUT in raw:
            dense = raw[DENSE_OUTPUT]  # pooled and normalised inside the graph
        else:
            dense = _pool(batch, raw[HIDDEN_OUTPUT], manifest)
        sparse = None
        if SPARSE_OUTPUT in raw:
            sparse = lexical_weights(batch, raw[SPARSE_OUTPUT], self._ignored_ids)
        multi_vector = None
        if COLBERT_OUTPUT in raw:
            colbert = raw[COLBERT_OUTPUT]
            # FlagEmbedding keeps tokens_num - 1 rows: every real token but CLS (EOS stays)
            multi_vector = [
                np.ascontiguousarray(colbert[i, : count - 1])
                for i, count in enumerate(batch.token_counts)
            ]
        return EncoderOutput(
            dense=np.ascontiguousarray(dense, dtype=np.float32),
            sparse=sparse,
            multi_vector=multi_vector,
        )

    def encode(self, texts: Sequence[str]) -> EncoderOutput:
        """The three steps in sequence."""
        batch = self.tokenize(texts)
        return self.postprocess(batch, self.infer(batch))

    # -- helpers -------------------------------------------------------------------

    def _require_session(self) -> ort.InferenceSession:
        if self._session is None:
            raise RuntimeError("OnnxEncoder.load() has not been called")
        return self._session

    def _require_tokenizer(self) -> Tokenizer:
        if self._tokenizer is None or self._session is None:
            raise RuntimeError("OnnxEncoder.load() has not been called")
        return self._tokenizer


def _outputs_to_fetch(
    onnx_path: Path, manifest: ModelManifest, session: ort.InferenceSession
) -> list[str]:
    """The graph outputs that give the manifest's outputs; raises InvalidInput if absent."""
    graph = {o.name: o.shape for o in session.get_outputs()}
    fetch: list[str] = []
    for output, candidates, width in (
        ("dense", (DENSE_OUTPUT, HIDDEN_OUTPUT), manifest.dense_dims),
        ("sparse", (SPARSE_OUTPUT,), None),
        ("multi_vector", (COLBERT_OUTPUT,), manifest.multi_vector_dims),
    ):
        if output not in manifest.outputs:
            continue
        name = next((c for c in candidates if c in graph), None)
        if name is None:
            raise InvalidInput(
                f"{onnx_path} has none of the outputs {list(candidates)} the manifest's "
                f"{output!r} output needs (graph outputs: {sorted(graph)})"
            )
        shape = graph[name]
        last = shape[-1] if shape else None
        if width is not None and isinstance(last, int) and last != width:
            raise InvalidInput(
                f"{onnx_path} output {name!r} is {last}-dimensional but the manifest says {width}"
            )
        fetch.append(name)
    return fetch


def _pool(batch: EncodedBatch, hidden: np.ndarray, manifest: ModelManifest) -> np.ndarray:
    """Mask-weighted mean or CLS pooling of ``last_hidden_state``, normalised if asked."""
    if manifest.pooling == "cls":
        pooled = hidden[:, 0, :]
    else:
        mask = batch.attention_mask.astype(np.float32)
        # one contraction, no [n, L, H] temporary: ~5x less CPU than multiply-and-sum
        summed = np.einsum("nl,nlh->nh", mask, hidden)
        counts = np.maximum(mask.sum(axis=1, keepdims=True), np.float32(1e-9))
        pooled = summed / counts
    if manifest.normalize:
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        pooled = pooled / np.maximum(norms, np.float32(1e-12))
    return pooled


def lexical_weights(
    batch: EncodedBatch, weights: np.ndarray, ignored_ids: np.ndarray
) -> list[SparseWeights]:
    """Per text: the highest positive weight of each token id, ignored ids left out.

    This is FlagEmbedding's ``_process_token_weights``, vectorised per row.
    """
    ids = batch.input_ids
    keep = (batch.attention_mask == 1) & (weights > 0)
    if ignored_ids.size:
        keep &= ~np.isin(ids, ignored_ids)
    result: list[SparseWeights] = []
    for row in range(ids.shape[0]):
        row_ids = ids[row, keep[row]]
        row_weights = weights[row, keep[row]].astype(np.float32, copy=False)
        if row_ids.size == 0:
            result.append(SparseWeights(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)))
            continue
        order = np.argsort(row_ids, kind="stable")
        sorted_ids = row_ids[order]
        unique_ids, starts = np.unique(sorted_ids, return_index=True)
        values = np.maximum.reduceat(row_weights[order], starts)
        result.append(SparseWeights(unique_ids.astype(np.int64), values.astype(np.float32)))
    return result


def _guess_pad_id(tokenizer: Tokenizer) -> int:
    for token in ("[PAD]", "<pad>"):
        token_id = tokenizer.token_to_id(token)
        if token_id is not None:
            return int(token_id)
    return 0
