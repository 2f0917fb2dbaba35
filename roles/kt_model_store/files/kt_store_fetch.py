#!/usr/bin/env python3
"""Fetch one model into the ktinfra model store and mark it complete.

Run on the target by the kt_model_store role. Prints one JSON line: {"changed": bool, "dest": ..., ...}.

A model directory is complete only when it holds the marker file written last, atomically, after every
file arrived. A stale marker is removed before any new byte is written, so an interrupted download is
never mistaken for a complete one; a re-run keeps the files already whole (huggingface_hub 2.x fetches a
file that was cut off again from its start; local copies skip files already copied whole: the source file's
size and mtime). A partial file the hub client left in its download folder is removed once the fetch ends.

The folder holds exactly the files the request selects: the source's listing (a hub revision's files, the
local directory's) is read first, and files it lacks (another revision's shards) are removed before the
download. A listing that fails or selects nothing changes nothing, and neither does one whose files do not
fit the free disk (the listing's sizes, less what is already there whole and what would be removed).

Secrets: the hub token is read from HF_TOKEN_PATH's file / HF_TOKEN / MODELSCOPE_API_TOKEN, never argv.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import shutil
import sys
import time
from pathlib import Path, PurePosixPath

MARKER = ".ktinfra-complete.json"
PARTIAL_SUFFIXES = (".incomplete", ".part", ".lock")


def request_of(args: argparse.Namespace) -> dict:
    return {
        "source": args.source,
        "repo": args.repo,
        "revision": args.revision,
        "allow_patterns": sorted(args.allow_pattern or []),
    }


def listed_files(dest: Path) -> dict[str, int]:
    files = {}
    for path in sorted(dest.rglob("*")):
        rel = path.relative_to(dest).as_posix()
        if rel == MARKER or rel.startswith(".cache/") or not path.is_file():
            continue
        files[rel] = path.stat().st_size
    return files


def read_marker(dest: Path) -> dict | None:
    try:
        return json.loads((dest / MARKER).read_text())
    except (OSError, ValueError):
        return None


def is_complete(dest: Path, request: dict) -> bool:
    marker = read_marker(dest)
    if not marker or marker.get("request") != request:
        return False
    for rel, size in marker.get("files", {}).items():
        path = dest / rel
        if not path.is_file() or path.stat().st_size != size:
            return False
    return bool(marker.get("files"))


def local_state(args: argparse.Namespace, wanted: set[str]) -> dict[str, list[int]]:
    """Size and mtime of each selected file of a local source: a file rewritten in place (a LoRA merged into
    the same directory again) keeps its size but not its mtime."""
    src = Path(args.repo)
    return {rel: [(src / rel).stat().st_size, (src / rel).stat().st_mtime_ns] for rel in sorted(wanted)}


def source_unchanged(dest: Path, args: argparse.Namespace) -> bool:
    """Whether a local source still holds what was copied (hubs: a revision's files are the request's).
    A marker of an older ktinfra has no source_files: the source's files then must have the sizes it lists
    and no mtime after it was written. A source removed since the copy leaves the copy as it is."""
    if args.source != "local" or not Path(args.repo).is_dir():
        return True
    marker = read_marker(dest) or {}
    now = local_state(args, list_local(args)[1])
    if "source_files" in marker:
        return marker["source_files"] == now
    copied = marker.get("files", {})
    newest = max((mtime for _, mtime in now.values()), default=0)
    same_sizes = {rel: size for rel, (size, _) in now.items()} == copied
    return same_sizes and newest < (marker.get("completed_at", 0) + 1) * 10**9  # completed_at: whole seconds


def write_marker(
    dest: Path, name: str, request: dict, wanted: set[str], commit: str | None, source_files: dict | None
) -> dict:
    """`commit`: what the revision named when it was listed (hf: the commit sha), kept for the record;
    `source_files`: a local source's local_state, which later runs compare."""
    leftovers = [p.name for p in dest.rglob("*") if p.is_file() and p.name.endswith(PARTIAL_SUFFIXES)]
    leftovers = [n for n in leftovers if not n.endswith(".lock")]
    if leftovers:
        raise RuntimeError(f"partial files left after fetch, not marking complete: {leftovers[:5]}")
    files = listed_files(dest)
    if not files:
        raise RuntimeError(f"nothing was fetched into {dest} (check repo name and allow patterns)")
    missing = sorted(wanted - set(files))
    if missing:
        raise RuntimeError(f"{len(missing)} listed file(s) missing, not marked complete: {missing[:5]}")
    marker = {"name": name, "request": request, "files": files, "completed_at": int(time.time())}
    if commit:
        marker["commit"] = commit
    if source_files is not None:
        marker["source_files"] = source_files
    tmp = dest / (MARKER + ".tmp")
    tmp.write_text(json.dumps(marker, indent=1, sort_keys=True))
    os.replace(tmp, dest / MARKER)
    return marker


