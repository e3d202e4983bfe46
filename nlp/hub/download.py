"""`download(name)`: resolve a name to a local snapshot directory, trying the card's sources in order.

Order: the card's `mirror` and `NLP_HUB_MIRROR` first, then the card's sources. A source that
fails (network, HTTP error, sha256 mismatch, converter error) is logged and the next one tried;
only when all fail does the call raise, listing every source and why it failed. Offline
(`NLP_OFFLINE`, `HF_HUB_OFFLINE`, `local_files_only=True`) only the cache is read, and no socket
is opened; a miss names the files and the command that fetches them.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import quote

from nlp._common import HubError, UnknownNameError, atomic_write

from . import records
from ._env import hub_cache_dir, is_offline, mirror_endpoints
from ._http import IntegrityError, RetryPolicy, lfs_pointer
from .cards import FileSpec, ModelCard, Source
from .convert import Converter, convert_once, is_converted
from .file_download import fetch_recorded
from .hf_protocol import fetch_snapshot
from .registry import find_card, get_card

__all__ = ["download", "effective_sources", "resolve_card", "safe_name"]

logger = logging.getLogger(__name__)

MODELSCOPE_ENDPOINT = "https://www.modelscope.cn"
# Files a Hugging Face-format snapshot needs; weights in other frameworks (tf, flax, onnx) are skipped.
_HF_PATTERNS = ["*.json", "*.txt", "*.safetensors", "*.bin", "*.model", "*.pdparams", "*.md"]


@dataclass(frozen=True)
class _Job:
    """What one `download` call works with, handed to each source."""

    cache: Path
    offline: bool
    progress: bool
    retry: RetryPolicy | None = None  # None: the HTTP layer's default
    converters: Mapping[str, Converter] | None = None


class _NotCached(Exception):
    """Offline and a source's files are not (all) in the cache."""

    def __init__(self, missing: list[str]):
        super().__init__(", ".join(missing))
        self.missing = missing


def safe_name(name: str) -> str:
    return name.replace("/", "--")


def _looks_like_repo(name: str) -> bool:
    parts = name.split("/")
    return len(parts) == 2 and all(parts) and not name.startswith((".", "~")) and not os.path.isabs(name)


def resolve_card(name_or_repo: str) -> ModelCard:
    """The card of a registered name, or an ad-hoc card with one hf source for an 'owner/repo' id."""
    card = find_card(name_or_repo)
    if card is not None:
        return card
    if _looks_like_repo(name_or_repo):
        return ModelCard(name=name_or_repo, architecture="", sources=(Source(kind="hf", repo=name_or_repo),))
    if name_or_repo.startswith((".", "~", os.sep)) or name_or_repo.endswith(("/", os.sep)):
        raise UnknownNameError(
            f"{name_or_repo!r} looks like a directory but there is no such directory "
            f"(from {os.getcwd()}). Give an existing model folder, a registered name (`nlp hub ls`) "
            "or an 'owner/repo' id."
        )
    return get_card(name_or_repo)  # raises UnknownNameError with a did-you-mean


def _mirror_source(card: ModelCard, where: str) -> Source:
    hf = next((s for s in card.sources if s.kind == "hf"), None)
    repo = hf.repo if hf else f"nlp-hub/{card.name}"
    fmt = hf.format if hf else "transformers"
    if where.startswith(("http://", "https://")):
        return Source(kind="mirror", endpoint=where.rstrip("/"), repo=repo, format=fmt)
    return Source(kind="mirror", path=where, repo=repo, format=fmt)


def effective_sources(card: ModelCard) -> list[Source]:
    """Mirrors (card's, then NLP_HUB_MIRROR's), then the card's own sources, in order."""
    out = []
    for where in ([card.mirror] if card.mirror else []) + mirror_endpoints():
        out.append(_mirror_source(card, where))
    for s in card.sources:
        if s.kind == "mirror" and not s.repo:
            s = replace(s, repo=_mirror_source(card, s.endpoint or s.path or "").repo)
        out.append(s)
    return out


def _label(src: Source) -> str:
    """Snapshot folder name of a non-HF source; distinct per source so they never mix files."""
    return f"{src.kind}-{src.revision or ('master' if src.kind == 'modelscope' else 'main')}"


