"""Runs carried from one time-limited machine to the next.

A lent GPU machine keeps nothing after its lease, and files travel to and from it in batches (here at
most 8 files of 16 MiB, 64 MiB a batch, each way). ``pack`` writes what resuming and evaluating an
unfinished run needs, and nothing more:

- ``train.log`` (the best validation and the epochs so far), ``train.done``, ``scores.json``;
- the newest complete checkpoint of an unfinished run (with the optimizer, so ``-train_from``
  continues Adam, the learning-rate halvings and the early stopping);
- the best validated checkpoint, weights only, when ``scores.json`` does not score it yet (it may be
  older than the newest, and evaluation decodes it), or when the caller names the run in ``best_of``
  (``reproduce.py pack``: a finished seed that its configuration's ensemble does not hold yet);
- a configuration's decoded ensemble, ``ensemble/scores.json`` (``ensembles``): once it holds the seeds'
  best checkpoints they no longer travel, so its scores are all that is left of it.

Each file is cut into parts of at most ``part_bytes``, the parts go into numbered batch folders of at
most ``batch_files`` files and ``batch_bytes`` bytes, and every batch has a ``manifest.json`` naming
its files by their path under the work folder, size and sha256. A run's files share a batch whenever
they fit in one, so each batch that comes back is useful alone: a lease that ends between two returns
loses the runs of the batches not returned, not the whole pack. A run larger than one batch is cut
anyway: its parts fill the room the batch before it left (a part ends where its batch fills), so a pack
of such runs takes the fewest batches its bytes allow.
``unpack`` reads the batches (from one folder or several, in any order, of one pack or several), checks
every joined file against its manifest and puts the complete runs in place; it never writes over a file
that differs, and names what is missing or corrupt.
"""
from __future__ import annotations

import itertools
import json
import os
import shutil
import sys
import tempfile
import uuid
from collections.abc import Collection
from pathlib import Path

from pieces import best_checkpoint, latest_checkpoint, scored_step, step_of, trainer_of
from results_csv import scores_of

from onmt_entmax.options.files import blocking_file

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "data"))
from download import file_digests  # noqa: E402 (scripts/data: the archives' checksums)

MANIFEST = "manifest.json"
FORMAT = 2  # 1: one manifest, in the first batch (still read)
FORMATS = (1, 2)
MIB = 1 << 20
MANIFEST_ROOM = 64 * 1024  # bytes a batch keeps free for its manifest


class CarryError(ValueError):
    """A batch that cannot be unpacked as it is (the message names the file)."""


def sha256(path: Path) -> str:
    return file_digests(path, ["sha256"])["sha256"]


def weights_only_copy(checkpoint: Path, out: Path) -> Path:
    """``checkpoint`` without its optimizer state (what decoding needs), saved to ``out``."""
    import torch

    from onmt_entmax.analysis.checkpoint import load_checkpoint

    ckpt = load_checkpoint(checkpoint)
    ckpt.pop("optim", None)
    torch.save(ckpt, out)
    return out


def run_files(run_dir: Path, staging: Path, with_best: bool = False) -> list[tuple[Path, Path]]:
    """(file to send, its path relative to the run folder) for one run, as the module docstring says;
    ``with_best``: the best checkpoint (weights only) even when its test score is done (for analyses)."""
    if not (run_dir / "train.log").exists():
        raise CarryError(f"{run_dir}: no train.log (not a training run folder)")
    if (pid := trainer_of(run_dir)) is not None:  # its newest checkpoint may be half-written
        raise CarryError(f"{run_dir}: being trained now (process {pid}): pack it once its runner has stopped")
    files = [(run_dir / n, Path(n)) for n in ("train.log", "train.done", "scores.json") if (run_dir / n).exists()]
    if (run_dir / "train.done").exists():
        newest = None
    else:
        newest = latest_checkpoint(run_dir)
        if newest is not None:
            files.append((newest, Path(newest.name)))
    try:
        best = step_of(best_checkpoint((run_dir / "train.log").read_text(encoding="utf-8"))[0])
    except ValueError:  # no validation yet
        best = None
    wanted = with_best or best != scored_step(run_dir)
    if best is not None and wanted and (newest is None or step_of(newest) != best):
        source = run_dir / f"model_step_{best}.pt"
        older = scores_of(run_dir) or {}  # scores of this checkpoint from before evaluate recorded "decode"
        if not source.exists() and not with_best and older.get("step") == best and "decode" not in older:
            print(f"{source}: not here, and scored only with older decoding options: carried with those "
                  "scores (it cannot be decoded again)", file=sys.stderr)
            return files
        if not source.exists():
            raise CarryError(f"{source}: the best validated checkpoint is not scored in scores.json and not here "
                             "(evaluate the run where it was trained, then pack)")
        staging.mkdir(parents=True, exist_ok=True)
        files.append((weights_only_copy(source, staging / f"{len(os.listdir(staging))}.pt"), Path(source.name)))
    return files


