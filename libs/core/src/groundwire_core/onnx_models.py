"""ONNX export, int8 quantization and Runtime sessions, as the embedder and the reranker
use them.

Both builds trace and quantize with the same recipe, and both services (and the
benchmarks' bare baselines) open their graphs with the same options; this keeps them
from drifting. onnxruntime (and torch, for the export) are imported here and not
declared by groundwire-core: only the model services and their build tooling import
this module, and they depend on them.
"""

from __future__ import annotations

import logging
import shutil
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from groundwire_core.errors import InvalidInput, NotFound

if TYPE_CHECKING:
    import onnxruntime as ort
    from tokenizers import Tokenizer


def model_files(model_dir: Path, *names: str, profile: str) -> list[Path]:
    """The paths of ``names`` in a built model folder; NotFound, with the command that
    rebuilds it (``profile`` is the model's build profile), when one is missing."""
    paths = [Path(model_dir) / name for name in names]
    for path in paths:
        if not path.is_file():
            raise NotFound(
                f"model directory {model_dir} is incomplete: {path.name} is "
                f"missing; rebuild it with `groundwire models build {profile}`"
            )
    return paths


def load_tokenizer(path: Path) -> Tokenizer:
    """A ``tokenizers`` tokenizer from its JSON file; InvalidInput when it does not load."""
    from tokenizers import Tokenizer

    try:
        return Tokenizer.from_file(str(path))
    except Exception as exc:  # tokenizers raises a bare Exception
        raise InvalidInput(f"{path} is not a loadable tokenizer ({type(exc).__name__})") from exc


