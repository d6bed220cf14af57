"""Cross-encoder inference on ONNX Runtime: tokenize pairs, run the graph, squash the logit.

Serving dependencies only: onnxruntime, tokenizers and numpy. Never import torch or
transformers here; the serving image does not have them.

Works for any exported ``*ForSequenceClassification`` with one label (XLM-RoBERTa such as
bge-reranker-v2-m3, BERT such as the ms-marco MiniLM cross-encoders): the graph takes the
inputs its manifest names (``token_type_ids`` only where the model has them) and returns
``logits`` [n, 1]; the score is the sigmoid of that logit.

Pairs are tokenized as FlagEmbedding's reranker does, so scores match it: the query alone,
cut to ``query_max_tokens``; the passage alone; then both joined with the model's special
tokens and cut to ``max_tokens`` by truncating the passage only (tokenizers'
``only_second`` strategy). A long passage never pushes the query out.

The three steps are separate so the batching engine can pipeline them: ``tokenize`` (pre)
sorts the pairs by length and pads each length bucket on its own, ``infer`` (core) runs
the buckets, ``postprocess`` (post) turns logits into scores. ORT's
``InferenceSession.run`` is thread-safe and the tokenizers are configured once in
``load`` and only read afterwards, so ``tokenize`` may run while ``infer`` does.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnxruntime as ort
from tokenizers import Encoding, Tokenizer

from groundwire_core.errors import BackendFailure, InvalidInput
from groundwire_core.model_manifest import refuse_cost_model
from groundwire_core.onnx_models import (
    load_tokenizer,
    model_files,
    open_sessions,
)
from groundwire_reranker.models.manifest import CrossEncoderManifest

LOGITS_OUTPUT = "logits"
# Characters kept per token of budget before tokenizing: a token is rarely longer than 16
# characters, so this never cuts text the model would have seen, and a 1 MB passage costs
# a bounded tokenizer pass instead of a megabyte-sized one.
CHARS_PER_TOKEN_BOUND = 16
# Padded tokens (pairs x longest pair) of one ONNX run. Pairs are sorted by length and cut
# into buckets within this budget, so 100 candidates of mixed length are not all padded
# to the longest one.
DEFAULT_BUCKET_TOKENS = 8192

Pair = tuple[str, str]


@dataclass
class Bucket:
    """Pairs of similar length, padded to the longest of them."""

    rows: np.ndarray  # int64 [m]: positions of these pairs in the batch
    feed: dict[str, np.ndarray]  # the graph's inputs, int64 [m, L]


@dataclass
class PairBatch:
    """One tokenized batch of pairs, split into length buckets."""

    buckets: list[Bucket]
    token_counts: list[int]  # real tokens per pair, in batch order, special tokens included

    def __len__(self) -> int:
        return len(self.token_counts)

    @property
    def padded_tokens(self) -> int:
        return sum(int(b.feed["input_ids"].size) for b in self.buckets)


class PairClassifier:
    """One exported cross-encoder (a directory with a manifest), served by ONNX Runtime:
    loading, pair tokenization and the graph's logits. Its subclasses add the Backend's
    core and post steps: ``OnnxCrossEncoder`` (relevance scores) and
    ``models.nli.OnnxNliModel`` (entailment probabilities). With ``lanes`` > 1 it also
    opens a one-thread session for runs that share the cores with others (``infer(batch,
    shared=True)``; see ``onnx_models.open_sessions``).
    """

    needs = ""  # the logits a subclass needs, for the error on a graph with others

    def __init__(
        self,
        model_dir: Path,
        *,
        intra_op_threads: int = 0,
        inter_op_threads: int = 1,
        bucket_tokens: int = DEFAULT_BUCKET_TOKENS,
        lanes: int = 1,
        serve_cost_model: bool = False,
        max_pair_tokens: int = 0,
    ) -> None:
        """``max_pair_tokens``: cut every pair to this many tokens when it is below the
        model's own limit (0 = the model's): a CPU deployment's bound on rerank cost."""
        self.model_dir = Path(model_dir)
        self.serve_cost_model = serve_cost_model
        self.max_pair_tokens = max_pair_tokens
        self.intra_op_threads = intra_op_threads
        self.inter_op_threads = inter_op_threads
        self.bucket_tokens = bucket_tokens
        self.lanes = lanes
        self._manifest: CrossEncoderManifest | None = None
        self._session: ort.InferenceSession | None = None
        self._shared: ort.InferenceSession | None = None
        self._pieces: Tokenizer | None = None  # one text, no special tokens
        self._pairs: Tokenizer | None = None  # joins two encodings, truncates the second
        self._feed_names: tuple[str, ...] = ()
        self._load_lock = threading.Lock()

    # -- lifecycle -----------------------------------------------------------------

    def load(self) -> None:
        """Read the manifest, open the ONNX session and the tokenizer. Idempotent.

        Raises NotFound (missing directory or files) and InvalidInput (a manifest, graph
        or tokenizer that cannot be served).
        """
        with self._load_lock:
            if self._session is not None:
                return
            manifest = CrossEncoderManifest.load(self.model_dir)
            self.width(manifest)  # refuses the other kind before any file is opened
            refuse_cost_model(
                self.model_dir,
                cost_model=manifest.cost_model,
                serve_cost_model=self.serve_cost_model,
            )
            manifest = capped(manifest, self.max_pair_tokens)
            onnx_path, tokenizer_path = model_files(
                self.model_dir,
                manifest.onnx_file,
                manifest.tokenizer_file,
                profile=manifest.profile,
            )
            session, shared = self._open_sessions(onnx_path, manifest)
            pieces = load_tokenizer(tokenizer_path)
            pieces.no_padding()
            pieces.enable_truncation(max_length=manifest.max_tokens)
            pairs = load_tokenizer(tokenizer_path)
            pairs.no_padding()
            pairs.enable_truncation(max_length=manifest.max_tokens, strategy="only_second")

            self._pieces = pieces
            self._pairs = pairs
            self._feed_names = tuple(i.name for i in session.get_inputs())
            self._manifest = manifest
            self._shared = shared
            self._session = session  # last: marks the model loaded

    def _open_sessions(
        self, onnx_path: Path, manifest: CrossEncoderManifest
    ) -> tuple[ort.InferenceSession, ort.InferenceSession | None]:
        session, shared = open_sessions(
            onnx_path,
            intra_op_threads=self.intra_op_threads,
            inter_op_threads=self.inter_op_threads,
            allow_spinning=True,
            lanes=self.lanes,
            profile=manifest.profile,
        )
        graph_inputs = [i.name for i in session.get_inputs()]
        if sorted(graph_inputs) != sorted(manifest.input_names):
            raise InvalidInput(
                f"{onnx_path} takes inputs {graph_inputs}, which do not match the "
                f"manifest's input_names {list(manifest.input_names)}"
            )
        outputs = {o.name: o for o in session.get_outputs()}
        if LOGITS_OUTPUT not in outputs:
            raise InvalidInput(
                f"{onnx_path} has no {LOGITS_OUTPUT!r} output (outputs: {sorted(outputs)})"
            )
        shape = outputs[LOGITS_OUTPUT].shape
        labels = shape[-1] if shape else None
        if isinstance(labels, int) and labels != self.width(manifest):
            raise InvalidInput(f"{onnx_path} produces {labels} logits per pair; {self.needs}")
        return session, shared

    def width(self, manifest: CrossEncoderManifest) -> int:
        """Logits per pair the subclass serves; raises InvalidInput for the other kind."""
        raise NotImplementedError

    @property
    def loaded(self) -> bool:
        return self._session is not None

    @property
    def manifest(self) -> CrossEncoderManifest:
        if self._manifest is None or self._session is None:
            raise RuntimeError("OnnxCrossEncoder.load() has not been called")
        return self._manifest

    # -- the Backend protocol -------------------------------------------------------

    def estimate_tokens(self, item: Pair) -> int:
        """Length guess before tokenizing, for packing and bucketing; capped at max_tokens."""
        limit = self.manifest.max_tokens
        query, passage = item
        guess = estimate_text_tokens(query, limit) + estimate_text_tokens(passage, limit) + 4
        return min(limit, guess)

    def encode_pairs(self, pairs: Sequence[Pair]) -> list[Encoding]:
        """Token ids of each (query, passage) pair as the model sees them (no padding).

        Raises InvalidInput when a pair is not two strings.
        """
        pieces, joiner = self._require_tokenizers()
        manifest = self.manifest
        queries: dict[str, int] = {}
        passages: list[str] = []
        query_of: list[int] = []
        passage_cut = manifest.max_tokens * CHARS_PER_TOKEN_BOUND
        check_pairs(pairs, "(query, passage)")
        for pair in pairs:
            query_of.append(queries.setdefault(pair[0], len(queries)))
            passages.append(pair[1][:passage_cut])
        query_cut = manifest.query_max_tokens * CHARS_PER_TOKEN_BOUND
        query_encodings = _encode(pieces, [q[:query_cut] for q in queries])
        for encoding in query_encodings:
            encoding.truncate(manifest.query_max_tokens)
        passage_encodings = _encode(pieces, passages)
        return [
            joiner.post_process(query_encodings[q], p, add_special_tokens=True)
            for q, p in zip(query_of, passage_encodings, strict=True)
        ]

    def tokenize(self, items: Sequence[Pair]) -> PairBatch:
        """Pre: tokenize the pairs, sort them by length and pad each bucket on its own."""
        encodings = self.encode_pairs(items)
        counts = [len(e.ids) for e in encodings]
        buckets: list[Bucket] = []
        order = sorted(range(len(encodings)), key=lambda i: -counts[i])
        start = 0
        while start < len(order):
            longest = counts[order[start]]
            size = max(1, self.bucket_tokens // max(1, longest))
            rows = order[start : start + size]
            buckets.append(self._pad([encodings[i] for i in rows], rows, longest))
            start += len(rows)
        return PairBatch(buckets=buckets, token_counts=counts)

    def _pad(self, encodings: list[Encoding], rows: list[int], length: int) -> Bucket:
        n = len(encodings)
        input_ids = np.full((n, length), self.manifest.pad_token_id, dtype=np.int64)
        attention_mask = np.zeros((n, length), dtype=np.int64)
        token_type_ids = np.zeros((n, length), dtype=np.int64)
        for row, enc in enumerate(encodings):
            count = len(enc.ids)
            input_ids[row, :count] = enc.ids
            attention_mask[row, :count] = 1
            token_type_ids[row, :count] = enc.type_ids
        available = {
            "input_ids": input_ids,
            "attention_mask": attention_mask,
            "token_type_ids": token_type_ids,
        }
        feed = {name: available[name] for name in self._feed_names}
        return Bucket(rows=np.asarray(rows, dtype=np.int64), feed=feed)

    def token_counts(self, batch: PairBatch) -> list[int]:
        return list(batch.token_counts)

    def logits(self, batch: PairBatch, shared: bool = False) -> np.ndarray:
        """Every bucket's logits, float32 [n, labels] in batch order (see ``infer``)."""
        session = self._require_session()
        if shared and self._shared is not None:
            session = self._shared
        width = self.width(self.manifest)
        logits = np.zeros((len(batch), width), dtype=np.float32)
        for bucket in batch.buckets:
            try:
                (out,) = session.run([LOGITS_OUTPUT], bucket.feed)
            except Exception as exc:  # ORT's exceptions carry internal detail: don't leak it
                n, length = bucket.feed["input_ids"].shape
                raise BackendFailure(
                    f"ONNX Runtime failed to run the {self.manifest.profile} cross-encoder "
                    f"on a batch of {n} x {length} tokens"
                ) from exc
            logits[bucket.rows] = np.asarray(out, dtype=np.float32).reshape(-1, width)
        return logits

    # -- helpers -------------------------------------------------------------------

    def _require_session(self) -> ort.InferenceSession:
        if self._session is None:
            raise RuntimeError("OnnxCrossEncoder.load() has not been called")
        return self._session

    def _require_tokenizers(self) -> tuple[Tokenizer, Tokenizer]:
        if self._pieces is None or self._pairs is None or self._session is None:
            raise RuntimeError("OnnxCrossEncoder.load() has not been called")
        return self._pieces, self._pairs


class OnnxCrossEncoder(PairClassifier):
    """A relevance cross-encoder: one logit per (query, passage) pair, its sigmoid the
    score in [0, 1]. The reranker's ``groundwire_core.batching.Backend``."""

    # What this class serves: a relevance model, one logit (models.nli serves three).
    needs = "a reranker needs exactly one"

    def width(self, manifest: CrossEncoderManifest) -> int:
        """Logits per pair this class serves; raises InvalidInput for an NLI manifest."""
        if manifest.labels:
            raise InvalidInput(
                f"{self.model_dir} holds an entailment (NLI) model, not a relevance "
                "cross-encoder; serve it with GROUNDWIRE_RERANKER_NLI_MODEL_DIR"
            )
        return 1

    def infer(self, batch: PairBatch, shared: bool = False) -> np.ndarray:
        """Core: run every bucket; returns the logits as float32 [n], in batch order.
        ``shared``: other runs go at the same time, so run on one thread (the shared
        session, when open).

        Raises BackendFailure when ONNX Runtime fails (without its internal detail).
        """
        return self.logits(batch, shared).reshape(-1)

    def postprocess(self, batch: PairBatch, raw: np.ndarray) -> list[float]:
        """Post: the score of each pair, the sigmoid of its logit, in batch order."""
        scores: list[float] = sigmoid(raw).tolist()
        return scores

    def score(self, pairs: Sequence[Pair]) -> list[float]:
        """The three steps in sequence (no batching engine): scores in [0, 1]."""
        batch = self.tokenize(pairs)
        return self.postprocess(batch, self.infer(batch))


def check_pairs(pairs: Sequence[Pair], shape: str) -> None:
    """Raises InvalidInput for an item that is not two strings (``shape`` names them)."""
    for i, pair in enumerate(pairs):
        if (
            not isinstance(pair, tuple)
            or len(pair) != 2
            or not all(isinstance(t, str) for t in pair)
        ):
            raise InvalidInput(f"pair {i} is not a {shape} pair of strings")


def estimate_text_tokens(text: str, limit: int) -> int:
    """About 4 characters a token for ASCII text, one a token for other scripts.

    bge-reranker-v2-m3 is multilingual: Chinese or Japanese text has about one token per
    character, and a characters/4 guess would pack batches 4x over their token budget.
    Non-ASCII characters are counted from the UTF-8 length (C speed, no Python loop), on
    a prefix only: 4 characters a token means ``4 * limit`` characters reach the cap.
    """
    head = text[: 4 * limit]
    non_ascii = (len(head.encode("utf-8", "surrogatepass")) - len(head)) // 2
    return min(limit, (len(head) - non_ascii) // 4 + non_ascii)


def sigmoid(logits: np.ndarray) -> np.ndarray:
    """1 / (1 + e^-x) in float64 (no overflow warning at large |x|), returned as float32."""
    x = np.asarray(logits, dtype=np.float64)
    out = np.empty_like(x)
    positive = x >= 0
    out[positive] = 1.0 / (1.0 + np.exp(-x[positive]))
    e = np.exp(x[~positive])
    out[~positive] = e / (1.0 + e)
    return out.astype(np.float32)


def _encode(tokenizer: Tokenizer, texts: list[str]) -> list[Encoding]:
    """Token pieces of each text (no special tokens).

    Lone surrogates (never valid UTF-8, so never from gRPC, but possible in-process) make
    the tokenizer refuse the whole batch; they are replaced with U+FFFD instead, so one
    bad text cannot fail the other requests packed into its batch.
    """
    try:
        return tokenizer.encode_batch(texts, add_special_tokens=False)
    except TypeError:
        clean = [t.encode("utf-8", "surrogatepass").decode("utf-8", "replace") for t in texts]
        return tokenizer.encode_batch(clean, add_special_tokens=False)


def capped(manifest: CrossEncoderManifest, max_pair_tokens: int) -> CrossEncoderManifest:
    """``manifest`` with pairs cut to ``max_pair_tokens`` (0, or above the model's own
    limit: unchanged); the query keeps its share of the pair."""
    if not 0 < max_pair_tokens < manifest.max_tokens:
        return manifest
    share = manifest.query_max_tokens / manifest.max_tokens
    return dataclasses.replace(
        manifest, max_tokens=max_pair_tokens, query_max_tokens=max(1, int(max_pair_tokens * share))
    )