def _silent_tqdm():
    from tqdm.auto import tqdm

    class Silent(tqdm):
        def __init__(self, *args, **kwargs):
            kwargs["disable"] = True
            super().__init__(*args, **kwargs)

    return Silent


# -- Hugging Face protocol -----------------------------------------------------------------------
def _hf_snapshot(src: Source, revision: str | None, job: _Job) -> Path:
    from huggingface_hub import HfApi, snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    cache, offline, progress = job.cache, job.offline, job.progress
    repo, endpoint = src.repo, src.endpoint
    revision = revision or src.revision
    allow = [f.name for f in src.files] or None
    tqdm_class = None if progress else _silent_tqdm()
    if offline:
        # the online call fetched the listed files, else _HF_PATTERNS minus *.bin when the repo has
        # safetensors: check completeness against the same selection
        no_bin = [p for p in _HF_PATTERNS if p != "*.bin"]
        selections = [allow] if allow else [no_bin, list(_HF_PATTERNS)]
        err: Exception | None = None
        for patterns in selections:
            try:
                path = Path(snapshot_download(
                    repo, revision=revision, cache_dir=cache, local_files_only=True, allow_patterns=patterns,
                    tqdm_class=tqdm_class,
                ))
            except (LocalEntryNotFoundError, OSError, ValueError) as e:
                err = e
                continue
            if patterns is no_bin and not any(path.glob("*.safetensors")):
                continue  # a .bin-only repo: its weights must be checked too
            missing = [f.name for f in src.files if not (path / f.name).exists()]
            if missing:
                raise _NotCached(missing)
            return path
        raise _NotCached(_hf_missing(cache, repo, revision, src.files, err or FileNotFoundError("no weights")))
    try:
        if allow is None:
            # skip duplicate weights: a repo with safetensors does not need its pytorch_model.bin
            names = HfApi(endpoint=endpoint).list_repo_files(repo, revision=revision)
            allow = list(_HF_PATTERNS)
            if any(n.endswith(".safetensors") for n in names):
                allow.remove("*.bin")
        # every file verified (card, tree LFS oid, ETag) before it is visible in the cache
        return fetch_snapshot(
            repo, cache=cache, revision=revision, endpoint=endpoint, allow_patterns=allow, pinned=src.files,
            progress=progress, retry=job.retry,
        )
    except HubError:
        raise
    except Exception as err:
        # any failure of one source means: try the next one. huggingface_hub raises its own HTTP
        # errors, httpx connection errors (not OSError), OSError and ValueError
        first = str(err).splitlines()[0] if str(err) else ""
        raise HubError(f"{type(err).__name__}: {first}") from err


def _hf_missing(cache: Path, repo: str, revision: str | None, files: tuple[FileSpec, ...], err: Exception) -> list[str]:
    """Name what is missing from an HF-layout cache entry, as precisely as the cache allows."""
    root = cache / f"models--{repo.replace('/', '--')}"
    if not root.exists():
        return [f.name for f in files] or ["all files (nothing cached for this repo)"]
    ref = root / "refs" / (revision or "main")
    snap = root / "snapshots" / (ref.read_text().strip() if ref.is_file() else (revision or ""))
    if files and snap.is_dir():
        return [f.name for f in files if not (snap / f.name).exists()] or [str(err).splitlines()[0]]
    return [f"incomplete snapshot ({str(err).splitlines()[0]})"]


# -- plain files: url / modelscope / builtin ---------------------------------------------------------
def _file_url(src: Source, f: FileSpec, revision: str | None) -> str:
    if src.kind == "url":
        return f.url or ""
    if src.kind == "modelscope":
        endpoint = (src.endpoint or os.environ.get("MODELSCOPE_ENDPOINT") or MODELSCOPE_ENDPOINT).rstrip("/")
        rev = quote(revision or src.revision or "master", safe="")
        return f"{endpoint}/api/v1/models/{src.repo}/repo?Revision={rev}&FilePath={quote(f.name, safe='')}"
    # builtin: package data, located without importing anything of nlp at module import time
    from importlib import resources

    base = resources.files(src.package or "").joinpath(src.path or "")
    return Path(str(base.joinpath(f.name))).resolve().as_uri()


