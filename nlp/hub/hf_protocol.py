"""Download a Hugging Face-protocol repo (the Hub, `HF_ENDPOINT`, a team mirror, `nlp hub serve`)
into huggingface_hub's cache layout, verifying every file before it becomes visible.

huggingface_hub's `snapshot_download` checks sizes, not the sha256 the server announces: a server
that sends the right size with the wrong bytes gets them cached under the announced blob name,
and offline mode serves them ever after. Here huggingface_hub answers the metadata questions
(the commit, the file list with LFS sha256s and git blob ids, each file's ETag), and every file
goes through the hub's own `fetch_url` (resumable, retried, locked): it lands in
`blobs/<etag>.incomplete`, is checked against every digest known for it (the card's sha256, the
tree's LFS oid, the ETag / `X-Linked-Etag` when it is a sha256, else the git blob id), and only
then is renamed to `blobs/<etag>` and linked from `snapshots/<commit>/<path>`, exactly where
huggingface_hub puts it, so that both read the same cache (offline included).
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

from nlp._common import HubError, atomic_write

from ._http import IntegrityError, RetryPolicy, fetch_url
from .cards import FileSpec

__all__ = ["fetch_snapshot", "repo_cache_dir"]

logger = logging.getLogger(__name__)

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_SHA1 = re.compile(r"^[0-9a-f]{40}$")
_BLOB_NAME = re.compile(r"^[0-9A-Za-z_-]{1,128}$")


def repo_cache_dir(cache: Path, repo: str) -> Path:
    """`<cache>/models--owner--name`, huggingface_hub's folder for a model repo."""
    return cache / f"models--{repo.replace('/', '--')}"


def _safe_relpath(name: str, repo: str) -> PurePosixPath:
    """A path the server listed, refused unless it stays inside the snapshot folder."""
    p = PurePosixPath(name)
    if not name or p.is_absolute() or "\\" in name or "\0" in name or any(part in ("", ".", "..") for part in name.split("/")):
        raise HubError(f"{repo}: the server lists a file named {name!r}, which would leave the snapshot folder; refused")
    return p


def _expected_sha256(name: str, repo: str, announced: Mapping[str, str | None]) -> str | None:
    """The one sha256 every source of truth agrees on; IntegrityError when two disagree."""
    known = {k: v.lower() for k, v in announced.items() if v and _SHA256.match(v.lower())}
    if len(set(known.values())) > 1:
        listed = ", ".join(f"{k} {v}" for k, v in known.items())
        raise IntegrityError(f"{name} of {repo}: the digests announced for it disagree ({listed}); nothing downloaded")
    return next(iter(known.values()), None)


def _link(snapshot: Path, rel: PurePosixPath, blob: Path) -> None:
    """`snapshots/<commit>/<rel>` -> `../../blobs/<etag>`, replaced atomically (a copy where links fail)."""
    dst = snapshot.joinpath(*rel.parts)
    dst.parent.mkdir(parents=True, exist_ok=True)
    target = os.path.relpath(blob, dst.parent)
    if dst.is_symlink() and os.readlink(dst) == target:
        return
    tmp = dst.with_name(f".{dst.name}.{os.getpid()}.link")
    tmp.unlink(missing_ok=True)
    try:
        os.symlink(target, tmp)
    except OSError:  # no symlinks here (some filesystems): a copy, like huggingface_hub does
        shutil.copyfile(blob, tmp)
    os.replace(tmp, dst)


def fetch_snapshot(
    repo: str,
    *,
    cache: Path,
    revision: str | None = None,
    endpoint: str | None = None,
    allow_patterns: list[str] | None = None,
    pinned: tuple[FileSpec, ...] = (),
    progress: bool = False,
    retry: RetryPolicy | None = None,
) -> Path:
    """Download `repo` at `revision` (default "main"); returns `snapshots/<commit>` in the cache.

    `allow_patterns`: shell globs of the files to fetch (None: all). `pinned`: the card's files
    of this source; each must exist in the repo and match the card's sha256 and size.
    """
    from huggingface_hub import HfApi, get_hf_file_metadata, hf_hub_url
    from huggingface_hub.hf_api import RepoFile
    from huggingface_hub.utils import build_hf_headers, filter_repo_objects

    revision = revision or "main"
    api = HfApi(endpoint=endpoint)
    commit = api.model_info(repo, revision=revision).sha
    if not commit or not _SHA1.match(commit):
        raise HubError(f"{repo}: the server named no valid commit for revision {revision!r} (got {commit!r})")
    entries = {e.path: e for e in api.list_repo_tree(repo, revision=commit, recursive=True) if isinstance(e, RepoFile)}
    by_name = {f.name: f for f in pinned}
    absent = [n for n in by_name if n not in entries]
    if absent:
        raise HubError(f"{repo}: {', '.join(absent)} listed in the card but not in the repository at {commit}")
    names = sorted(set(filter_repo_objects(sorted(entries), allow_patterns=allow_patterns)) | set(by_name))
    storage = repo_cache_dir(cache, repo)
    snapshot = storage / "snapshots" / commit
    headers = build_hf_headers()  # the token of HF_TOKEN / `hf auth login`, as huggingface_hub sends it
    for name in names:
        rel = _safe_relpath(name, repo)
        entry, spec = entries[name], by_name.get(name)
        url = hf_hub_url(repo, name, revision=commit, endpoint=endpoint)
        meta = get_hf_file_metadata(url, endpoint=endpoint)
        etag = (meta.etag or "").strip('"')
        what = f"{name} of {repo}" + (f" ({endpoint})" if endpoint else "")
        expected = _expected_sha256(what, repo, {
            "card": spec.sha256 if spec else None,
            "tree LFS oid": entry.lfs.sha256 if entry.lfs else None,
            "ETag": etag,
        })
        git_sha1 = entry.blob_id if expected is None and entry.blob_id and _SHA1.match(entry.blob_id) else None
        blob_name = etag if _BLOB_NAME.match(etag) else (expected or git_sha1)
        if not blob_name:
            raise HubError(f"{what}: the server announces no usable ETag ({meta.etag!r}) and no digest")
        size = spec.size if spec and spec.size is not None else meta.size if meta.size is not None else entry.size
        blob = storage / "blobs" / blob_name
        if blob_name == expected and blob.is_file() and (size is None or blob.stat().st_size == size):
            _link(snapshot, rel, blob)  # content-addressed and verified before it got this name
            continue
        fetch_url(
            url, blob, sha256=expected, size=size, git_sha1=git_sha1, headers=headers, retry=retry,
            lock_path=cache / ".locks" / storage.name / f"{blob_name}.lock",
            incomplete_path=blob.with_name(blob_name + ".incomplete"), progress=progress, what=what,
        )
        _link(snapshot, rel, blob)
    if revision != commit:
        ref = storage / "refs" / _safe_relpath(revision, repo)
        ref.parent.mkdir(parents=True, exist_ok=True)
        if not ref.is_file() or ref.read_text().strip() != commit:
            with atomic_write(ref, "w", encoding="utf-8") as fh:
                fh.write(commit)
    snapshot.mkdir(parents=True, exist_ok=True)  # a repo with no selected file is an empty snapshot
    logger.debug("%s@%s: %d files verified in %s", repo, commit, len(names), snapshot)
    return snapshot