def selected(files: list[str], args: argparse.Namespace) -> set[str]:
    """The files of a hub listing that `allow_patterns` select, matched as huggingface_hub matches them."""
    from huggingface_hub.utils import filter_repo_objects

    return set(filter_repo_objects(files, allow_patterns=args.allow_pattern or None))


def list_hf(args: argparse.Namespace) -> tuple[str, set[str], dict[str, int]]:
    """The commit the revision names now, the files of it to fetch, and each file's size."""
    from huggingface_hub import HfApi
    from huggingface_hub.hf_api import RepoFile

    api = HfApi(token=os.environ.get("HF_TOKEN") or None)
    sha = api.repo_info(args.repo, revision=args.revision).sha
    tree = api.list_repo_tree(args.repo, revision=sha, recursive=True)
    sizes = {entry.path: entry.size for entry in tree if isinstance(entry, RepoFile)}
    wanted = selected(list(sizes), args)
    return sha, wanted, {rel: sizes[rel] for rel in wanted}


def fetch_hf(args: argparse.Namespace, dest: Path, commit: str, wanted: set[str]) -> None:
    from huggingface_hub import snapshot_download

    snapshot_download(
        repo_id=args.repo,
        revision=commit,  # the commit listed, even where a branch moves while the files arrive
        local_dir=str(dest),
        allow_patterns=args.allow_pattern or None,
        token=os.environ.get("HF_TOKEN") or None,
        max_workers=args.workers,
    )
    # every selected file is whole now: a partial file still in the client's download folder belongs to a
    # file no longer selected (another revision, other allow_patterns) or to an older version of one (the
    # branch moved since a download was cut off). It is never resumed, and kept the model from ever being
    # marked complete ("partial files left") until removed by hand.
    download = dest / ".cache" / "huggingface" / "download"
    for stale in sorted(download.rglob("*.incomplete")) if download.is_dir() else []:
        stale.unlink(missing_ok=True)


def list_modelscope(args: argparse.Namespace) -> tuple[str | None, set[str], dict[str, int] | None]:
    from modelscope.hub.api import HubApi

    revision = {"revision": args.revision} if args.revision else {}
    entries = HubApi().get_model_files(args.repo, recursive=True, **revision)
    listed = {e["Path"]: e.get("Size") for e in entries if e.get("Type", "blob") != "tree"}
    # modelscope's newer HubApi (its modelscope_hub compat layer, 1.40) lists folders too but without their
    # Type, as {"Path", "Size"}: a folder (git has no empty ones) is then known as the parent of other
    # entries. Taken as a file, it was never "fetched" and the model was never marked complete.
    folders = {parent.as_posix() for rel in listed for parent in PurePosixPath(rel).parents}
    files = {rel: size for rel, size in listed.items() if rel not in folders}
    wanted = selected(list(files), args)
    sizes = {rel: files[rel] for rel in wanted}
    return args.revision, wanted, sizes if all(isinstance(v, int) for v in sizes.values()) else None


def fetch_modelscope(args: argparse.Namespace, dest: Path, revision: str | None, wanted: set[str]) -> None:
    from modelscope import snapshot_download

    # `wanted` was selected as huggingface_hub matches (a pattern ending in / is that folder's files);
    # modelscope matches each pattern with fnmatch alone, so "UD-Q2_K_XL/" fetched nothing and the model was
    # refused on every run ("listed file(s) missing"): give it the folder's files as a glob
    patterns = [p + "*" if p.endswith("/") else p for p in args.allow_pattern or []]
    # and a pattern holding ".*" it also matches as a regex (".*" read as "*"): "config.*" fetched
    # configuration_deepseek.py too, a file the listing did not select (nor the disk check count) that the
    # marker then recorded. "[.]*" is the same glob without the ".*" modelscope reads again
    patterns = [p.replace(".*", "[.]*") for p in patterns]
    snapshot_download(
        model_id=args.repo,
        revision=revision,
        local_dir=str(dest),
        allow_patterns=patterns or None,
    )


def list_local(args: argparse.Namespace) -> tuple[None, set[str], dict[str, int]]:
    src = Path(args.repo)
    if not src.is_dir():
        raise FileNotFoundError(f"local model source {src} is not a directory")
    wanted = set()
    for path in src.rglob("*"):
        rel = path.relative_to(src).as_posix()
        if not path.is_file() or rel.startswith(".") or rel == MARKER:
            continue
        if args.allow_pattern and not any(fnmatch.fnmatch(rel, p) for p in args.allow_pattern):
            continue
        wanted.add(rel)
    return None, wanted, {rel: (src / rel).stat().st_size for rel in wanted}