def session_options(
    *, intra_op_threads: int = 0, inter_op_threads: int = 1, allow_spinning: bool = True
) -> ort.SessionOptions:
    """Every graph optimisation on, operators run one after another, and the thread
    counts given (0: ONNX Runtime's choice, one per core)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.intra_op_num_threads = max(0, int(intra_op_threads))
    options.inter_op_num_threads = max(0, int(inter_op_threads))
    # Spinning intra-op threads wake faster between operators (about 2 ms off a single
    # MiniLM query on 2 cores) but keep a core busy for a moment after each run.
    spin = "1" if allow_spinning else "0"
    options.add_session_config_entry("session.intra_op.allow_spinning", spin)
    options.add_session_config_entry("session.inter_op.allow_spinning", spin)
    return options


def open_sessions(
    onnx_path: Path,
    *,
    intra_op_threads: int,
    inter_op_threads: int,
    allow_spinning: bool,
    lanes: int,
    profile: str,
) -> tuple[ort.InferenceSession, ort.InferenceSession | None]:
    """The *alone* session (``intra_op_threads``), for a run that has the cores to
    itself, and with ``lanes`` > 1 a *shared* one with a single intra-op thread, for
    runs that go side by side on one core each.

    Why two (benchmarks/embedder_lanes.py, MiniLM on 2 cores): two one-thread runs side
    by side got through 1.05-1.18x the texts of one two-thread run at a time on the
    bare session, while one two-thread session called from two threads lost 13-20 %
    (its one thread pool is fought over); a lone 16-token fp32 query took 5.9 ms on one
    thread against 3.9 on two. In the service, where tokenizing, pooling and gRPC also
    need a core, the lanes took 32 clients from 180 to 214 texts/s (fp32, short texts)
    and from 355 to 515 (int8). The shared session costs a second copy of the weights.
    """
    alone = open_session(
        onnx_path,
        session_options(
            intra_op_threads=intra_op_threads,
            inter_op_threads=inter_op_threads,
            allow_spinning=allow_spinning,
        ),
        profile=profile,
    )
    if lanes <= 1:
        return alone, None
    # ORT runs a one-thread session on the calling thread, so concurrent run() calls on
    # it never wait for each other: one session serves every lane
    shared = open_session(
        onnx_path,
        session_options(intra_op_threads=1, inter_op_threads=1, allow_spinning=allow_spinning),
        profile=profile,
    )
    return alone, shared


def open_session(
    onnx_path: Path, options: ort.SessionOptions, *, profile: str
) -> ort.InferenceSession:
    """A CPU session on ``onnx_path``; a graph ONNX Runtime cannot load is InvalidInput,
    with the command that rebuilds it (``profile`` is the model's build profile)."""
    import onnxruntime as ort

    try:
        return ort.InferenceSession(
            str(onnx_path), sess_options=options, providers=["CPUExecutionProvider"]
        )
    except Exception as exc:  # ORT raises its own exception types
        raise InvalidInput(
            f"{onnx_path} is not a loadable ONNX model ({type(exc).__name__}); "
            f"rebuild it with `groundwire models build {profile}`"
        ) from exc


def export_traced(
    wrapper: Any,
    args: tuple[Any, ...],
    path: Path,
    *,
    input_names: Sequence[str],
    output_names: Sequence[str],
    dynamic_axes: Mapping[str, Mapping[int, str]],
    opset: int = 17,
) -> None:
    """Trace the torch module ``wrapper`` on ``args`` to an ONNX graph at ``path``.

    The TorchScript exporter (``dynamo=False``): the dynamo one needs onnxscript and its
    graphs ran slower in ONNX Runtime here. ``args`` must contain padding (and, for
    pairs, a second segment) so that traced mask code is not specialised to an all-ones
    mask. The wrapper is put in eval mode first: the exporter restores the training flag
    it finds, recursively, and a fresh Module is in training mode (dropout).
    """
    import torch

    wrapper.eval()
    with torch.no_grad(), warnings.catch_warnings():
        # the legacy exporter warns that it is deprecated; tracing warns about
        # Python-level branches on shapes and about index ops it exports as they are
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", FutureWarning)
        warnings.simplefilter("ignore", torch.jit.TracerWarning)  # type: ignore[attr-defined]
        warnings.simplefilter("ignore", UserWarning)
        torch.onnx.export(
            wrapper,
            args,
            str(path),
            input_names=list(input_names),
            output_names=list(output_names),
            dynamic_axes={name: dict(axes) for name, axes in dynamic_axes.items()},
            opset_version=opset,
            do_constant_folding=True,
            dynamo=False,
        )
    wrapper.eval()  # as it was traced, whatever the exporter restored


# onnxruntime's quantizer logs this on the root logger for every call; the models it
# would pre-process (shape inference, graph optimisation) gain nothing measurable here.
_NOISE = "consider to run pre-processing before quantization"


class _DropPreprocessHint(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return _NOISE not in record.getMessage()


@contextmanager
def _quiet_quantizer() -> Iterator[None]:
    root = logging.getLogger()
    hint = _DropPreprocessHint()
    root.addFilter(hint)
    try:
        yield
    finally:
        root.removeFilter(hint)


def external_data_file(onnx_path: Path) -> Path:
    """Where a graph written by Groundwire keeps its weights when they are external."""
    return onnx_path.with_name(onnx_path.name + ".data")


def save_onnx(
    source: Path,
    target: Path,
    *,
    external_data: bool | None = None,
    external_data_bytes: int = 1_500_000_000,
) -> int:
    """Re-save the graph at ``source`` as ``target``; returns the weights' size in bytes.

    Weights go to one external file (``external_data_file(target)``) when
    ``external_data`` is True, or when it is None and they exceed ``external_data_bytes``
    (a protobuf file cannot exceed 2 GiB: XLM-RoBERTa large in fp32 is ~2.2 GB). The
    exporter scatters large models over one file per tensor; this gathers them.
    """
    import onnx

    model = onnx.load(str(source))  # pulls in external tensors from source's folder
    size = sum(len(t.raw_data) for t in model.graph.initializer)
    use_external = external_data if external_data is not None else size > external_data_bytes
    if use_external:
        onnx.save_model(
            model,
            str(target),
            save_as_external_data=True,
            all_tensors_to_one_file=True,
            location=external_data_file(Path(target)).name,
            size_threshold=1024,
        )
    else:
        onnx.save_model(model, str(target))
    return size


def quantize_in_place(graph: Path, scratch: Path) -> None:
    """Replaces the fp32 graph at ``graph`` by its int8 version (``quantize_int8``); the
    fp32 graph, with its external weights if any, moves to ``scratch`` first."""
    data = external_data_file(graph)
    fp32_dir = Path(scratch) / "fp32"
    fp32_dir.mkdir(parents=True, exist_ok=True)
    fp32_graph = fp32_dir / graph.name
    shutil.move(graph, fp32_graph)
    external = data.is_file()
    if external:
        shutil.move(data, external_data_file(fp32_graph))
    quantize_int8(fp32_graph, graph, external_data=external)


def quantize_int8(fp32_model: Path, int8_model: Path, *, external_data: bool = False) -> None:
    """Write a dynamically quantized copy: int8 weights, per channel, MatMul only.

    Plain ``quantize_dynamic(QInt8)`` loses too much on MiniLM-class encoders (cosine
    to fp32: mean 0.94, min 0.90, measured here); per-channel weights on the MatMuls only
    keep the mean near 0.995 and run ~1.8-2x faster (see ../shared/ENVIRONMENT.md), so
    that is the one recipe used. With ``external_data`` the weights go to
    ``<int8_model>.data`` beside the graph.
    """
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with _quiet_quantizer():
        quantize_dynamic(
            Path(fp32_model),
            Path(int8_model),
            op_types_to_quantize=["MatMul"],
            per_channel=True,
            weight_type=QuantType.QInt8,
            use_external_data_format=external_data,
        )
