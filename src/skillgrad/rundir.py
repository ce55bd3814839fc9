"""The run directory: the one module that owns every path and every write of a run.

Layout::

    RUN/
      config.yaml          resolved config, secrets redacted
      checkpoint.json      trainer state, replaced atomically after every step
      events.jsonl         append-only event log, one JSON object per line
      skills/<hash>.md     every skill version, content-addressed
      skills/<hash>.json   a skill package's version: its files' paths and content hashes,
                           each file once in skills/files/<hash> (an unchanged file costs
                           nothing)
      best_skill.md        the deployable artifact
      current_skill.md     the skill training would continue from
      init/  final/        evaluation scopes: rollouts and model calls
      run.json             the marker: the config fingerprint and the skillgrad version
      run.lock             held (flock) by the process training into the directory; its PID
      steps/e01-s001/      rollouts, patches, merged patch, ranked edits, candidate,
                           apply report, screened proposals (screen.json) and what the
                           target answered with each (screened.jsonl), an agent skill's new
                           description (trigger.json), gate decision and its second look
                           (second_look.jsonl), model calls (calls.jsonl)
      epochs/e02/          start-of-epoch work: task pairs, meta skill, slow update, calls
      meta_skill.md        the optimizer's notes (never shown to the target)
      evals/<split>-<hash>/rollouts.jsonl   every evaluation's results; the checkpoint keeps
                           their per-task scores only for the current and the best skill
      summary.json
      tracking.json        the experiment trackers' run ids (what a resumed run continues)
      tensorboard/<run>/   TensorBoard's event files (tracking.tensorboard without a log_dir)

The file names inside a step or epoch folder are those of :class:`WorkDir`; nothing else
names a file of a run. Every file except the logs is written to a temporary name and renamed
into place, so a run killed at any instant leaves either the old or the new version, never
half of one; such a write names the file it was writing when it fails. (Over the house limit
of ~400 lines: every path, write and lock of a run stays in this one module.)
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import json
import os
import time
from collections.abc import Iterable, Iterator
from contextvars import ContextVar
from pathlib import Path
from typing import IO, Any

import yaml
from pydantic import BaseModel

from skillgrad.errors import RunDirError
from skillgrad.files import atomic_write_text, naming_error
from skillgrad.package import MAIN, is_package, join_package, split_package
from skillgrad.skill import skill_hash

SCHEMA_VERSION = 1
TOO_DEEP = "nested too deeply to read"  # JSON past the recursion limit
CALLS = "calls.jsonl"  # a scope's model-call journal (what --replay reads)
ROLLOUTS = "rollouts.jsonl"
EVAL_SUMMARY = "eval_summary.json"  # written by ``skillgrad eval``
RECORD, GATE = "record.json", "gate.json"  # a step's record and its gate decision
# A step's rollouts besides its batch, by the part of the step that ran them: the screen's
# (each candidate's, the current skill's on a tie's extra tasks) and the gate's second look's.
# Each line is a rollout with the hash of the skill it ran and whose that skill is.
LABELLED = {"screen": "screened.jsonl", "second look": "second_look.jsonl"}
LOCK = "run.lock"
_HELD: set[Path] = set()  # run directories this process holds: taking one again is a no-op
_CONFINED: ContextVar[tuple[str, ...]] = ContextVar("skillgrad_confined_reads", default=())


@contextlib.contextmanager
def confined_reads(root: Path, *more: Path) -> Iterator[None]:
    """Within it, the reads of this module take a run's file only where it really lies (its
    links followed) inside ``root`` (or one of ``more``); another is a :class:`RunDirError`
    naming it. A run directory someone else wrote may hold a link to a file of whoever reads
    it (a key under ``~/.ssh``): what shows runs to others (the dashboard) reads them in
    here."""
    token = _CONFINED.set(tuple(os.path.realpath(r) for r in (root, *more)))
    try:
        yield
    finally:
        _CONFINED.reset(token)


def inside(path: Path, root: Path) -> bool:
    """Whether ``path``, its links followed, lies in ``root`` (its links followed too)."""
    return Path(os.path.realpath(path)).is_relative_to(os.path.realpath(root))


def _readable(path: Path) -> Path:
    """``path``, unless :func:`confined_reads` is in force and it lies outside its roots."""
    roots = _CONFINED.get()
    if roots and not any(inside(path, Path(root)) for root in roots):
        raise RunDirError(f"{path}: links to a file outside the run directory; not read")
    return path


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, BaseModel):
        return obj.model_dump(mode="json")
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return _jsonable(dataclasses.asdict(obj))
    if isinstance(obj, (list, tuple)):
        return [_jsonable(o) for o in obj]
    if isinstance(obj, dict):
        return {k: _jsonable(v) for k, v in obj.items()}
    return obj


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Objects of a JSON-lines file; a half-written last line (a killed writer) is skipped."""
    if not path.exists():
        return []
    out = []
    for line in _readable(path).read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except (json.JSONDecodeError, RecursionError):  # RecursionError: nested too deeply
            continue
    return out


