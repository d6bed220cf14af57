"""Cost models (`groundwire models build PROFILE --random-weights`): the real
architecture's layers and embedding table with random weights, marked in the manifest,
and refused by the services unless SERVE_COST_MODEL is set — a cost model measures what
the model costs and must never serve an answer. The full sizes take minutes and GBs to
build, so these tests build the same path at small widths (with the real vocabulary)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from groundwire_core.errors import InvalidInput
from groundwire_embedder.export.bge_m3 import build_bge_m3
from groundwire_embedder.export.cost_model import BGE_M3, EncoderShape
from groundwire_embedder.models import OnnxEncoder
from groundwire_embedder.models.manifest import ModelManifest
from groundwire_embedder.server import EmbedderService
from groundwire_embedder.settings import EmbedderSettings
from groundwire_reranker.export.cost_model import COST_SHAPES, CrossEncoderShape
from groundwire_reranker.export.cross_encoder import PROFILE_SPECS, build_cross_encoder
from groundwire_reranker.models.cross_encoder import OnnxCrossEncoder
from groundwire_reranker.models.manifest import CrossEncoderManifest
from groundwire_reranker.models.nli import OnnxNliModel

SMALL_M3 = EncoderShape(
    hidden_size=64, layers=2, heads=4, intermediate_size=128, vocab_size=250_002, max_tokens=512
)


def test_the_full_shapes_are_the_real_models() -> None:
    assert (BGE_M3.hidden_size, BGE_M3.layers, BGE_M3.heads) == (1024, 24, 16)
    assert BGE_M3.vocab_size == 250_002
    reranker = COST_SHAPES["bge-reranker-v2-m3"]
    assert (reranker.architecture, reranker.hidden_size, reranker.layers) == (
        "xlm-roberta",
        1024,
        24,
    )


@pytest.fixture(scope="module")
def m3_cost_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("cost") / "bge-m3"
    build_bge_m3(out, int8=True, random_weights=True, cost_shape=SMALL_M3, log=lambda _: None)
    return out


def test_a_bge_m3_cost_model_is_marked_and_refused_unless_asked(m3_cost_model: Path) -> None:
    manifest = ModelManifest.load(m3_cost_model)
    assert manifest.cost_model and manifest.quantized
    assert manifest.model_id.startswith("cost-model:")
    assert manifest.outputs == ("dense", "sparse", "multi_vector")
    with pytest.raises(InvalidInput, match="cost model"):
        OnnxEncoder(m3_cost_model).load()
    served = OnnxEncoder(m3_cost_model, serve_cost_model=True)
    served.load()
    out = served.encode(["how long do noodles boil", "a second text"])
    assert out.dense.shape == (2, 64)
    assert np.isfinite(out.dense).all()


async def test_the_embedder_service_refuses_a_cost_model_without_the_setting(
    m3_cost_model: Path,
) -> None:
    refused = EmbedderService(EmbedderSettings(port=0, model_dir=m3_cost_model))
    with pytest.raises(InvalidInput, match="SERVE_COST_MODEL"):
        await refused.start()
    await refused.stop()
    served = EmbedderService(
        EmbedderSettings(port=0, model_dir=m3_cost_model, serve_cost_model=True)
    )
    await served.start()
    await served.stop()


@pytest.mark.parametrize(
    ("profile", "shape"),
    [
        ("bge-reranker-v2-m3", CrossEncoderShape("xlm-roberta", 64, 2, 4, 128, 250_002, 514)),
        ("nli", CrossEncoderShape("deberta-v2", 64, 2, 4, 128, 128_100, 512)),
    ],
)
def test_a_cross_encoder_cost_model_is_marked_and_refused_unless_asked(
    profile: str, shape: CrossEncoderShape, tmp_path: Path
) -> None:
    spec = PROFILE_SPECS[profile]
    out = tmp_path / profile
    build_cross_encoder(
        spec, out, random_weights=True, cost_shape=shape, log=lambda _: None
    )
    manifest = CrossEncoderManifest.load(out)
    assert manifest.cost_model and manifest.model_id == f"cost-model:{spec.hub_id}"
    model_class = OnnxNliModel if spec.nli else OnnxCrossEncoder
    with pytest.raises(InvalidInput, match="cost model"):
        model_class(out).load()
    served = model_class(out, serve_cost_model=True)
    served.load()
    logits = served.logits(served.tokenize([("a query", "a passage about the query")]))
    assert logits.shape == (1, 3 if spec.nli else 1)
