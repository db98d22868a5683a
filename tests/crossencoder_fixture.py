"""A tiny ONNX cross-encoder with predictable logits, built with the ``onnx`` package.

``build_tiny_cross_encoder(folder)`` writes ``model.onnx`` plus the bundled MiniLM tokenizer
files into ``folder``, which ``memvault.store.models.get_reranker(str(folder))`` (fastembed's
TextCrossEncoder) loads as a local model folder.

Logit formula, for one (query, document) pair::

    logit = SCALE * overlap + BIAS          # SCALE = 2.0, BIAS = -1.0

where ``overlap`` is the number of query wordpieces whose token id also occurs at least once
among the document's wordpieces. Details:

- wordpieces come from the bundled all-MiniLM-L6-v2 tokenizer (BERT uncased: lowercased,
  punctuation split off, e.g. "wife's" -> "wife", "'", "s"), as fastembed encodes the pair
  ``[CLS] query [SEP] document [SEP]``, truncated to 256 tokens (longest side first);
- special tokens ([CLS], [SEP], [PAD], [UNK], [MASK]; all ids below 999) never count;
- every query position counts, so a query word repeated twice that occurs in the document
  adds 2; repeats in the document do not add anything;
- no overlap gives -1.0, each shared query wordpiece adds 2.0.

Example: query "What is my wife's name?" and document "The user's wife is named Anne"
share "is", "wife", "'", "s" ("name" != "named"): overlap 4, logit 7.0.
``expected_logit`` computes the same number in Python.
"""

from __future__ import annotations

import shutil
from importlib import resources
from pathlib import Path

SCALE = 2.0
BIAS = -1.0
FIRST_REAL_TOKEN_ID = 999  # in the BERT uncased vocabulary, ids below are special or unused

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "config.json")


def _tokenizer_dir() -> Path:
    return Path(str(resources.files("memvault") / "data" / "minilm-tokenizer"))


def build_tiny_cross_encoder(folder: Path) -> Path:
    """Write model.onnx and the tokenizer files into ``folder``; return ``folder``."""
    import onnx
    from onnx import TensorProto, helper

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for name in TOKENIZER_FILES:
        shutil.copyfile(_tokenizer_dir() / name, folder / name)

    def const(name: str, value, dtype) -> onnx.NodeProto:
        return helper.make_node(
            "Constant", [], [name], value=helper.make_tensor(name, dtype, [], [value])
        )

    def ints(name: str, values: list[int]) -> onnx.NodeProto:
        return helper.make_node(
            "Constant", [], [name], value=helper.make_tensor(name, TensorProto.INT64, [len(values)], values)
        )

    node = helper.make_node
    nodes = [
        const("last_special_id", FIRST_REAL_TOKEN_ID - 1, TensorProto.INT64),
        const("zero", 0, TensorProto.INT64),
        const("scale", SCALE, TensorProto.FLOAT),
        const("bias", BIAS, TensorProto.FLOAT),
        ints("axis1", [1]),
        ints("axis2", [2]),
        # real[b, i]: a non-special, non-padding token
        node("Greater", ["input_ids", "last_special_id"], ["not_special"]),
        node("Cast", ["attention_mask"], ["attended"], to=TensorProto.BOOL),
        node("And", ["not_special", "attended"], ["real"]),
        # segment A (token_type 0) is the query, segment B (token_type 1) the document
        node("Equal", ["token_type_ids", "zero"], ["in_query"]),
        node("Not", ["in_query"], ["in_doc"]),
        node("And", ["real", "in_query"], ["query_tok"]),
        node("And", ["real", "in_doc"], ["doc_tok"]),
        # same[b, i, j] = ids[b, i] == ids[b, j]; keep only j in the document
        node("Unsqueeze", ["input_ids", "axis2"], ["ids_i"]),
        node("Unsqueeze", ["input_ids", "axis1"], ["ids_j"]),
        node("Equal", ["ids_i", "ids_j"], ["same"]),
        node("Unsqueeze", ["doc_tok", "axis1"], ["doc_j"]),
        node("And", ["same", "doc_j"], ["hit"]),
        node("Cast", ["hit"], ["hit_f"], to=TensorProto.FLOAT),
        node("ReduceMax", ["hit_f"], ["found"], axes=[2], keepdims=0),
        # overlap[b] = sum over query positions i of found[b, i]
        node("Cast", ["query_tok"], ["query_f"], to=TensorProto.FLOAT),
        node("Mul", ["found", "query_f"], ["matched"]),
        node("ReduceSum", ["matched", "axis1"], ["overlap"], keepdims=1),
        node("Mul", ["overlap", "scale"], ["scaled"]),
        node("Add", ["scaled", "bias"], ["logits"]),
    ]
    inputs = [
        helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "sequence"])
        for name in ("input_ids", "attention_mask", "token_type_ids")
    ]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 1])]
    graph = helper.make_graph(nodes, "tiny_cross_encoder", inputs, outputs)
    # opset 17: ReduceMax still takes axes as an attribute; ir 8 loads in any recent onnxruntime
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(folder / "model.onnx"))
    return folder


def expected_logit(query: str, document: str) -> float:
    """The logit the tiny model gives (query, document), computed in Python."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(_tokenizer_dir() / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=256)
    enc = tokenizer.encode(query, document)
    real = [(i, t) for i, t in zip(enc.ids, enc.type_ids) if i >= FIRST_REAL_TOKEN_ID]
    doc_ids = {i for i, t in real if t == 1}
    overlap = sum(1 for i, t in real if t == 0 and i in doc_ids)
    return SCALE * overlap + BIAS