def read_text(path: Path) -> str | None:
    """A text file of a run (None when it is not there)."""
    try:
        return _readable(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return None


def read_json(path: Path) -> Any:
    """A JSON file of a run (None when it is not there)."""
    try:
        text = _readable(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise RunDirError(f"{path}: not valid JSON (line {exc.lineno})") from None
    except RecursionError:
        raise RunDirError(f"{path}: not valid JSON ({TOO_DEEP})") from None


class WorkDir:
    """One folder of a run's work (a step, the start of an epoch, an evaluation scope) and the
    names of the files in it. ``artifact`` takes the stage artifacts a candidate was made
    from, by kind."""

    ARTIFACTS = {
        "merged_patch": "merged_patch.json",
        "ranked_edits": "ranked_edits.json",
        "ranked_suggestions": "ranked_suggestions.json",
        "apply_report": "apply_report.json",
        "rewrite": "rewrite.json",
        "rewrites": "rewrites.json",
        "appendix": "appendix.json",
        "screen": "screen.json",
        "trigger": "trigger.json",
    }

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    @property
    def calls_path(self) -> Path:
        return self.path / CALLS

    @property
    def rollouts_path(self) -> Path:
        return self.path / ROLLOUTS

    def rollouts(self, results: Iterable[Any]) -> None:
        write_jsonl(self.rollouts_path, results)

    def patches(self, patches: Any) -> None:
        write_json(self.path / "patches.json", patches)

    def artifact(self, kind: str, data: Any) -> None:
        if kind not in self.ARTIFACTS:
            raise ValueError(f"unknown step artifact {kind!r}")
        write_json(self.path / self.ARTIFACTS[kind], data)

    def candidate(self, text: str) -> None:
        atomic_write_text(self.path / "candidate.md", text)

    def gate(self, decision: Any) -> None:
        write_json(self.path / GATE, decision)

    def labelled(self, part: str, runs: Iterable[tuple[str, str, Iterable[Any]]]) -> None:
        """The rollouts ``part`` of the step ran (a key of :data:`LABELLED`), as (the skill's
        hash, whose it is: "proposal 2", "current skill", ...; the results), one line per
        rollout with the two in front."""
        write_jsonl(self.path / LABELLED[part], ({"skill": digest, "role": role, **_jsonable(r)}
                                                 for digest, role, results in runs
                                                 for r in results))

    def record(self, record: Any) -> None:
        write_json(self.path / RECORD, record)

    def pairs(self, rows: Iterable[Any]) -> None:
        write_jsonl(self.path / "pairs.jsonl", rows)

    def meta_skill(self, text: str) -> None:
        atomic_write_text(self.path / "meta_skill.md", text)

    def epoch_update(self, update: Any) -> None:
        write_json(self.path / "epoch_update.json", update)

    def eval_summary(self, summary: Any) -> None:
        write_json(self.path / EVAL_SUMMARY, summary)

    # Read back (None: the folder has no such file, the step did not get that far).
    def read_rollouts(self) -> list[dict[str, Any]]:
        return read_jsonl(self.rollouts_path)

    def read_record(self) -> Any:
        return read_json(self.path / RECORD)

    def read_gate(self) -> Any:
        return read_json(self.path / GATE)

    def read_artifact(self, kind: str) -> Any:
        if kind not in self.ARTIFACTS:
            raise ValueError(f"unknown step artifact {kind!r}")
        return read_json(self.path / self.ARTIFACTS[kind])


def write_json(path: Path, data: Any) -> None:
    atomic_write_text(path, json.dumps(_jsonable(data), indent=2, ensure_ascii=False) + "\n")


def write_jsonl(path: Path, rows: Iterable[Any]) -> None:
    atomic_write_text(path, "".join(json.dumps(_jsonable(r), ensure_ascii=False) + "\n"
                                    for r in rows))


class RunDir:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    # ------------------------------------------------------------------ paths
    @property
    def config_path(self) -> Path:
        return self.root / "config.yaml"

    @property
    def checkpoint_path(self) -> Path:
        return self.root / "checkpoint.json"

    @property
    def events_path(self) -> Path:
        return self.root / "events.jsonl"

    @property
    def summary_path(self) -> Path:
        return self.root / "summary.json"

    @property
    def tracking_path(self) -> Path:
        return self.root / "tracking.json"

    @property
    def tensorboard_folder(self) -> Path:
        """The TensorBoard log folder a run writes when ``tracking.tensorboard`` names none
        (``tensorboard --logdir`` it); the tracker makes it once the directory is claimed."""
        return self.root / "tensorboard"

    @property
    def best_skill_path(self) -> Path:
        return self.root / "best_skill.md"

    @property
    def current_skill_path(self) -> Path:
        return self.root / "current_skill.md"

    def skill_path(self, digest: str) -> Path:
        return self.root / "skills" / f"{digest[:16]}.md"

    @property
    def marker_path(self) -> Path:
        return self.root / "run.json"

    @property
    def lock_path(self) -> Path:
        return self.root / LOCK

    def step_dir(self, epoch: int, step: int) -> WorkDir:
        """The folder of 1-based ``step`` of 1-based ``epoch``."""
        return WorkDir(self.steps_folder / f"e{epoch:02d}-s{step:03d}")

    @property
    def steps_folder(self) -> Path:
        """The folder of the step folders."""
        return self.root / "steps"

    @property
    def epochs_folder(self) -> Path:
        """The folder of the start-of-epoch folders."""
        return self.root / "epochs"

    def step_dirs(self) -> list[WorkDir]:
        """The folders of the steps that have started, in the order they ran."""
        base = self.steps_folder
        return sorted((WorkDir(p) for p in base.iterdir() if p.is_dir()),
                      key=lambda w: w.path.name) if base.is_dir() else []

    def epoch_dir(self, epoch: int) -> WorkDir:
        """The folder of the work done before 1-based ``epoch`` started."""
        return WorkDir(self.epochs_folder / f"e{epoch:02d}")

    @property
    def meta_skill_path(self) -> Path:
        return self.root / "meta_skill.md"

    def scope_dir(self, name: str) -> WorkDir:
        """An evaluation scope (``init``, ``final``): its rollouts and model calls."""
        return WorkDir(self.root / name)

    def eval_dir(self, split: str, digest: str) -> WorkDir:
        return WorkDir(self.root / "evals" / f"{split}-{digest[:16]}")

    def eval_per_task(self, split: str, digest: str) -> dict[str, tuple[float, float]]:
        """The per-task (hard, soft) of skill ``digest``'s evaluation on ``split``, in the
        order its rollouts were written: what its score was made from. Read a line at a time
        (the rollouts hold whole conversations)."""
        path = self.eval_dir(split, digest).rollouts_path
        out: dict[str, tuple[float, float]] = {}
        try:
            with _readable(path).open(encoding="utf-8") as fh:
                for line in fh:
                    row = json.loads(line)
                    out[row["task_id"]] = (row["hard"], row["soft"])
        except FileNotFoundError:
            raise RunDirError(f"{path}: evaluation results missing from the run directory "
                              "(the checkpoint keeps only their means)") from None
        except (ValueError, KeyError, TypeError, RecursionError):
            raise RunDirError(f"{path}: evaluation results are not readable") from None
        return out

    # ------------------------------------------------------------------ writes
    def write_text(self, path: Path, text: str) -> None:
        atomic_write_text(path, text)

    def write_json(self, path: Path, data: Any) -> None:
        write_json(path, data)

    def write_jsonl(self, path: Path, rows: Iterable[Any]) -> None:
        write_jsonl(path, rows)

    def event(self, kind: str, **data: Any) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        line = json.dumps({"time": round(time.time(), 3), "event": kind, **_jsonable(data)},
                          ensure_ascii=False)
        try:
            with self.events_path.open("a", encoding="utf-8") as fh:
                fh.write(line + "\n")
        except OSError as exc:
            raise naming_error(exc, self.events_path) from exc

    def events(self) -> list[dict[str, Any]]:
        return read_jsonl(self.events_path)

    def package_path(self, digest: str) -> Path:
        return self.root / "skills" / f"{digest[:16]}.json"

    def package_file_path(self, digest: str) -> Path:
        return self.root / "skills" / "files" / digest[:16]

    def save_skill(self, text: str) -> str:
        digest = skill_hash(text)
        if is_package(text):  # the manifest last: a version is there once its files are
            manifest = self.package_path(digest)
            if not manifest.exists():
                files = {}
                for path in (package := split_package(text)).paths:
                    body = package.file(path) or ""
                    files[path] = skill_hash(body)[:16]
                    if not self.package_file_path(files[path]).exists():
                        atomic_write_text(self.package_file_path(files[path]), body)
                self.write_json(manifest, {"files": files})
            return digest
        single = self.skill_path(digest)
        if not single.exists():
            atomic_write_text(single, text)
        return digest

    def load_skill(self, digest: str) -> str:
        path = self.skill_path(digest)
        manifest = self.package_path(digest)
        try:
            if not path.exists() and manifest.exists():
                return self._load_package(digest)
            text = _readable(path).read_text(encoding="utf-8")
        except FileNotFoundError:
            raise RunDirError(f"{path}: skill version missing from the run directory") from None
        if not skill_hash(text).startswith(digest):
            raise RunDirError(f"{path}: skill file was modified (content hash differs)")
        return text

    def stored_skills(self) -> list[str]:
        """The hashes (16 characters) of the skill versions stored in the run directory."""
        folder = self.root / "skills"
        return sorted({p.stem for p in [*folder.glob("*.md"), *folder.glob("*.json")]})

    def _load_package(self, digest: str) -> str:
        manifest = self.package_path(digest)
        data = read_json(manifest)
        files = data.get("files") if isinstance(data, dict) else None
        if not isinstance(files, dict) or MAIN not in files:
            raise RunDirError(f"{manifest}: not a skill package's manifest (it was modified)")
        bodies = {}
        for path, blob in files.items():
            target = self.package_file_path(str(blob))
            body = _readable(target).read_text(encoding="utf-8")
            if not skill_hash(body).startswith(str(blob)):
                raise RunDirError(f"{target}: a skill package's file was modified (content "
                                  "hash differs)")
            bodies[path] = body
        text = join_package(bodies.pop(MAIN), bodies)
        if not skill_hash(text).startswith(digest):
            raise RunDirError(f"{manifest}: skill package was modified (content hash differs)")
        return text

    # ------------------------------------------------------------------ checkpoint
    def save_checkpoint(self, state: BaseModel) -> None:
        self.write_json(self.checkpoint_path, state)

    def load_checkpoint_data(self) -> dict[str, Any] | None:
        """The checkpoint's JSON (``None``: there is none). One that cannot be read (a link
        that loops, or leads nowhere) is refused, never taken for a missing one: a run would
        start again over it."""
        path = self.checkpoint_path
        try:
            data = json.loads(_readable(path).read_bytes().decode("utf-8"))
        except FileNotFoundError:
            if path.is_symlink():
                raise RunDirError(f"{path}: checkpoint is a link to nothing") from None
            return None
        except OSError as exc:
            raise RunDirError(f"{path}: checkpoint cannot be read ({exc.strerror})") from None
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise RunDirError(f"{path}: checkpoint is not valid JSON") from None
        except RecursionError:
            raise RunDirError(f"{path}: checkpoint is not valid JSON ({TOO_DEEP})") from None
        if not isinstance(data, dict) or data.get("schema_version") != SCHEMA_VERSION:
            raise RunDirError(f"{path}: checkpoint schema version is not {SCHEMA_VERSION}")
        return data

    def exists(self) -> bool:
        return os.path.lexists(self.checkpoint_path)

    def require_checkpoint(self) -> dict[str, Any]:
        """The checkpoint's data, or a refusal that says what the folder is instead."""
        data = self.load_checkpoint_data()
        if data is not None:
            return data
        if self.marker_path.exists():
            raise RunDirError(
                f"{self.root}: a skillgrad run directory with no checkpoint yet (its run stopped "
                "before the first one); train into it with its config to start it again")
        if self.root.is_file():
            raise RunDirError(f"{self.root}: is a file, not a skillgrad run directory")
        if not self.root.exists():
            raise RunDirError(f"{self.root}: no such folder, so not a skillgrad run directory")
        self._refuse_foreign()
        raise RunDirError(f"{self.root}: not a skillgrad run directory (it is empty)")

    # ------------------------------------------------------------------ the marker
    def previous_fingerprint(self) -> str | None:
        """The config fingerprint an earlier start wrote (``None`` for a new directory);
        refuses a folder that holds other things."""
        if self.marker_path.exists():
            data = read_json(self.marker_path)
            if not isinstance(data, dict):
                raise RunDirError(f"{self.marker_path}: not the marker of a skillgrad run")
            return data.get("fingerprint")
        if self.root.exists():
            self._refuse_foreign()
        return None

    def _refuse_foreign(self) -> None:
        """Refuse a folder that holds things other than a run (a lock alone is a run's)."""
        if self.marker_path.exists() or self.checkpoint_path.exists():
            return
        entries = [p for p in self.root.iterdir() if p.name != LOCK]
        if entries:
            runs = sorted(p.name for p in entries
                          if p.is_dir() and (p / self.marker_path.name).exists())
            inside = (f" (the runs inside it: {', '.join(runs[:6])}"
                      f"{', …' if len(runs) > 6 else ''})" if runs else "")
            raise RunDirError(f"{self.root}: exists, is not empty and is not a skillgrad run "
                              f"directory{inside}")

    def write_marker(self, fingerprint: str, version: str) -> None:
        self.write_json(self.marker_path, {"fingerprint": fingerprint, "skillgrad": version})

    def read_summary(self) -> dict[str, Any]:
        return json.loads(_readable(self.summary_path).read_text(encoding="utf-8"))  # type: ignore[no-any-return]

    def read_tracking(self) -> dict[str, Any]:
        """What ``tracking.json`` holds per tracker (its run id, the steps it has): ``{}``
        when there is none, or it is unreadable (the trackers then start new runs)."""
        try:
            data = json.loads(_readable(self.tracking_path).read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            return {}
        return data if isinstance(data, dict) else {}

    def read_config(self) -> Any:
        """The resolved config the run directory holds (``None`` when it is unreadable)."""
        try:
            return yaml.safe_load(_readable(self.config_path).read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError, RecursionError):
            return None

    # ------------------------------------------------------------------ the lock
    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the run directory while a process writes it: another process is refused at
        once, with the holder's PID. The lock is an ``flock``, which the kernel drops when its
        holder dies, so the lock file a killed run leaves behind blocks nothing. A directory
        made here that holds only the lock at the end (a start that failed before writing
        anything) is removed again. Taken again by the process that holds it (the command line
        around ``Trainer.fit``, which takes it too), it is held already."""
        key = Path(os.path.realpath(self.root))  # never raises, even on a loop of links
        if key in _HELD:
            yield
            return
        made = self._check_writable()
        fh = self._acquire()
        _HELD.add(key)
        try:
            yield
        finally:
            _HELD.discard(key)
            if made and [p.name for p in self.root.iterdir()] == [LOCK]:
                # Removed while still held, so that no other start can lock a file that is gone.
                self.lock_path.unlink()
                with contextlib.suppress(OSError):  # another start has just made it its own
                    self.root.rmdir()
            fh.close()

    def _check_writable(self) -> bool:
        """Refuse a root a run cannot live in, before anything is written; make it, and say
        whether it was made here."""
        try:
            os.stat(self.root)
        except OSError as exc:  # missing, or below a file: made (or refused) below
            if exc.errno == errno.ELOOP:
                raise RunDirError(f"{self.root}: cannot be the run directory "
                                  f"({exc.strerror})") from exc
        if self.root.exists() and not self.root.is_dir():
            raise RunDirError(f"{self.root}: is a file, not a run directory; give --out a "
                              "folder (new, or a run directory to resume)")
        if not self.root.exists():
            try:
                self.root.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise RunDirError(f"{exc.filename or self.root}: cannot create the run "
                                  f"directory ({exc.strerror})") from exc
            return True
        self._refuse_foreign()
        if not os.access(self.root, os.W_OK | os.X_OK):
            raise RunDirError(f"{self.root}: the run directory is not writable; make it "
                              "writable, or give another --out")
        return False

    def _acquire(self) -> IO[str]:
        """The open, locked lock file, with this process's PID in it."""
        while True:
            try:
                self.root.mkdir(parents=True, exist_ok=True)
                fh = os.fdopen(os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644), "r+",
                               encoding="utf-8")
            except OSError as exc:
                raise RunDirError(f"{self.lock_path}: cannot create the lock file "
                                  f"({exc.strerror})") from exc
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = fh.read().strip() or "unknown"
                fh.close()
                raise RunDirError(
                    f"{self.root}: in use by another skillgrad process (PID {holder}); wait "
                    "for it to end, or stop it and run again to resume") from None
            except OSError as exc:  # a file system without locks
                fh.close()
                raise RunDirError(f"{self.lock_path}: cannot be locked ({exc.strerror})") from exc
            if self._still_named(fh):
                break
            fh.close()  # its holder removed it as we opened it: lock the file there now
        try:
            fh.truncate()
            fh.write(f"{os.getpid()}\n")
            fh.flush()
        except OSError as exc:
            fh.close()
            raise RunDirError(f"{self.lock_path}: cannot write the lock file "
                              f"({exc.strerror})") from exc
        return fh

    def _still_named(self, fh: IO[str]) -> bool:
        try:
            return os.stat(self.lock_path).st_ino == os.fstat(fh.fileno()).st_ino
        except FileNotFoundError:
            return False
