"""Named public Chinese datasets: where they are published and how their files are read.

Sources are PaddleNLP's dataset builders (``paddlenlp/datasets/*.py``: archive URL and md5,
the file of each split inside it and that file's md5) and the Hugging Face hub names. This
module is data; the files are fetched by `_download.py` through the hub, the readers live with their tasks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["PublicDataset", "PUBLIC"]

_CLUE = "https://storage.googleapis.com/cluebenchmark/tasks/"
_BOS = "https://bj.bcebos.com/paddlenlp/datasets/"


@dataclass(frozen=True)
class PublicDataset:
    """One public dataset.

    `url`/`md5` name one archive holding every split (``splits`` maps split -> (path in the
    archive, md5)); with ``url=None`` each split is its own download (``split_urls``).
    `reader` + `reader_kwargs` say how a split file is read (see `nlp.tasks.datasets.load`).
    """

    name: str
    task: str
    reader: str  # "classification" | "conll" | "paddle_ner" | "squad"
    splits: dict[str, tuple[str, str | None]]
    url: str | None = None
    md5: str | None = None
    split_urls: dict[str, str] = field(default_factory=dict)
    reader_kwargs: dict = field(default_factory=dict)
    label_names: tuple[str, ...] | None = None
    hf_name: str | None = None
    hf_config: str | None = None
    homepage: str = ""
    note: str = ""


def _clue(task: str, files: dict, md5: str, labels, **kw) -> PublicDataset:
    return PublicDataset(
        task, "text-classification", "classification",
        {split: (f"{task}_public/{f}", m) for split, (f, m) in files.items()},
        url=f"{_CLUE}{task}_public.zip", md5=md5, label_names=tuple(labels),
        hf_name="clue/clue", hf_config=task, homepage="https://github.com/CLUEbenchmark/CLUE", **kw)


_NER_TAGS = ("B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "O")

PUBLIC: dict[str, PublicDataset] = {d.name: d for d in [
    PublicDataset(
        "chnsenticorp", "text-classification", "classification",
        {"train": ("ChnSentiCorp/ChnSentiCorp/train.tsv", "689360c4a4a9ce8d8719ed500ae80907"),
         "dev": ("ChnSentiCorp/ChnSentiCorp/dev.tsv", "20c77cc2371634731a367996b097ec0a"),
         "test": ("ChnSentiCorp/ChnSentiCorp/test.tsv", "9b4dc7d1e4ada48c645b7e938592f49c")},
        url=f"{_BOS}ChnSentiCorp.zip", md5="7ef61b08ad10fbddf2ba97613f071561",
        reader_kwargs={"format": "tsv", "text_column": "text_a"}, label_names=("0", "1"),
        hf_name="lansinuote/ChnSentiCorp", homepage="https://github.com/pengming617/bert_classification",
        note="tsv with a header: train 'label<TAB>text_a', dev 'qid<TAB>label<TAB>text_a', test 'qid<TAB>text_a'"),
    _clue("tnews", {"train": ("train.json", "25c021725309a3330736380a230850fd"),
                    "dev": ("dev.json", "f0660a3339a32e764075c801b42ece3c"),
                    "test": ("test.json", "2d1557c7548c72d5a84c47bbbd3a4e85")},
          # 15 codes: CLUE's labels.json has no 105 and no 111 (PaddleNLP's list wrongly adds 105)
          "587171233c8e8db00a3dc9bae5d2b47d", [str(i) for i in range(100, 117) if i not in (105, 111)],
          reader_kwargs={"text_column": "sentence"},
          note="JSON lines: label (code '100'..'116' without 105 and 111), label_desc, sentence, keywords"),
    _clue("iflytek", {"train": ("train.json", "fc9a21700c32ee3efee3fc283e9ac560"),
                      "dev": ("dev.json", "79b7d95bddeb11cd54198fd077992704"),
                      "test": ("test.json", "ea764519ddb4369767d07664afde3325")},
          "19e4b19947db126f69aae18db0da2b87", [str(i) for i in range(119)],
          reader_kwargs={"text_column": "sentence"}, note="JSON lines: label ('0'..'118'), label_des, sentence"),
    _clue("afqmc", {"train": ("train.json", "319cf775353af9473140abca4052b89a"),
                    "dev": ("dev.json", "307154b59cb6c3e68a0f39c310bbd364"),
                    "test": ("test.json", "94b925f23a9615dd08199c4013f761f4")},
          "3377b559bb4e61d03a35282550902ca0", ["0", "1"],
          reader_kwargs={"text_column": "sentence1", "text_pair_column": "sentence2"},
          note="JSON lines: sentence1, sentence2, label"),
    _clue("ocnli", {"train": ("train.50k.json", "d38ec492ef086a894211590a18ab7596"),
                    "dev": ("dev.json", "3481b456bee57a3c9ded500fcff6834c"),
                    "test": ("test.json", "680ff24e6b3419ff8823859bc17936aa")},
          "acb426f6f3345076c6ce79239e7bc307", ["entailment", "contradiction", "neutral"],
          reader_kwargs={"text_column": "sentence1", "text_pair_column": "sentence2", "ignore_labels": ("-",)},
          note="JSON lines: sentence1, sentence2, label; records labelled '-' (no agreement) are skipped"),
    PublicDataset(
        "lcqmc", "text-classification", "classification",
        {"train": ("lcqmc/lcqmc/train.tsv", "2193c022439b038ac12c0ae918b211a1"),
         "dev": ("lcqmc/lcqmc/dev.tsv", "c5dcba253cb4105d914964fd8b3c0e94"),
         "test": ("lcqmc/lcqmc/test.tsv", "8f4b71e15e67696cc9e112a459ec42bd")},
        url="https://dataset-bj.cdn.bcebos.com/qianyan/lcqmc.zip", md5="7069fa0cffbd2110845869c61f83814a",
        reader_kwargs={"format": "tsv", "column_names": ("query", "title", "label"),
                       "text_column": "query", "text_pair_column": "title"},
        label_names=("0", "1"), hf_name="C-MTEB/LCQMC", homepage="https://www.aclweb.org/anthology/C18-1166/",
        note="tsv without a header: query<TAB>title<TAB>label"),
    PublicDataset(
        "msra-ner", "token-classification", "paddle_ner",
        {"train": ("msra_ner/train.tsv", "67d3c93a37daba60ef43c03271f119d7"),
         "test": ("msra_ner/test.tsv", "2f27ae68b5f61d6553ffa28bb577c8a7")},
        url="https://paddlenlp.bj.bcebos.com/datasets/msra_ner.tar.gz", md5=None,
        label_names=_NER_TAGS, hf_name="levow/msra_ner",
        homepage="https://faculty.washington.edu/levow/papers/sighan06.pdf",
        note="tsv, header 'text_a<TAB>label', chars and tags each joined by \\x02"),
    PublicDataset(
        "peoples-daily-ner", "token-classification", "paddle_ner",
        {"train": ("peoples_daily_ner/train.tsv", "67d3c93a37daba60ef43c03271f119d7"),
         "dev": ("peoples_daily_ner/dev.tsv", "ec772f3ba914bca5269f6e785bb3375d"),
         "test": ("peoples_daily_ner/test.tsv", "2f27ae68b5f61d6553ffa28bb577c8a7")},
        url=f"{_BOS}peoples_daily_ner.tar.gz", md5="a44ff9c4b37b48add9ddc17994d5620c",
        label_names=_NER_TAGS, hf_name="peoples_daily_ner",
        note="PaddleNLP's copy; same format as msra-ner (its builder lists the same md5 for train/test)"),
    PublicDataset(
        "weibo-ner", "token-classification", "conll",
        {"train": ("weiboNER_2nd_conll.train", None), "dev": ("weiboNER_2nd_conll.dev", None),
         "test": ("weiboNER_2nd_conll.test", None)},
        split_urls={s: f"https://raw.githubusercontent.com/hltcoe/golden-horse/master/data/weiboNER_2nd_conll.{s}"
                    for s in ("train", "dev", "test")},
        reader_kwargs={"sep": "\t", "on_invalid": "repair"}, hf_name="hltcoe/weibo_ner",
        homepage="https://github.com/hltcoe/golden-horse",
        note="CoNLL chars<TAB>tag (PER/ORG/LOC/GPE .NAM/.NOM); not in PaddleNLP; no published md5"),
    PublicDataset(
        "cmrc2018", "question-answering", "squad",
        {"train": ("cmrc2018_train.json", "7fb714b479c7f40fbb16acabd7af0ede"),
         "dev": ("cmrc2018_dev.json", "853b80709ff2d071f9fce196521b843c"),
         "trial": ("cmrc2018_trial.json", "070f8ade5b15cfdb095c1fcef9cf43c1")},
        split_urls={s: f"{_BOS}cmrc/cmrc2018_{s}.json" for s in ("train", "dev", "trial")},
        hf_name="hfl/cmrc2018", homepage="https://github.com/ymcui/cmrc2018",
        note="SQuAD json: data -> paragraphs -> qas -> answers (text, answer_start)"),
    PublicDataset(
        "drcd", "question-answering", "squad",
        {"train": ("DRCD_training.json", "bbeefc8ad7585ea3e4fef8c677e7643e"),
         "dev": ("DRCD_dev.json", "42c2f2bca84fc36cf65a86563b0540e6"),
         "test": ("DRCD_test.json", "e36a295c1cb8c6b9fb28015907a42d9e")},
        split_urls={"train": "https://paddlenlp.bj.bcebos.com/datasets/DRCD/DRCD_training.json",
                    "dev": "https://paddlenlp.bj.bcebos.com/datasets/DRCD/DRCD_dev.json",
                    "test": "https://paddlenlp.bj.bcebos.com/datasets/DRCD/DRCD_test.json"},
        hf_name="clue/drcd", homepage="https://github.com/DRCKnowledgeTeam/DRCD",
        note="SQuAD json, traditional Chinese"),
    PublicDataset(
        "dureader-robust", "question-answering", "squad",
        {"train": ("dureader_robust-data/train.json", "800a3dcb742f9fdf9b11e0a83433d4be"),
         "dev": ("dureader_robust-data/dev.json", "ae73cec081eaa28a735204c4898a2222"),
         "test": ("dureader_robust-data/test.json", "e0e8aa5c7b6d11b6fc3935e29fc7746f")},
        url=f"{_BOS}dureader_robust-data.tar.gz", md5="82f3d191a115ec17808856866787606e",
        hf_name="PaddlePaddle/dureader_robust", homepage="https://github.com/baidu/DuReader",
        note="SQuAD json; the test split has no answers"),
]}
