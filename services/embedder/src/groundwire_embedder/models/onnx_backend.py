"""Bi-encoder inference on ONNX Runtime: tokenize, run the graph, pool.

Serving dependencies only: onnxruntime, tokenizers and numpy. Never import torch or
transformers here; the serving image does not have them.

The work is split in three steps so the server's batcher can pipeline them:
``tokenize`` (pre) for the next batch runs on one thread while ``infer`` (core) runs the
current batch on another, and ``postprocess`` (post) pools the hidden states. ORT's
``InferenceSession.run`` is thread-safe, and the tokenizer is configured once in
``load`` and only read afterwards, so ``tokenize`` and ``infer`` may run concurrently.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

from groundwire_core.errors import BackendFailure, InvalidInput, NotFound
from groundwire_embedder.models.manifest import ModelManifest

HIDDEN_OUTPUT = "last_hidden_state"


@dataclass
class EncodedBatch:
    """Token ids for one batch, padded to the longest text in this batch."""

    input_ids: np.ndarray  # int64 [n, L]
    attention_mask: np.ndarray  # int64 [n, L]
    token_type_ids: np.ndarray  # int64 [n, L], zeros
    token_counts: list[int]  # real tokens per text, after truncation, incl. special tokens

    def __len__(self) -> int:
        return len(self.token_counts)


@dataclass
class EncoderOutput:
    """What one batch produces; ``sparse`` and ``multi_vector`` only for models that have them."""

    dense: np.ndarray  # float32 [n, dense_dims]
    sparse: list[dict[int, float]] | None = None
    multi_vector: list[np.ndarray] | None = None


class OnnxEncoder:
    """One exported encoder (a directory with a manifest), served by ONNX Runtime."""

    def __init__(
        self, model_dir: Path, *, intra_op_threads: int = 0, inter_op_threads: int = 1
    ) -> None:
        self.model_dir = Path(model_dir)
        self.intra_op_threads = intra_op_threads
        self.inter_op_threads = inter_op_threads
        self._manifest: ModelManifest | None = None
        self._session: ort.InferenceSession | None = None
        self._tokenizer: Tokenizer | None = None
        self._counter: Tokenizer | None = None
        self._feed_names: tuple[str, ...] = ()
        self._pad_id = 0
        self._hidden_dims = 0
        self._load_lock = threading.Lock()

    # -- lifecycle -----------------------------------------------------------------

    def load(self) -> None:
        """Read the manifest, open the ONNX session and the tokenizer. Idempotent."""
        with self._load_lock:
            if self._session is not None:
                return
            manifest = ModelManifest.load(self.model_dir)
            onnx_path = self.model_dir / manifest.onnx_file
            tokenizer_path = self.model_dir / manifest.tokenizer_file
            for path in (onnx_path, tokenizer_path):
                if not path.is_file():
                    raise NotFound(
                        f"model directory {self.model_dir} is incomplete: {path.name} is "
                        f"missing; rebuild it with `groundwire models build {manifest.profile}`"
                    )

            options = ort.SessionOptions()
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
            options.intra_op_num_threads = max(0, int(self.intra_op_threads))
            options.inter_op_num_threads = max(0, int(self.inter_op_threads))
            try:
                session = ort.InferenceSession(
                    str(onnx_path), sess_options=options, providers=["CPUExecutionProvider"]
                )
            except Exception as exc:  # ORT raises its own exception types
                raise InvalidInput(
                    f"{onnx_path} is not a loadable ONNX model ({type(exc).__name__}); "
                    f"rebuild it with `groundwire models build {manifest.profile}`"
                ) from exc

            graph_inputs = tuple(i.name for i in session.get_inputs())
            unknown = [n for n in graph_inputs if n not in manifest.input_names]
            if unknown or "input_ids" not in graph_inputs:
                raise InvalidInput(
                    f"{onnx_path} takes inputs {list(graph_inputs)}, which do not match the "
                    f"manifest's input_names {list(manifest.input_names)}"
                )
            outputs = {o.name: o for o in session.get_outputs()}
            if HIDDEN_OUTPUT not in outputs:
                raise InvalidInput(
                    f"{onnx_path} has no {HIDDEN_OUTPUT!r} output (outputs: {sorted(outputs)})"
                )
            hidden_shape = outputs[HIDDEN_OUTPUT].shape
            hidden_dims = hidden_shape[-1] if hidden_shape else None
            if isinstance(hidden_dims, int) and hidden_dims != manifest.dense_dims:
                raise InvalidInput(
                    f"{onnx_path} produces {hidden_dims}-dim states but the manifest says "
                    f"dense_dims={manifest.dense_dims}"
                )

            try:
                tokenizer = Tokenizer.from_file(str(tokenizer_path))
            except Exception as exc:  # tokenizers raises a bare Exception
                raise InvalidInput(
                    f"{tokenizer_path} is not a loadable tokenizer ({type(exc).__name__})"
                ) from exc
            padding = tokenizer.padding
            pad_id = int(padding["pad_id"]) if padding else _guess_pad_id(tokenizer)
            tokenizer.no_padding()  # we pad per batch ourselves
            tokenizer.enable_truncation(max_length=manifest.max_tokens)
            counter = Tokenizer.from_file(str(tokenizer_path))
            counter.no_padding()
            counter.no_truncation()

            self._tokenizer = tokenizer
            self._counter = counter
            self._pad_id = pad_id
            self._feed_names = graph_inputs
            self._hidden_dims = manifest.dense_dims
            self._manifest = manifest
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
        """Pre: tokenize (truncating to ``max_tokens``) and pad to this batch's longest."""
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

    def infer(self, batch: EncodedBatch) -> np.ndarray:
        """Core: run the graph; returns ``last_hidden_state`` as float32 [n, L, H]."""
        session = self._require_session()
        n, length = batch.input_ids.shape
        if n == 0:
            return np.zeros((0, length, self._hidden_dims), dtype=np.float32)
        available = {
            "input_ids": batch.input_ids,
            "attention_mask": batch.attention_mask,
            "token_type_ids": batch.token_type_ids,
        }
        feed = {name: available[name] for name in self._feed_names}
        try:
            (hidden,) = session.run([HIDDEN_OUTPUT], feed)
        except Exception as exc:  # ORT's exceptions carry internal detail: don't leak it
            raise BackendFailure(
                f"ONNX Runtime failed to run the {self.manifest.profile} encoder "
                f"on a batch of {n} x {length} tokens"
            ) from exc
        return np.asarray(hidden, dtype=np.float32)

    def postprocess(self, batch: EncodedBatch, hidden: np.ndarray) -> EncoderOutput:
        """Post: pool (mask-weighted mean or CLS) and L2-normalise per the manifest."""
        manifest = self.manifest
        n = len(batch)
        if n == 0:
            return EncoderOutput(dense=np.zeros((0, manifest.dense_dims), dtype=np.float32))
        hidden = np.asarray(hidden, dtype=np.float32)
        if manifest.pooling == "cls":
            pooled = hidden[:, 0, :]
        else:
            mask = batch.attention_mask.astype(np.float32)[:, :, None]
            summed = (hidden * mask).sum(axis=1)
            counts = np.maximum(mask.sum(axis=1), np.float32(1e-9))
            pooled = summed / counts
        if manifest.normalize:
            norms = np.linalg.norm(pooled, axis=1, keepdims=True)
            pooled = pooled / np.maximum(norms, np.float32(1e-12))
        return EncoderOutput(dense=np.ascontiguousarray(pooled, dtype=np.float32))

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


def _guess_pad_id(tokenizer: Tokenizer) -> int:
    for token in ("[PAD]", "<pad>"):
        token_id = tokenizer.token_to_id(token)
        if token_id is not None:
            return int(token_id)
    return 0
