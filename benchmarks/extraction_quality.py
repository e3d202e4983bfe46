"""Information extraction quality beside the NER model, on the same held-out sentences.

    python benchmarks/extraction_quality.py --uie RUN_OR_MODEL                 # 500 sentences a dataset
    python benchmarks/extraction_quality.py --uie RUN --sentences 2000 --ner ernie-tiny-zh-ner
    python benchmarks/extraction_quality.py --quick                            # a random toy model: runs end to end

Three tables, every score a span F1 (a predicted span counts when its type, start and end are a
gold span's; the same code, nlp/tasks/extraction/metrics.py, for every model):
  1. per type on zh-ner-uie's test split (msra-ner + peoples-daily-1998-ner test sentences, the
     first N in its fixed shuffle): the UIE model asked 人物 / 地点 / 组织机构, beside the NER model
     (`--ner`, default the shipped ernie-tiny-zh-ner: its PER / LOC / ORG entities as those types);
  2. the same sentences asked under the synonyms users type (人名, 地名, 机构): a prompt model lives
     or dies by the names it is given;
  3. 时间 on peoples-daily-1998-uie's test split (the first N sentences), a type zh-ner-uie never
     trains: a zero-shot figure for a model trained on zh-ner-uie (recipes/uie-zh-ner.yaml); the NER
     model has no such type.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
NER_TYPES = {"PER": "人物", "LOC": "地点", "ORG": "组织机构"}
SYNONYMS = {"人物": "人名", "地点": "地名", "组织机构": "机构"}


def sentences(dataset: str, n: int) -> list[tuple[str, dict[str, list[tuple[int, int]]]]]:
    """The first `n` test sentences of a built-in UIE dataset, with their gold spans by type."""
    from nlp.tasks import datasets as nds

    test = nds.load(dataset, "test")
    out: dict[str, dict] = {}
    for row in test:
        sid = row["id"].rpartition("/")[0]
        if sid not in out:
            if len(out) == n:
                break
            out[sid] = {"text": row["text"], "spans": {}}
        out[sid]["spans"][row["type"]] = [(x["start"], x["end"]) for x in row["result_list"]]
    return [(v["text"], v["spans"]) for v in out.values()]


def score(found: list[dict[str, list[tuple[int, int]]]], gold: list[dict[str, list[tuple[int, int]]]],
          types: list[str]) -> dict[str, float]:
    from nlp.tasks.extraction.metrics import span_f1

    pred, ref, kinds = [], [], []
    for f, g in zip(found, gold):
        for t in types:
            pred.append(f.get(t, []))
            ref.append(g.get(t, []))
            kinds.append(t)
    return span_f1(pred, ref, kinds)


def run_uie(model: str, texts: list[str], names: dict[str, str], batch_size: int,
            position_prob: float = 0.5) -> list[dict]:
    """Spans by (canonical) type, the model asked each type under `names[type]`."""
    import nlp

    ie = nlp.pipeline("information-extraction", model=model, batch_size=batch_size, position_prob=position_prob)
    back = {asked: t for t, asked in names.items()}
    out = ie(texts, schema=list(names.values()))
    return [{back[k]: [(s["start"], s["end"]) for s in v] for k, v in r.items()} for r in out]


def run_ner(model: str, texts: list[str], batch_size: int) -> list[dict]:
    import nlp

    ner = nlp.pipeline("token-classification", model=model, batch_size=batch_size)
    out = []
    for ents in ner(texts):
        spans: dict[str, list] = {}
        for e in ents:
            if e["type"] in NER_TYPES:
                spans.setdefault(NER_TYPES[e["type"]], []).append((e["start"], e["end"]))
        out.append(spans)
    return out


def table(title: str, rows: dict[str, dict[str, float]], types: list[str]) -> None:
    print(f"\n{title}")
    print(f"{'model':<28}" + "".join(f"{t:>10}" for t in types) + f"{'all':>10}")
    for name, s in rows.items():
        print(f"{name:<28}" + "".join(f"{s.get('f1/' + t, 0.0) * 100:>10.1f}" for t in types) + f"{s['f1'] * 100:>10.1f}")


def make_toy(out: Path) -> Path:
    sys.path.insert(0, str(HERE))
    from extraction_batching import make_model

    return make_model(out, quick=True)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--uie", help="a UIE run, model or export directory")
    ap.add_argument("--ner", default="ernie-tiny-zh-ner", help="the NER model beside it (hub name or directory)")
    ap.add_argument("--sentences", type=int, default=500, help="test sentences of each dataset")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--position-prob", type=float, default=0.5, help="the UIE model's pointer threshold")
    ap.add_argument("--quick", action="store_true", help="a random toy UIE model and 20 sentences")
    args = ap.parse_args(argv)
    if not args.uie and not args.quick:
        ap.error("give --uie RUN_OR_MODEL (or --quick)")
    from nlp.tasks.model_dirs import find_model_dir

    with tempfile.TemporaryDirectory() as tmp:
        uie = str(make_toy(Path(tmp) / "toy")) if args.quick else str(find_model_dir(args.uie))
        n = 20 if args.quick else args.sentences
        types = list(NER_TYPES.values())
        started = time.perf_counter()
        ner_set = sentences("zh-ner-uie", n)
        texts, gold = [t for t, _ in ner_set], [g for _, g in ner_set]
        canonical = {t: t for t in types}
        rows = {f"UIE ({Path(uie).parent.name}/{Path(uie).name})": score(run_uie(uie, texts, canonical, args.batch_size, args.position_prob), gold, types),
                f"NER ({args.ner})": score(run_ner(args.ner, texts, args.batch_size), gold, types)}
        table(f"1. span F1 (%) by type, zh-ner-uie test, first {len(texts)} sentences", rows, types)
        synonyms = score(run_uie(uie, texts, SYNONYMS, args.batch_size, args.position_prob), gold, types)
        table("2. the UIE model asked 人名 / 地名 / 机构 instead", {"UIE, synonyms": synonyms}, types)
        pd_set = sentences("peoples-daily-1998-uie", n)
        pd_texts, pd_gold = [t for t, _ in pd_set], [g for _, g in pd_set]
        held = score(run_uie(uie, pd_texts, {"时间": "时间"}, args.batch_size, args.position_prob), pd_gold, ["时间"])
        table(f"3. 时间 on peoples-daily-1998-uie test, first {len(pd_texts)} sentences (held out of zh-ner-uie)",
              {"UIE": held}, ["时间"])
        print(f"\n(UIE position_prob {args.position_prob}; {time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
