"""BGE-M3's sparse post-processing in numpy against FlagEmbedding's per-token loop."""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from groundwire_embedder.models.onnx_backend import EncodedBatch, lexical_weights

SPECIAL = (0, 1, 2, 3)  # <s>, <pad>, </s>, <unk>


def _flag_embedding(token_weights: np.ndarray, input_ids: list[int]) -> dict[int, float]:
    """FlagEmbedding 1.4.2's ``_process_token_weights`` (M3Embedder.encode_single_device)."""
    result: dict[str, float] = defaultdict(int)
    for w, idx in zip(token_weights, input_ids, strict=True):
        if idx not in SPECIAL and w > 0:
            key = str(idx)
            if w > result[key]:
                result[key] = w
    return {int(k): float(v) for k, v in result.items()}


def _batch(rows: list[list[int]]) -> EncodedBatch:
    length = max(len(r) for r in rows)
    ids = np.full((len(rows), length), 1, dtype=np.int64)  # <pad>
    mask = np.zeros_like(ids)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = row
        mask[i, : len(row)] = 1
    return EncodedBatch(ids, mask, np.zeros_like(ids), [len(r) for r in rows])


def test_matches_flag_embedding_on_random_batches() -> None:
    rng = np.random.default_rng(0)
    for _ in range(20):
        rows = [
            [0, *rng.integers(3, 40, size=int(rng.integers(0, 30))).tolist(), 2]
            for _ in range(int(rng.integers(1, 6)))
        ]
        batch = _batch(rows)
        weights = rng.normal(size=batch.input_ids.shape).astype(np.float32)
        ours = lexical_weights(batch, weights, np.asarray(SPECIAL))
        assert len(ours) == len(rows)
        for i, row in enumerate(rows):
            # FlagEmbedding walks the padded row: padding is <pad>, which it drops too
            expected = _flag_embedding(weights[i], batch.input_ids[i].tolist())
            assert ours[i].as_dict() == expected
            assert ours[i].indices.dtype == np.int64 and ours[i].values.dtype == np.float32
            assert list(ours[i].indices) == sorted(set(ours[i].indices.tolist()))
            assert len(row) >= len(ours[i].indices)


def test_repeated_token_keeps_its_highest_weight_and_specials_are_dropped() -> None:
    batch = _batch([[0, 7, 9, 7, 3, 7, 2]])
    weights = np.array([[5.0, 0.2, 0.0, 0.9, 4.0, 0.4, 6.0]], dtype=np.float32)
    (row,) = lexical_weights(batch, weights, np.asarray(SPECIAL))
    assert row.as_dict() == {7: np.float32(0.9)}  # 9 has weight 0; <s>, <unk>, </s> dropped


def test_padding_never_counts_even_without_ignored_ids() -> None:
    batch = _batch([[5, 6, 7], [5]])
    weights = np.ones(batch.input_ids.shape, dtype=np.float32)
    rows = lexical_weights(batch, weights, np.zeros(0, dtype=np.int64))
    assert rows[0].as_dict() == {5: 1.0, 6: 1.0, 7: 1.0}
    assert rows[1].as_dict() == {5: 1.0}  # the <pad> (id 1) positions are masked out


def test_a_text_of_only_special_tokens_has_no_weights() -> None:
    batch = _batch([[0, 2]])
    (row,) = lexical_weights(batch, np.ones((1, 2), dtype=np.float32), np.asarray(SPECIAL))
    assert row.indices.size == 0 and row.values.size == 0 and row.as_dict() == {}