def ensemble_files(ensemble_dir: Path) -> list[tuple[Path, Path]]:
    """(file to send, its path relative to the folder) for a decoded ensemble: its ``scores.json``."""
    if not (ensemble_dir / "scores.json").exists():
        raise CarryError(f"{ensemble_dir}: no scores.json (not a decoded ensemble)")
    return [(ensemble_dir / "scores.json", Path("scores.json"))]


def pack(run_dirs: list[Path], work: Path, out: Path, part_bytes: int = 15 * MIB, batch_files: int = 8,
         batch_bytes: int = 56 * MIB, with_best: bool = False, best_of: Collection[Path] = (),
         ensembles: Collection[Path] = ()) -> list[Path]:
    """Write the batches for ``run_dirs`` and ``ensembles`` (folders under ``work``) into ``out/batch-1``,
    ``batch-2``, ... (``with_best``: see ``run_files``; ``best_of``: the runs that carry their best checkpoint
    without it; an ensemble folder travels as one more run). The ensembles go first: a few KiB each, and what
    would be lost for good if the machine went before the last batch came back. Returns the batch folders."""
    if batch_files < 2 or part_bytes < 1 or part_bytes > batch_bytes - MANIFEST_ROOM:
        raise CarryError(f"a batch must hold the manifest and at least one part: --batch-files {batch_files} "
                         f"(at least 2), --part-mib {part_bytes / MIB:g} (at most --batch-mib {batch_bytes / MIB:g} "
                         f"less {MANIFEST_ROOM // 1024} KiB)")
    if not run_dirs and not ensembles:
        raise CarryError("no trained run selected (no train.log under the selected run folders)")
    blocking = blocking_file(out)  # (out itself, or a folder above it)
    if blocking is not None:
        raise CarryError(f"{out}: {blocking} is a file, not a folder")
    if out.is_dir() and any(out.iterdir()):
        raise CarryError(f"{out}: not empty (pack writes new batches only)")
    staging = Path(tempfile.mkdtemp(prefix="carry-"))
    try:
        runs, numbers = [], itertools.count()  # per run: its folder under work, manifest entries, files
        for folder in [*ensembles, *run_dirs]:  # (a file: source, size, number, its entry's part names, filled below)
            under, entries, files = folder.resolve().relative_to(work.resolve()), [], []
            sent = (ensemble_files(folder) if folder in ensembles
                    else run_files(folder, staging, with_best or folder in best_of))
            for source, rel in sent:
                entries.append({"path": (under / rel).as_posix(), "size": source.stat().st_size,
                                "sha256": sha256(source), "parts": []})
                files.append((source, entries[-1]["size"], next(numbers), entries[-1]["parts"]))
            runs.append((under.as_posix(), entries, files))
        room_files, room_bytes = batch_files - 1, batch_bytes - MANIFEST_ROOM  # the manifest's share
        batches, touching = [[]], [[]]  # the parts of each batch (name, source, offset, size); its runs
        for k, (_, _, files) in enumerate(runs):
            # a run that fits in one batch starts a batch of its own rather than be cut; one larger than a
            # batch is cut anyway, so its parts fill the room left (where a batch fills, the part ends)
            run_parts = sum(-(-size // part_bytes) or 1 for _, size, _, _ in files)  # cut at part_bytes
            run_bytes = sum(size for _, size, _, _ in files)
            fits_alone = run_parts <= room_files and run_bytes <= room_bytes
            fits_here = len(batches[-1]) + run_parts <= room_files and _bytes(batches[-1]) + run_bytes <= room_bytes
            if batches[-1] and fits_alone and not fits_here:
                batches.append([])
                touching.append([])
            for source, size, number, names in files:
                offset = 0
                while offset < size or not names:  # (an empty file: one empty part)
                    room = room_bytes - _bytes(batches[-1])
                    if len(batches[-1]) >= room_files or (room <= 0 and size > 0):
                        batches.append([])
                        touching.append([])
                        continue
                    names.append(f"f{number:04d}-p{len(names):03d}")
                    batches[-1].append((names[-1], source, offset, min(part_bytes, size - offset, room)))
                    offset += batches[-1][-1][3]
                    if touching[-1][-1:] != [k]:
                        touching[-1].append(k)
        # every manifest says where each run of the pack went (unpack names the lost ones) and lists the
        # runs with a part in its batch whole (a batch holding part of a run never passes for it)
        where = {run[0]: [i for i, t in enumerate(touching, 1) if k in t] for k, run in enumerate(runs)}
        folders, pack_id = [], uuid.uuid4().hex  # part names repeat across packs: the id keeps them apart
        for i, (batch, runs_here) in enumerate(zip(batches, touching), 1):
            folder = out / f"batch-{i}"
            folder.mkdir(parents=True)
            for name, source, offset, size in batch:
                with open(source, "rb") as f, open(folder / name, "wb") as g:
                    f.seek(offset)
                    g.write(f.read(size))
            manifest = {"format": FORMAT, "pack": pack_id, "batch": i, "batches": len(batches), "runs": where,
                        "files": [e for k in runs_here for e in runs[k][1]]}
            (folder / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
            folders.append(folder)
        return folders
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _bytes(parts: list) -> int:
    return sum(p[3] for p in parts)


def _pack_key(manifest: dict) -> str:
    """What tells one pack's batches from another's (part names repeat across packs): the pack's id,
    else the run-to-batches map that every batch of a format-2 pack repeats; format 1: ""."""
    if "pack" in manifest:
        return str(manifest["pack"])
    return json.dumps(manifest["runs"], sort_keys=True) if manifest.get("runs") else ""


def bad_entry_path(rel: str) -> str | None:
    """Why a manifest's file path cannot be unpacked (None: it can): it must name a file inside the work
    folder, relative, without ``..``, not empty, ``.`` or a folder (ending in ``/``), without a NUL."""
    if not isinstance(rel, str) or not rel:
        return "empty"
    if "\0" in rel:
        return "a name with a NUL byte"
    path = Path(rel)
    if path.is_absolute() or ".." in path.parts or not path.parts or rel.endswith("/"):
        return "not a file inside the work folder"
    return None


def read_manifest(path: Path) -> dict:
    """A batch's manifest, refused (``CarryError`` naming it) unless it is a JSON object of a format this
    script reads with a ``files`` list of {path, size, sha256, parts} entries whose paths name files
    inside the work folder (``bad_entry_path``)."""
    try:
        manifest = json.loads(path.read_bytes())
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise CarryError(f"{path}: not JSON ({err}): not a batch's manifest") from None
    if not isinstance(manifest, dict):
        raise CarryError(f"{path}: not a batch's manifest (a JSON object with format and files)")
    if manifest.get("format") not in FORMATS:
        raise CarryError(f"{path}: format {manifest.get('format')!r}, this script reads {FORMATS}")
    files = manifest.get("files")
    if not isinstance(files, list):
        raise CarryError(f"{path}: no 'files' list: not a batch's manifest")
    for entry in files:
        fields = isinstance(entry, dict) and isinstance(entry.get("size"), int) and \
            isinstance(entry.get("sha256"), str) and isinstance(entry.get("parts"), list) and \
            all(isinstance(n, str) for n in entry["parts"])
        if not fields:
            raise CarryError(f"{path}: a 'files' entry without path, size, sha256 and parts: {entry!r}")
        why = bad_entry_path(entry.get("path"))
        if why is not None:
            raise CarryError(f"{path}: the path {entry.get('path')!r} is {why}; nothing was unpacked")
    if not isinstance(manifest.get("runs", {}), dict):
        raise CarryError(f"{path}: 'runs' is not a map of run folders to batches")
    return manifest


def _find_parts(folders: list[Path]) -> tuple[list[tuple[dict, dict[str, Path]]], dict[str, list[int]]]:
    """The manifests' file entries, each with the parts of its own pack (name -> path), and where each
    run of the format-2 packs went. A part belongs to the pack whose manifest sits beside it (format 1:
    batches after the first have no manifest, their parts go with every format-1 entry)."""
    manifests, loose = [], {}  # (path, manifest); part name -> path, by folder
    for folder in folders:
        if not folder.is_dir():
            raise CarryError(f"{folder}: no such folder")
        for path in sorted(folder.rglob("*")):
            if path.name == MANIFEST:
                manifests.append((path, read_manifest(path)))
            elif path.is_file():
                loose.setdefault(path.parent, {})[path.name] = path
    if not manifests:
        raise CarryError(f"no {MANIFEST} in {', '.join(map(str, folders))}: every batch has one (format-1 packs: "
                         "batch-1 only)")
    key_of = {path.parent: _pack_key(manifest) for path, manifest in manifests}
    pools: dict[str, dict[str, Path]] = {}
    for parent, parts in loose.items():
        pool = pools.setdefault(key_of.get(parent, ""), {})
        for name, path in parts.items():
            pool.setdefault(name, path)
    candidates: dict[str, list[tuple[dict, dict[str, Path]]]] = {}  # a file's path -> (entry, its parts)
    runs: dict[str, list[int]] = {}
    for path, manifest in manifests:
        runs.update(manifest.get("runs", {}))
        pool = pools.setdefault(key_of[path.parent], {})
        for entry in manifest["files"]:
            same = candidates.setdefault(entry["path"], [])
            if same and same[0][0]["sha256"] != entry["sha256"]:
                raise CarryError(f"{path}: {entry['path']} differs from the same file in another "
                                 "manifest (batches of two packs mixed)")
            same.append((entry, pool))
    # the same file in two packs: the copy whose parts all came
    chosen = [next((c for c in same if all(n in c[1] for n in c[0]["parts"])), same[0])
              for same in candidates.values()]
    return chosen, runs


def _continues(entry: dict, pool: dict[str, Path], here: Path) -> bool:
    """Whether the carried file begins with every byte of the shorter file ``here`` (a train.log this
    machine last wrote, which the run's next piece extended elsewhere): replacing it loses nothing."""
    if here.stat().st_size >= entry["size"]:
        return False
    with open(here, "rb") as f:
        for name in entry["parts"]:
            part = pool[name].read_bytes()
            mine = f.read(len(part))
            if part[: len(mine)] != mine:
                return False
            if len(mine) < len(part):  # the file here ends inside this part
                return True
    return True


def unpack(folders: list[Path], work: Path) -> list[Path]:
    """Put the carried runs in place under ``work``: every run whose files all came (a run is unpacked
    whole or not at all; the others are named on stderr, and none complete is an error). Every file is
    joined and checked before any is put in place. Returns the files written (those already there with
    the same content are left as they are; one that the carried file continues, as a run's train.log
    after its next piece elsewhere, is replaced; any other is an error, and nothing is written)."""
    entries, packed = _find_parts(folders)
    by_run: dict[str, list[tuple[dict, dict[str, Path]]]] = {}
    for entry, pool in entries:
        by_run.setdefault(entry["path"].rsplit("/", 1)[0], []).append((entry, pool))
    complete, lost = [], []  # runs that came whole (their entries); a line for each other run
    for run in dict.fromkeys([*packed, *by_run]):  # packed: every run of a format-2 pack, even with no batch here
        files = by_run.get(run, [])
        lacking = [n for e, pool in files for n in e["parts"] if n not in pool]
        if files and not lacking:
            complete.append(files)
        elif run in packed:
            lost.append(f"{run} (batch {', '.join(map(str, packed[run]))})")
        else:  # format 1: no batch numbers
            lost.append(f"{run} ({len(lacking)} part(s), e.g. {lacking[0]})")
    if lost and not complete:
        raise CarryError(f"part(s) missing: no run came whole, e.g. {lost[0]}: unpack the batches of one pack "
                         "together")
    for run in lost:
        print(f"unpack: left out, its batch did not come: {run}", file=sys.stderr)
    plan = []
    for entry, pool in (f for files in complete for f in files):
        target = work / entry["path"]
        if target.is_dir():
            raise CarryError(f"{MANIFEST}: {entry['path']} is a folder under {work}, not a file it can carry")
        if not target.exists():
            plan.append((entry, pool, target))
        elif sha256(target) != entry["sha256"]:
            if not _continues(entry, pool, target):
                raise CarryError(f"{target}: exists with other content, not the start of the carried file; "
                                 "carried runs never write over a file (move it away first)")
            plan.append((entry, pool, target))  # a log that went on on the other machine: nothing here is lost
    joined = []  # (temporary file, target): all checked before the first is put in place
    try:
        for entry, pool, target in plan:
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(target.name + ".carry-tmp")
            joined.append((tmp, target))
            with open(tmp, "wb") as g:
                for name in entry["parts"]:
                    g.write(pool[name].read_bytes())
            if tmp.stat().st_size != entry["size"] or sha256(tmp) != entry["sha256"]:
                raise CarryError(f"{entry['path']}: the joined parts ({', '.join(entry['parts'])}) do not match "
                                 "the manifest's sha256 (a part was cut or changed on the way)")
    except BaseException:
        for tmp, _ in joined:
            tmp.unlink(missing_ok=True)
        raise
    for tmp, target in joined:
        tmp.replace(target)
    return [target for _, target in joined]