def space_problem(dest: Path, sizes: dict[str, int] | None) -> str | None:
    """Why the selected files cannot fit the disk under `dest` (None: they fit, or the listing gave no sizes).
    A file already there with the listed size is not fetched again; files the fetch removes (not selected)
    free their space first. A partial download being resumed is counted whole: a little too much, never
    too little. Before, a model larger than the disk was downloaded for hours until the disk filled."""
    if not sizes:
        return None
    need = 0
    for rel, size in sizes.items():
        path = dest / rel
        need += 0 if path.is_file() and path.stat().st_size == size else size
    there = listed_files(dest)
    freed = sum(size for rel, size in there.items() if rel not in sizes and not rel.startswith("."))
    where = dest
    while not where.exists() and where != where.parent:
        where = where.parent
    free = shutil.disk_usage(where).free + freed
    if need <= free:
        return None
    return (
        f"needs {need / 2**30:.1f} GiB free under {where} for {len(sizes)} file(s), has "
        f"{free / 2**30:.1f} GiB{' (counting the files it would remove)' if freed else ''}: put "
        f"kt_model_store_root on a larger disk, free space, or narrow allow_patterns; {dest} left as it was"
    )


def same_file(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_size, a.st_mtime_ns) == (b.st_size, b.st_mtime_ns)


def copy_local(args: argparse.Namespace, dest: Path, _: None, wanted: set[str]) -> None:
    """Copy the source's files, each with the source's mtime: a file already there with the source file's
    size and mtime is kept (a copy cut off resumes), any other is copied (another source whose files have the
    same sizes)."""
    src = Path(args.repo)
    for rel in sorted(wanted):
        path, target = src / rel, dest / rel
        have = path.stat()
        if target.is_file() and same_file(target.stat(), have):
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        part = target.with_name(target.name + ".part")
        shutil.copyfile(path, part)
        os.utime(part, ns=(have.st_atime_ns, have.st_mtime_ns))
        os.replace(part, target)


def remove_unwanted(dest: Path, wanted: set[str]) -> list[str]:
    """Remove dest's files that are not `wanted` (an earlier revision's, repo's or source's: kt-kernel's
    converter loads every *.safetensors under the folder, so a stale shard would be converted too) and the
    directories that leaves empty. Hidden top-level entries (the marker, the hub client's .cache) are kept,
    but for a removed file's download record."""
    removed = []
    for path in sorted(dest.rglob("*"), reverse=True):  # deepest first: a directory after its files
        rel = path.relative_to(dest).as_posix()
        if rel.startswith(".") or rel in wanted:
            continue
        if not path.is_dir() or path.is_symlink():
            path.unlink()
            removed.append(rel)
            for record in (".metadata", ".lock"):
                (dest / ".cache" / "huggingface" / "download" / (rel + record)).unlink(missing_ok=True)
        elif not any(path.iterdir()):
            path.rmdir()
    return sorted(removed)


# source -> (list: the revision to fetch and the files it selects, fetch: bring those files into dest)
SOURCES = {
    "hf": (list_hf, fetch_hf),
    "modelscope": (list_modelscope, fetch_modelscope),
    "local": (list_local, copy_local),
}


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", required=True)
    parser.add_argument("--source", choices=sorted(SOURCES), required=True)
    parser.add_argument("--repo", required=True, help="hub repo id, or a directory for --source local")
    parser.add_argument("--revision", default=None)
    parser.add_argument("--allow-pattern", action="append", help="glob of files to fetch (repeatable)")
    parser.add_argument("--dest", required=True, type=Path)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--check", action="store_true", help="only report whether the model is complete")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse(argv)
    request = request_of(args)
    dest = args.dest
    if is_complete(dest, request) and source_unchanged(dest, args):
        print(json.dumps({"changed": False, "complete": True, "dest": str(dest)}))
        return 0
    if args.check:
        print(json.dumps({"changed": False, "complete": False, "dest": str(dest)}))
        return 3
    list_files, fetch_files = SOURCES[args.source]
    removed: list[str] = []
    started = False  # the listing is read before anything in dest changes
    try:
        revision, wanted, sizes = list_files(args)
        if not wanted:
            patterns = f" match allow_patterns {args.allow_pattern}" if args.allow_pattern else " are listed"
            raise RuntimeError(f"nothing to fetch: no files of {args.repo}{patterns}; {dest} left as it was")
        problem = space_problem(dest, sizes)
        if problem:
            raise RuntimeError(problem)
        started = True
        dest.mkdir(parents=True, exist_ok=True)
        (dest / MARKER).unlink(missing_ok=True)
        removed = remove_unwanted(dest, wanted)
        state = local_state(args, wanted) if args.source == "local" else None  # before the copy: a file
        fetch_files(args, dest, revision, wanted)  # rewritten while it is copied is copied again next time
        marker = write_marker(dest, args.name, request, wanted, revision, state)
    except Exception as exc:  # noqa: BLE001 - reported to Ansible as one clear line
        report = {"changed": started, "complete": False, "dest": str(dest)}
        print(json.dumps(report | {"removed": removed, "error": f"{exc}"}))
        return 1
    size = sum(marker["files"].values())
    print(
        json.dumps(
            {
                "changed": True,
                "complete": True,
                "dest": str(dest),
                "files": len(marker["files"]),
                "bytes": size,
                "removed": removed,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
