"""Entailment (NLI) inference on ONNX Runtime: (premise, hypothesis) -> label probabilities.

An NLI model is a cross-encoder with three logits (any ``*ForSequenceClassification``
with entailment / neutral / contradiction labels, e.g. the DeBERTa-v3 NLI cross-encoders)
exported by ``groundwire models build nli``. Its manifest's ``labels`` give the graph's
logit order, which varies between checkpoints; results always come out in
``NLI_LABELS`` order (entailment, neutral, contradiction), softmaxed.

Tokenization differs from the relevance model's in what it cuts: the hypothesis (the
claim) is short and must be read whole, so it is cut only beyond ``query_max_tokens``;
the premise (a passage window) is cut to the room left. Pairs that fit the budget are
tokenized exactly as ``tokenizer(premise, hypothesis)`` does in transformers.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from tokenizers import Encoding

from groundwire_core.errors import InvalidInput
from groundwire_reranker.models.cross_encoder import (
    CHARS_PER_TOKEN_BOUND,
    Pair,
    PairBatch,
    PairClassifier,
    _encode,
    check_pairs,
)
from groundwire_reranker.models.manifest import NLI_LABELS, CrossEncoderManifest

LabelProbs = tuple[float, float, float]
"""Probabilities of entailment, neutral and contradiction; they sum to 1."""


class OnnxNliModel(PairClassifier):
    """One exported NLI model, served by ONNX Runtime: the entailment engine's Backend.

    Items are (premise, hypothesis) pairs; results are ``LabelProbs``.
    """

    needs = f"an entailment model needs {len(NLI_LABELS)}"

    def width(self, manifest: CrossEncoderManifest) -> int:
        """Three; raises InvalidInput for a relevance model's manifest."""
        if not manifest.labels:
            raise InvalidInput(
                f"{self.model_dir} holds a relevance cross-encoder, not an entailment model; "
                "build one with `groundwire models build nli --source DIR`"
            )
        return len(manifest.labels)

    def encode_pairs(self, pairs: Sequence[Pair]) -> list[Encoding]:
        """Token ids of each (premise, hypothesis) pair as the model sees them.

        Raises InvalidInput when a pair is not two strings.
        """
        pieces, joiner = self._require_tokenizers()
        manifest = self.manifest
        check_pairs(pairs, "(premise, hypothesis)")
        text_cut = manifest.max_tokens * CHARS_PER_TOKEN_BOUND
        premises = _encode(pieces, [p[:text_cut] for p, _ in pairs])
        hypotheses = _encode(pieces, [h[:text_cut] for _, h in pairs])
        specials = joiner.num_special_tokens_to_add(is_pair=True)
        out = []
        for premise, hypothesis in zip(premises, hypotheses, strict=True):
            hypothesis.truncate(manifest.query_max_tokens)
            premise.truncate(max(1, manifest.max_tokens - specials - len(hypothesis.ids)))
            out.append(joiner.post_process(premise, hypothesis, add_special_tokens=True))
        return out

    def infer(self, batch: PairBatch, shared: bool = False) -> np.ndarray:
        """Core: the logits, float32 [n, 3] in the graph's label order.

        Raises BackendFailure when ONNX Runtime fails.
        """
        return self.logits(batch, shared)

    def postprocess(self, batch: PairBatch, raw: np.ndarray) -> list[LabelProbs]:
        """Post: softmax of each pair's logits, in NLI_LABELS order."""
        probs = softmax(raw)[:, self.label_order()]
        return [(float(e), float(n), float(c)) for e, n, c in probs.tolist()]

    def label_order(self) -> list[int]:
        """The graph's logit index of each of NLI_LABELS."""
        labels = self.manifest.labels
        return [labels.index(name) for name in NLI_LABELS]

    def probabilities(self, pairs: Sequence[Pair]) -> list[LabelProbs]:
        """The three steps in sequence (no batching engine)."""
        batch = self.tokenize(pairs)
        return self.postprocess(batch, self.infer(batch))


def softmax(logits: np.ndarray) -> np.ndarray:
    """Row-wise softmax in float64 (stable at large logits), float32 out."""
    x = np.asarray(logits, dtype=np.float64)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    out: np.ndarray = (e / e.sum(axis=-1, keepdims=True)).astype(np.float32)
    return out
