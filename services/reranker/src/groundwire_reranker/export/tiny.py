"""Tiny, randomly initialised cross-encoders of the real architectures, for mechanics checks.

No cross-encoder weights can be downloaded where Groundwire's CI runs, so the parity
tests and the benchmark build these instead: an ``XLMRobertaForSequenceClassification``
(bge-reranker-v2-m3's architecture), a ``BertForSequenceClassification`` (the ms-marco
cross-encoders') or a ``DebertaV2ForSequenceClassification`` (the DeBERTa-v3 NLI
cross-encoders'), one label (three, named by ``id2label``, for NLI), two layers, with a
tokenizer trained on the caller's sentences and saved as a transformers fast tokenizer
(XLM-R's ``<s> <pad> </s> <unk> <mask>`` ids 0-4; BERT's WordPiece with ``[PAD]`` 0;
DeBERTa-v3's ``[PAD] [CLS] [SEP] [UNK]`` ids 0-3 over a Unigram vocabulary).
transformers and FlagEmbedding load the folder like a hub checkpoint. A random model
proves mechanics (tokenization, truncation, export, serving, score order), never quality.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

Architecture = Literal["xlm-roberta", "bert", "deberta-v2"]
ARCHITECTURES: tuple[Architecture, ...] = ("xlm-roberta", "bert", "deberta-v2")

MAX_TOKENS = 128
VOCAB_SIZE = 1000


def tiny_checkpoint(
    architecture: Architecture,
    out_dir: Path,
    sentences: Sequence[str],
    *,
    seed: int = 0,
    hidden_size: int = 32,
    initializer_range: float = 0.2,
    id2label: Sequence[str] = (),
    layers: int = 2,
    heads: int = 2,
    intermediate_size: int | None = None,
    model_vocab_size: int = 0,
    max_tokens: int = MAX_TOKENS,
) -> Path:
    """Write a random ``*ForSequenceClassification`` and its tokenizer to ``out_dir``.

    One label, or ``id2label``'s labels in that order (e.g. an NLI head's three). The
    defaults are tiny; a cost model passes the real sizes (``cost_model``), with
    ``model_vocab_size`` rows in the embedding table however few pieces the trained
    tokenizer has.

    ``initializer_range`` is larger than the usual 0.02 so the random logits spread out
    and the score order is decided by the model, not by float rounding.
    Raises ValueError for an unknown architecture or no sentences.
    """
    import torch
    from transformers.utils import logging as hf_logging

    if architecture not in ARCHITECTURES:
        raise ValueError(f"architecture must be one of {ARCHITECTURES}, not {architecture!r}")
    if not sentences:
        raise ValueError("the tokenizer needs sentences to train on")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    build = {"xlm-roberta": _xlm_roberta, "bert": _bert, "deberta-v2": _deberta_v2}[architecture]
    shape: dict[str, Any] = {
        "hidden_size": hidden_size,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "intermediate_size": intermediate_size or hidden_size * 2,
        "num_labels": len(id2label) or 1,
        "initializer_range": initializer_range,
    }
    if id2label:
        shape["id2label"] = dict(enumerate(id2label))
        shape["label2id"] = {label: i for i, label in enumerate(id2label)}
    torch.manual_seed(seed)
    hf_tokenizer, model = build(sentences, shape, _Sizes(model_vocab_size, max_tokens))
    model.eval()
    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call,unused-ignore]
    hf_tokenizer.save_pretrained(str(out_dir))
    model.save_pretrained(str(out_dir))
    return out_dir


@dataclass(frozen=True)
class _Sizes:
    vocab: int  # embedding rows (at least the tokenizer's pieces)
    max_tokens: int


def _xlm_roberta(sentences: Sequence[str], shape: dict[str, Any], sizes: _Sizes) -> tuple[Any, Any]:
    """XLM-R's special tokens at XLM-R's ids, a Unigram vocabulary, its pair template."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from tokenizers.trainers import UnigramTrainer
    from transformers import (
        XLMRobertaConfig,
        XLMRobertaForSequenceClassification,
        XLMRobertaTokenizer,
    )

    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]  # ids 0..4, as in XLM-R
    tok = Tokenizer(models.Unigram())
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    tok.train_from_iterator(
        sentences,
        UnigramTrainer(
            vocab_size=VOCAB_SIZE,
            special_tokens=specials,
            unk_token="<unk>",
            show_progress=False,
        ),
    )
    tok.post_processor = processors.RobertaProcessing(
        ("</s>", _id(tok, "</s>")), ("<s>", _id(tok, "<s>")), trim_offsets=False
    )
    hf_tokenizer = XLMRobertaTokenizer(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        sep_token="</s>",
        cls_token="<s>",
        unk_token="<unk>",
        pad_token="<pad>",
        mask_token="<mask>",
        model_max_length=sizes.max_tokens,
    )
    config = XLMRobertaConfig(
        vocab_size=max(tok.get_vocab_size(), sizes.vocab),
        max_position_embeddings=sizes.max_tokens + 2,  # positions start after <pad>
        type_vocab_size=1,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
        **shape,
    )
    return hf_tokenizer, XLMRobertaForSequenceClassification(config)