def _files_snapshot(card: ModelCard, src: Source, revision: str | None, job: _Job) -> Path:
    cache, offline, progress = job.cache, job.offline, job.progress
    label = _label(src)
    snap = cache / f"files--{safe_name(card.name)}" / "snapshots" / label
    # builtin files are package data on this disk: copying them opens no socket, so offline is fine
    if offline and src.kind != "builtin":
        missing = [f.name for f in src.files if not (snap / f.name).is_file()]
        if missing:
            raise _NotCached(missing)
        return snap
    digests = {}
    for f in src.files:
        _, new = fetch_recorded(
            cache, card.name, label, f.name, _file_url(src, f, revision), sha256=f.sha256, size=f.size,
            progress=progress, retry=job.retry, what=f"{f.name} of {card.name} ({src.describe()})",
        )
        if new:
            digests[f.name] = new
    if digests:
        records.record(cache, card.name, label, digests)
    _write_paddle_config(card, src, snap)
    return snap


def _write_paddle_config(card: ModelCard, src: Source, snap: Path) -> None:
    """PaddleNLP's URLs serve weights and vocab only; the converter also needs the config."""
    if src.format != "paddle" or not card.config:
        return
    if any((snap / n).exists() for n in ("model_config.json", "config.json")):
        return
    import json

    with atomic_write(snap / "model_config.json", "w", encoding="utf-8") as fh:
        # no "architectures": the converter infers backbone vs head from the parameter names
        json.dump({"model_type": card.architecture, **card.config}, fh, indent=2)


# -- directories: local / mirror path ---------------------------------------------------------------
def _dir_snapshot(card: ModelCard, src: Source) -> Path:
    base = Path(src.path or "").expanduser()
    if src.kind == "mirror":  # a mirror folder holds owner/name/ like the server's DIR
        candidates = [base / src.repo] if src.repo else []
        candidates.append(base / card.name)
    else:
        candidates = [base]
    d = next((c for c in candidates if c.is_dir()), None)
    if d is None:
        raise _NotCached([f"directory {' or '.join(str(c) for c in candidates)}"])
    missing = [f.name for f in src.files if not (d / f.name).is_file()]
    if missing:
        raise _NotCached([f"{m} (in {d})" for m in missing])
    _refuse_lfs_pointers(d)
    return d


def _refuse_lfs_pointers(d: Path) -> None:
    """A folder made by `git clone` without `git lfs pull` holds pointers where the weights should be."""
    for f in sorted(d.iterdir()):
        if f.is_file() and (pointer := lfs_pointer(f)) is not None:
            raise IntegrityError(
                f"{f} is a Git LFS pointer (oid sha256:{pointer[0]}, size {pointer[1]}), not the file: "
                f"run `git lfs pull` in {d}"
            )


# -- one source ------------------------------------------------------------------------------------
def _raw_snapshot(card: ModelCard, src: Source, revision: str | None, job: _Job) -> Path:
    if src.kind == "hf" or (src.kind == "mirror" and src.endpoint):
        return _hf_snapshot(src, revision, job)
    if src.kind in ("local", "mirror"):
        return _dir_snapshot(card, src)
    return _files_snapshot(card, src, revision, job)


def _converted_dir(cache: Path, card: ModelCard, src: Source, raw: Path | None) -> Path:
    base = cache / f"converted--{safe_name(card.name)}"
    if src.kind in ("hf",) or (src.kind == "mirror" and src.endpoint):
        tag = f"hf-{safe_name(src.repo or '')}-{raw.name if raw else 'unknown'}"
    elif src.kind in ("local", "mirror"):
        import hashlib

        tag = f"{src.kind}-{hashlib.sha1(str(raw).encode()).hexdigest()[:12]}"
    else:
        tag = _label(src)
    return base / tag


def _from_source(card: ModelCard, src: Source, revision: str | None, job: _Job) -> Path:
    if src.format == "transformers":
        return _raw_snapshot(card, src, revision, job)
    # Paddle (or another foreign format): the converted folder is what callers load
    if job.offline and src.kind in ("url", "modelscope", "builtin"):
        dst = _converted_dir(job.cache, card, src, None)
        if is_converted(dst):
            return dst
    raw = _raw_snapshot(card, src, revision, job)
    dst = _converted_dir(job.cache, card, src, raw)
    # converting is local work, so it also runs offline when the raw files are cached
    return convert_once(src.format, raw, dst, job.converters)


