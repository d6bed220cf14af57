"""Tiny, randomly initialised checkpoints of real architectures, for tests and benchmarks.

No BGE weights can be downloaded here, so the BGE-M3 code paths are exercised with an
XLM-RoBERTa of a few layers carrying BGE-M3's ColBERT and sparse heads, saved in
FlagEmbedding's file layout, with a SentencePiece-style (Unigram) tokenizer trained on our
own sentences and saved the way transformers' ``XLMRobertaTokenizer`` reads it. FlagEmbedding's
``BGEM3FlagModel(path)`` loads the folder like the real one. Random weights prove
mechanics (export, serving, post-processing), never quality.
"""

from __future__ import annotations

import json
from pathlib import Path

from groundwire_embedder.export.sample_text import SAMPLE_SENTENCES, generate_sentences

# XLM-R's special tokens and ids: <s>=0, <pad>=1, </s>=2, <unk>=3; <mask> is the last id.
SPECIAL_TOKENS = ("<s>", "<pad>", "</s>", "<unk>")
MASK_TOKEN = "<mask>"


def build_tiny_bge_m3(
    out_dir: Path,
    *,
    seed: int = 0,
    hidden_size: int = 32,
    layers: int = 2,
    heads: int = 4,
    colbert_dim: int | None = None,
    vocab_size: int = 600,
    max_tokens: int = 512,
    intermediate_size: int | None = None,
    model_vocab_size: int | None = None,
) -> Path:
    """Write a random BGE-M3-shaped checkpoint into ``out_dir`` (created); returns it.

    ``vocab_size`` is the trained tokenizer's; ``model_vocab_size`` (at least that)
    sizes the embedding table, so a cost model carries the real model's 250,002 rows
    while its tokenizer only emits ids below ``vocab_size``. Needs the export extra
    (torch, transformers).
    """
    import torch
    from transformers import XLMRobertaConfig, XLMRobertaModel

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer_size = _write_tokenizer(out, seed=seed, vocab_size=vocab_size, max_tokens=max_tokens)

    torch.manual_seed(seed)
    config = XLMRobertaConfig(
        vocab_size=max(tokenizer_size, model_vocab_size or 0),
        hidden_size=hidden_size,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=intermediate_size or hidden_size * 2,
        max_position_embeddings=max_tokens + 2,  # positions start after the padding id
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
        type_vocab_size=1,
    )
    model = XLMRobertaModel(config)
    model.save_pretrained(str(out))
    colbert = torch.nn.Linear(hidden_size, colbert_dim or hidden_size)
    sparse = torch.nn.Linear(hidden_size, 1)
    torch.save(colbert.state_dict(), out / "colbert_linear.pt")
    torch.save(sparse.state_dict(), out / "sparse_linear.pt")
    (out / "README.md").write_text(
        "Randomly initialised XLM-RoBERTa with BGE-M3's heads, built by "
        "groundwire_embedder.export.tiny for tests and benchmarks. Not a real model.\n",
        encoding="utf-8",
    )
    return out


def _write_tokenizer(out: Path, *, seed: int, vocab_size: int, max_tokens: int) -> int:
    """Train a Unigram tokenizer shaped like XLM-R's; returns its vocabulary size."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.Unigram())
    # The same pipeline transformers' XLMRobertaTokenizer builds, so both tokenize alike.
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.WhitespaceSplit(),
            pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always"),
        ]
    )
    tokenizer.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always")
    trainer = trainers.UnigramTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        unk_token="<unk>",
        show_progress=False,
    )
    corpus = [*SAMPLE_SENTENCES, *generate_sentences(2000, seed=seed)]
    tokenizer.train_from_iterator(corpus, trainer)
    tokenizer.add_special_tokens([MASK_TOKEN])
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>",
        pair="<s> $A </s> </s> $B </s>",
        special_tokens=[("<s>", 0), ("</s>", 2)],
    )
    tokenizer.save(str(out / "tokenizer.json"))
    special = {
        "bos_token": "<s>",
        "eos_token": "</s>",
        "sep_token": "</s>",
        "cls_token": "<s>",
        "unk_token": "<unk>",
        "pad_token": "<pad>",
        "mask_token": MASK_TOKEN,
    }
    config = {"tokenizer_class": "XLMRobertaTokenizer", "model_max_length": max_tokens, **special}
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    (out / "special_tokens_map.json").write_text(json.dumps(special, indent=2), encoding="utf-8")
    size: int = tokenizer.get_vocab_size()
    return size