def _bert(sentences: Sequence[str], shape: dict[str, Any], sizes: _Sizes) -> tuple[Any, Any]:
    """A lower-casing WordPiece vocabulary with BERT's specials and segment ids."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from tokenizers.trainers import WordPieceTrainer
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizer

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    trainer = WordPieceTrainer(vocab_size=VOCAB_SIZE, special_tokens=specials, show_progress=False)
    tok.train_from_iterator(sentences, trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", _id(tok, "[CLS]")), ("[SEP]", _id(tok, "[SEP]"))],
    )
    hf_tokenizer = BertTokenizer(
        tokenizer_object=tok,
        unk_token="[UNK]",
        sep_token="[SEP]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        mask_token="[MASK]",
        model_max_length=sizes.max_tokens,
    )
    config = BertConfig(
        vocab_size=max(tok.get_vocab_size(), sizes.vocab),
        max_position_embeddings=sizes.max_tokens,
        type_vocab_size=2,
        pad_token_id=0,
        **shape,
    )
    return hf_tokenizer, BertForSequenceClassification(config)


def _deberta_v2(sentences: Sequence[str], shape: dict[str, Any], sizes: _Sizes) -> tuple[Any, Any]:
    """DeBERTa-v3's specials at its ids, a Unigram vocabulary, BERT's pair template;
    relative attention with position buckets, as the v3 checkpoints configure it."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from tokenizers.trainers import UnigramTrainer
    from transformers import (
        DebertaV2Config,
        DebertaV2ForSequenceClassification,
        DebertaV2Tokenizer,
    )

    specials = ["[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]"]
    tok = Tokenizer(models.Unigram())
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    tok.train_from_iterator(
        sentences,
        UnigramTrainer(
            vocab_size=VOCAB_SIZE, special_tokens=specials, unk_token="[UNK]", show_progress=False
        ),
    )
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", _id(tok, "[CLS]")), ("[SEP]", _id(tok, "[SEP]"))],
    )
    hf_tokenizer = DebertaV2Tokenizer(
        tokenizer_object=tok,
        bos_token="[CLS]",
        eos_token="[SEP]",
        unk_token="[UNK]",
        sep_token="[SEP]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        mask_token="[MASK]",
        model_max_length=sizes.max_tokens,
    )
    # The v3 checkpoints' attention settings; the model reads the last three from its
    # config by name, which DebertaV2Config keeps without declaring them.
    v3: dict[str, Any] = {
        "relative_attention": True,
        "max_relative_positions": -1,
        "pos_att_type": ["p2c", "c2p"],
        "position_biased_input": False,
        "position_buckets": 32,
        "norm_rel_ebd": "layer_norm",
        "share_att_key": True,
    }
    config = DebertaV2Config(
        vocab_size=max(tok.get_vocab_size(), sizes.vocab),
        max_position_embeddings=sizes.max_tokens,
        type_vocab_size=0,
        pad_token_id=0,
        **v3,
        **shape,
    )
    return hf_tokenizer, DebertaV2ForSequenceClassification(config)


def _id(tokenizer: Any, token: str) -> int:
    token_id = tokenizer.token_to_id(token)
    if token_id is None:
        raise ValueError(f"the trained vocabulary lacks {token}")
    return int(token_id)