def _source_allows_revision(src: Source, revision: str | None) -> bool:
    if revision is None or src.kind in ("hf", "modelscope") or (src.kind == "mirror" and src.endpoint):
        return True
    return src.revision == revision


def download(
    name_or_repo: str | os.PathLike,
    revision: str | None = None,
    cache_dir: str | os.PathLike | None = None,
    local_files_only: bool = False,
    *,
    progress: bool | None = None,
    converters: Mapping[str, Converter] | None = None,
    retry: RetryPolicy | None = None,
) -> Path:
    """Return a local directory holding the model's files in the transformers format.

    `name_or_repo`: a registered name (`nlp hub ls`), an `owner/repo` id on a Hugging Face-protocol
    endpoint, or a local directory (returned as-is). `revision`: branch, tag or commit for HF-protocol
    sources. `cache_dir`: overrides NLP_HUB_CACHE / NLP_HOME. `local_files_only`: like NLP_OFFLINE=1.
    `progress`: progress bars (default: when stderr is a terminal). `converters`: format -> function
    `fn(src_dir, dst_dir)` for sources not in the transformers format (`nlp.auto.CONVERTERS` holds the
    Paddle one; the hub imports no model code). `retry`: how often and how long to retry a URL.
    """
    as_path = Path(name_or_repo).expanduser()
    if as_path.is_dir():
        return as_path
    name = str(name_or_repo)
    card = resolve_card(name)
    cache = hub_cache_dir(cache_dir)
    offline = local_files_only or is_offline()
    if progress is None:
        progress = sys.stderr.isatty()
    job = _Job(cache, offline, progress, retry, converters)
    missing: list[tuple[Source, list[str]]] = []
    failures: list[tuple[Source, str]] = []
    for src in effective_sources(card):
        if not _source_allows_revision(src, revision):
            failures.append((src, f"has no revision {revision!r}"))
            continue
        try:
            path = _from_source(card, src, revision, job)
        except _NotCached as miss:
            missing.append((src, miss.missing))
            continue
        except HubError as err:
            logger.warning("source %s of %r failed, trying the next one: %s", src.describe(), card.name, err)
            failures.append((src, str(err)))
            continue
        logger.debug("%r resolved to %s via %s", card.name, path, src.describe())
        return path
    if offline:
        raise HubError(_offline_message(card.name, cache, missing, failures))
    lines = [f"  - {s.describe()}: {why}" for s, why in failures]
    lines += [f"  - {s.describe()}: missing {', '.join(m)}" for s, m in missing]
    raise HubError(
        f"could not download {card.name!r}; every source failed:\n" + "\n".join(lines) + "\n"
        "Check the network or the mirror (HF_ENDPOINT, NLP_HUB_MIRROR), or register another source "
        "(nlp.hub.register_card / NLP_HUB_CARDS)."
    )


def _offline_message(name: str, cache: Path, missing: list[tuple[Source, list[str]]], failures: list[tuple[Source, str]]) -> str:
    why = []
    if os.environ.get("NLP_OFFLINE"):
        why.append("NLP_OFFLINE")
    if os.environ.get("HF_HUB_OFFLINE"):
        why.append("HF_HUB_OFFLINE")
    lines = [f"  - {s.describe()}: {', '.join(m)}" for s, m in missing]
    lines += [f"  - {s.describe()}: {w}" for s, w in failures]
    return (
        f"{name!r} is not in the cache {cache} and the network is off "
        f"({', '.join(why) or 'local_files_only=True'}). Missing, per source:\n" + "\n".join(lines) + "\n"
        f"Fix: on a connected machine run `nlp hub download {name}` (add `--cache-dir DIR` to fill a "
        f"separate folder), copy that cache folder to this machine and point NLP_HUB_CACHE (or NLP_HOME) "
        f"at it; or turn the network back on (unset NLP_OFFLINE / HF_HUB_OFFLINE)."
    )
