"""`nlp export RUN_OR_MODEL --out DIR [--quantize int8|int8-static] [--opset N]`: ONNX for onnxruntime."""

from __future__ import annotations

import argparse

EPILOG = """examples:
  nlp export runs/sentiment-reviews --out export/sentiment            # fp32 ONNX
  nlp export runs/sentiment-reviews --out export/sentiment-int8 --quantize int8
  nlp export e5-small-zh-sentiment --out export/e5-sentiment-int8 --quantize int8   # a hub name
  nlp export runs/sentiment-reviews --out export/sentiment-s8 --quantize int8-static   # calibrated on 300 dev texts
  nlp export runs/ner --out export/ner-s8 --quantize int8-static --calibration-size 500
  nlp export my_model/ --out export/s8 --quantize int8-static --calibration reviews-zh --calibration-split dev
  nlp export runs/x --out export/x-s8 --quantize int8-static --keep-fp32 embeddings,classifier,layernorm,softmax
  nlp export runs/ner/model --out export/ner --opset 20 --force       # replace an existing DIR
  nlp export runs/ner --out export/ner-portable --attention standard  # standard ONNX ops only (other runtimes)
  nlp predict export/sentiment-int8 --input reviews.txt               # then use it like a run
  nlp evaluate export/sentiment-int8 --data test    # the int8 model's accuracy on the run's test split

DIR gets model.onnx (weights inside; above 1 GiB of weights beside it in model.onnx.data),
config.json with the label names, the tokenizer files, decoding.safetensors for a head whose
decoding has learnt scores of its own, the run's recipe.yaml, and manifest.json (task, inputs/outputs, opset, precision, source,
sha256 of every file). The export is checked against PyTorch on real texts before DIR appears.
int8-static calibrates the activation scales on --calibration-size examples of --calibration
(default: the run's dev split) and scores the rest of that split, PyTorch beside int8 (the
figures go to the manifest). See docs/deploy.md and docs/compress.md.
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("export", help="export a fine-tuned model to ONNX (fp32 or int8)", epilog=EPILOG,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", metavar="RUN_OR_MODEL",
                   help="a run directory (train.output_dir), a model directory or a hub name (nlp hub ls)")
    p.add_argument("--out", required=True, metavar="DIR", help="the export directory to create")
    p.add_argument("--quantize", choices=["int8", "int8-static"], default=None,
                   help="int8: onnxruntime dynamic quantization (int8 weights); int8-static: calibrated "
                        "activation scales too (static quantization); default fp32")
    p.add_argument("--calibration", default="dev", metavar="DATA",
                   help="int8-static: the examples to calibrate on: a split of the run's own data (dev, the "
                        "default; test, train), a dataset name (with --calibration-split) or a labelled file")
    p.add_argument("--calibration-split", default="dev", metavar="SPLIT",
                   help="int8-static: the split of a --calibration dataset name (default: dev)")
    p.add_argument("--calibration-size", type=int, default=None, metavar="N",
                   help="int8-static: examples to calibrate on (default 300); the rest of the split is scored")
    p.add_argument("--keep-fp32", default=None, metavar="GROUPS",
                   help="int8: the node groups left in float, comma-separated, or none (quantize them all); "
                        "default classifier (int8) and classifier,layernorm,softmax (int8-static), as measured in "
                        "docs/compress.md; groups: embeddings, classifier, and for int8-static layernorm, softmax")
    p.add_argument("--opset", type=int, default=None, help="ONNX opset (default: the exporter's)")
    p.add_argument("--attention", choices=["fused", "standard"], default=None,
                   help="fused (default; standard for int8-static, which has no kernel for the fused node): each "
                        "layer's attention as one onnxruntime Attention node (QAttention in int8; runs on "
                        "onnxruntime only); standard: standard ONNX ops, for other runtimes")
    p.add_argument("--task", default=None, help="the task, when the model's config does not say")
    p.add_argument("--force", action="store_true", help="replace DIR if it exists (only once the new export passed)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import sys

    from nlp.commands._models import local_model
    from nlp.deploy import export_model
    from nlp.tasks import get_task

    from nlp._common import ConfigError

    model = local_model(args.model)  # a hub name: its snapshot; messages keep the name as given
    keep_fp32 = None
    if args.keep_fp32 is not None:  # checked before the calibration data is read
        from nlp.deploy.quantize import keep_fp32_groups

        given = () if args.keep_fp32.strip() == "none" else [g.strip() for g in args.keep_fp32.split(",") if g.strip()]
        if given == []:  # "" or ",": no group named, which is not "none" (quantize every group) said on purpose
            raise ConfigError(f"--keep-fp32 {args.keep_fp32!r} is empty: name the node groups to leave in float, "
                              "comma-separated (e.g. classifier,layernorm,softmax), write none to quantize every "
                              "group, or leave --keep-fp32 out for the measured default")
        try:
            keep_fp32 = keep_fp32_groups(args.quantize, given)
        except ValueError as err:
            raise ConfigError(str(err)) from None
    calibration = None
    if args.quantize == "int8-static":
        from nlp.train.calibration import DEFAULT_CALIBRATION_SIZE, calibration_split

        size = DEFAULT_CALIBRATION_SIZE if args.calibration_size is None else args.calibration_size
        print(f"reading {size} calibration examples from {args.calibration} ...", file=sys.stderr)
        calibration = calibration_split(model, args.calibration, split=args.calibration_split, size=size,
                                        task=args.task)
    elif args.calibration_size is not None or args.calibration != "dev" or args.calibration_split != "dev":
        raise ConfigError("--calibration, --calibration-split and --calibration-size are for --quantize int8-static "
                          f"only (got --quantize {args.quantize or 'none: fp32'})")
    print(f"exporting {args.model} -> {args.out} ...", file=sys.stderr)
    r = export_model(model, args.out, quantize=args.quantize, opset=args.opset, task=args.task,
                     force=args.force, attention=args.attention, calibration=calibration, keep_fp32=keep_fp32)
    fp32 = r.check["fp32"]
    print(f"exported {r.task} model ({r.precision}, opset {r.opset}) to {r.out} in {r.seconds:.0f} s")
    print(f"  check on {fp32['texts']} texts: fp32 max |ONNX - PyTorch| = {fp32['max_abs_diff']:.2e} (limit 1e-4)")
    if "int8" in r.check:
        q = r.check["int8"]
        kind = get_task(r.task).export_agreement
        if kind == "cosine":
            agreement = f"vectors' cosine with PyTorch >= {q['min_cosine']:.5f}"
        elif kind == "order":
            agreement = f"scores order the check texts' pairs as PyTorch does on {q['order_agreement']:.1%}"
        else:
            agreement = f"predicted labels agree with PyTorch on {q['label_agreement']:.1%}"
        print(f"  int8: {agreement} (max |diff| {q['max_abs_diff']:.3f}); model {r.model_bytes / 1e6:.1f} MB = "
              f"{r.model_bytes / r.fp32_bytes:.0%} of fp32 ({r.fp32_bytes / 1e6:.1f} MB)")
    else:
        print(f"  model {r.model_bytes / 1e6:.1f} MB")
    held = r.check.get("held_out")
    if held:
        ours = ", ".join(f"{k} {v:.4f}" for k, v in held["metrics"].items() if isinstance(v, float))
        ref = ", ".join(f"{k} {v:.4f}" for k, v in held["pytorch_metrics"].items() if isinstance(v, float))
        print(f"  calibrated on {calibration.source}")
        print(f"  on the {held['examples']} other examples ({held['data']}): labels agree with PyTorch on "
              f"{held['label_agreement']:.2%}; int8-static {ours}")
        print(f"    PyTorch fp32 {ref}")
    print(f"  use it: nlp predict {r.out} --input FILE;  nlp.pipeline({r.task!r}, model={str(r.out)!r})")
    return 0
