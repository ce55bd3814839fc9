"""Loading and splitting task data (the data loader of the training loop).

Every environment reads its records through :func:`load_records` and divides them with
:func:`split_by_ratio` or :func:`load_split_dir`, so that every data problem a user can cause
(a missing file, bad JSON, an empty split) surfaces as one :class:`~skillgrad.errors.DataError`
line that names the file and the problem.

Accepted file formats (by suffix, case-insensitive):

* ``.jsonl`` / ``.ndjson``: one JSON object per line; blank lines are skipped.
* ``.json``: either a list of objects, or an object holding that list under exactly one of the
  keys ``data``, ``items``, ``records`` or ``examples``.

A UTF-8 byte-order mark is tolerated; any other encoding is rejected. A JSONL file is read a
line at a time (:func:`iter_located_records`, :func:`iter_parsed`), so loading a large data
set never holds its text, or all its raw records, at once.
(Over the house limit of ~400 lines: every environment reads its data files through these
functions, and the one set of refusals (file, line, key) stays in one module.)
"""

from __future__ import annotations

import codecs
import json
import logging
import math
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Any, BinaryIO, ClassVar, Generic, TypeVar, cast

from skillgrad.envs.base import SPLITS, EnvCommon, EnvOptions, Split
from skillgrad.errors import ConfigError, DataError
from skillgrad.package import read_skill

log = logging.getLogger(__name__)

T = TypeVar("T")

JSON_SUFFIXES = (".json",)
JSONL_SUFFIXES = (".jsonl", ".ndjson")
DATA_SUFFIXES = JSON_SUFFIXES + JSONL_SUFFIXES
CONTAINER_KEYS = ("data", "items", "records", "examples")


# ----------------------------------------------------------------------------- loading


def load_records(path: Path) -> list[dict[str, Any]]:
    """Read a JSON or JSONL file of objects; raise :class:`DataError` naming the file otherwise.

    The result is never empty: a file with no records is an error.
    """
    return [record for _, record in iter_located_records(path)]


def located_records(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """:func:`load_records` with where each record is, as every data error names it:
    ``"<file>: line 5"`` in a JSONL file, ``"<file>: record 3"`` (1-based) in a JSON list."""
    return list(iter_located_records(path))


def iter_located_records(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """:func:`located_records` one record at a time. A JSONL file is read a line at a time (a
    JSON file is one document, read whole). Its errors are those of reading the whole file
    first, in the same order: a file that cannot be read or decoded, then an empty one, then
    its first bad line; records are yielded before an error further on is found, so a caller
    that keeps them discards them when the error comes."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in DATA_SUFFIXES:
        raise DataError(
            f"{path}: unsupported file type {suffix or '(none)'!r}; expected .json or .jsonl"
        )
    if suffix in JSONL_SUFFIXES:
        yield from _stream_jsonl(path)
        return
    text = _read_text(path)
    if not text.strip():
        raise DataError(f"{path}: file is empty")
    records = _parse_json(path, text)
    if not records:
        raise DataError(f"{path}: file contains no records")
    yield from records


def parse_records(path: Path, parse: Callable[[dict[str, Any], str], T]) -> list[T]:
    """The records of ``path``, each made by ``parse(raw, where)`` as it is read (which raises
    :class:`DataError` for a bad one): :func:`iter_parsed`, kept."""
    return list(iter_parsed(path, parse))


def iter_parsed(path: Path, parse: Callable[[dict[str, Any], str], T]) -> Iterator[T]:
    """The records of ``path`` made by ``parse(raw, where)``, one at a time, so the raw records
    are never all held at once. The first error raised is the one :func:`located_records`
    followed by ``parse`` would raise: one of the file's own before any record's (after a bad
    record the rest of the file is still read, for its errors); a caller that keeps what was
    yielded discards it when the error comes."""
    refused: DataError | None = None
    for where, raw in iter_located_records(path):
        if refused is not None:
            continue
        try:
            parsed = parse(raw, where)
        except DataError as exc:
            refused = exc
            continue
        yield parsed
    if refused is not None:
        raise refused


@contextmanager
def data_file_errors(path: Path, expected: str) -> Iterator[None]:
    """Reading ``path`` inside the block: a missing, unreadable or folder path is one
    DataError naming it and what was ``expected`` there (e.g. "a JSON file")."""
    try:
        yield
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise DataError(f"{path}: is a directory, expected {expected}") from None
    except OSError as exc:
        raise DataError(f"{path}: cannot read file ({exc.strerror or exc})") from None


def read_data_bytes(path: Path, expected: str) -> bytes:
    """The bytes of a data file (the errors of :func:`data_file_errors`)."""
    with data_file_errors(path, expected):
        return path.read_bytes()


def _read_text(path: Path) -> str:
    raw = read_data_bytes(path, "a .json or .jsonl file")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not valid UTF-8 (bad byte at offset {exc.start})") from None


def _stream_jsonl(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """The records of a JSONL file as it is read; lines are numbered as ``str.splitlines`` of
    the whole text numbers them."""
    bad: DataError | None = None
    found = False
    with _open_data(path) as fh:
        lines = _decoded_lines(path, fh)
        for lineno, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            found = True
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                bad = DataError(
                    f"{path}: line {lineno}: invalid JSON ({exc.msg} at column {exc.colno})")
                break
            except RecursionError:
                bad = DataError(f"{path}: line {lineno}: JSON nested too deeply to read")
                break
            if not isinstance(obj, dict):
                bad = DataError(f"{path}: line {lineno}: expected a JSON object, got {_kind(obj)}")
                break
            yield f"{path}: line {lineno}", obj
        for _ in lines:  # a byte further on that is not UTF-8 is the error to report
            pass
    if bad is not None:
        raise bad
    if not found:
        raise DataError(f"{path}: file is empty")


def _open_data(path: Path) -> BinaryIO:
    """``path`` opened for reading bytes (the errors of :func:`data_file_errors`)."""
    with data_file_errors(path, "a .json or .jsonl file"):
        return path.open("rb")


def _decoded_lines(path: Path, fh: BinaryIO) -> Iterator[str]:
    """The lines of the UTF-8 text of ``fh`` (a byte-order mark dropped), read a line at a
    time. Split at each newline byte first (never part of a multi-byte character), then as
    ``str.splitlines`` splits, they are the lines of the whole text; a bad byte's offset is
    counted after the mark, as decoding the whole text with ``utf-8-sig`` counts it."""
    offset = 0
    for n, chunk in enumerate(fh):
        if n == 0 and chunk.startswith(codecs.BOM_UTF8):
            chunk = chunk[len(codecs.BOM_UTF8):]
        try:
            text = chunk.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DataError(f"{path}: not valid UTF-8 (bad byte at offset {offset + exc.start})"
                            ) from None
        offset += len(chunk)
        yield from text.splitlines()


def _parse_json(path: Path, text: str) -> list[tuple[str, dict[str, Any]]]:
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        hint = " (one object per line? name the file .jsonl)" if exc.msg == "Extra data" else ""
        raise DataError(
            f"{path}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}{hint}"
        ) from None
    except RecursionError:
        raise DataError(f"{path}: JSON nested too deeply to read") from None
    if isinstance(obj, dict):
        found = [k for k in CONTAINER_KEYS if isinstance(obj.get(k), list)]
        if len(found) != 1:
            keys = ", ".join(repr(k) for k in CONTAINER_KEYS)
            problem = "several of" if found else "none of"
            raise DataError(
                f"{path}: top level is an object with {problem} the list keys {keys}; "
                "expected a list of objects or an object with exactly one of those keys"
            )
        obj = obj[found[0]]
    if not isinstance(obj, list):
        raise DataError(f"{path}: top level is {_kind(obj)}; expected a list of objects")
    for n, item in enumerate(obj, 1):
        if not isinstance(item, dict):
            raise DataError(f"{path}: record {n} is {_kind(item)}; expected an object")
    return [(f"{path}: record {n}", item) for n, item in enumerate(obj, 1)]


def _kind(obj: Any) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}
    if obj is None:
        return "null"
    if isinstance(obj, (int, float)) and not isinstance(obj, bool):
        return "a number"
    return names.get(type(obj), type(obj).__name__)


# ----------------------------------------------------------------------------- splits


def split_by_ratio(
    items: Sequence[T],
    ratio: Sequence[float],
    seed: int,
    group_of: Callable[[T], str | None] | None = None,
) -> dict[Split, list[T]]:
    """Divide ``items`` into train / val / test by ``ratio``, deterministically for ``seed``.

    Items with the same ``group_of`` key always land in the same split (an item whose key is
    ``None`` is a group of its own). The groups are shuffled with ``random.Random(seed)``, laid
    end to end, and cut at the ratio boundaries; a group goes to the split where its middle
    falls, so split sizes follow the ratio as closely as whole groups allow. Within a split the
    items keep their original order.

    Raises :class:`~skillgrad.errors.ConfigError` for a ratio that is not three non-negative
    numbers summing to 1 (it comes from ``env.split_ratio``). A split may come out empty;
    :func:`require_nonempty` turns that into a :class:`DataError` naming the source.
    """
    fractions = _check_ratio(ratio)
    units: dict[tuple[str, Any], list[int]] = {}
    for index, item in enumerate(items):
        key = group_of(item) if group_of is not None else None
        units.setdefault(("item", index) if key is None else ("group", key), []).append(index)
    order = list(units.values())  # insertion order: first appearance, so stable before shuffling
    random.Random(seed).shuffle(order)

    total = len(items)
    cut_train = fractions[0] * total
    cut_val = (fractions[0] + fractions[1]) * total
    chosen: dict[Split, list[int]] = {split: [] for split in SPLITS}
    start = 0
    for indices in order:
        middle = start + len(indices) / 2
        split: Split = "train" if middle < cut_train else "val" if middle < cut_val else "test"
        chosen[split].extend(indices)
        start += len(indices)
    return {split: [items[i] for i in sorted(chosen[split])] for split in SPLITS}


def _check_ratio(ratio: Sequence[float]) -> tuple[float, float, float]:
    shown = "/".join(str(r) for r in ratio)
    if len(ratio) != 3:
        raise ConfigError(f"env.split_ratio {shown}: expected three numbers (train, val, test)")
    values = tuple(float(r) for r in ratio)
    if any(not math.isfinite(v) or v < 0 for v in values):
        raise ConfigError(f"env.split_ratio {shown}: every part must be a non-negative number")
    if abs(sum(values) - 1.0) > 1e-6:
        raise ConfigError(
            f"env.split_ratio {shown}: parts must sum to 1 (they sum to {sum(values):g})"
        )
    return values  # type: ignore[return-value]


def load_split_dir(
    split_dir: Path,
    loader: Callable[[Path], list[T]] = load_records,  # type: ignore[assignment]
) -> dict[Split, list[T]]:
    """Load a directory holding one file or folder per split.

    For each of ``train``, ``val`` and ``test`` it looks for ``<split>.json``,
    ``<split>.jsonl`` or ``<split>.ndjson``, or a folder ``<split>/`` whose ``.json`` /
    ``.jsonl`` files (not recursive, by name order) are concatenated. ``loader`` reads one file
    (default :func:`load_records`); an environment passes one that also validates its records,
    so errors name the file they come from. A missing, ambiguous or empty split raises
    :class:`DataError`.
    """
    split_dir = Path(split_dir)
    if not split_dir.is_dir():
        raise DataError(f"{split_dir}: split directory not found")
    files_of = {split: _split_files(split_dir, split) for split in SPLITS}
    out: dict[Split, list[T]] = {
        split: [record for file in files_of[split] for record in loader(file)] for split in SPLITS
    }
    require_nonempty(out, {s: ", ".join(str(f) for f in files_of[s]) for s in SPLITS})
    return out


def _split_files(split_dir: Path, split: Split) -> list[Path]:
    candidates = [split_dir / f"{split}{suffix}" for suffix in DATA_SUFFIXES]
    files = [p for p in candidates if p.is_file()]
    folder = split_dir / split
    if folder.is_dir():
        files.append(folder)
    if not files:
        looked = ", ".join(p.name for p in candidates) + f" or {split}/"
        raise DataError(f"{split_dir}: no {split} split found (looked for {looked})")
    if len(files) > 1:
        shown = ", ".join(p.name + ("/" if p.is_dir() else "") for p in files)
        raise DataError(f"{split_dir}: {split} split is ambiguous ({shown}); keep only one")
    if files[0].is_file():
        return files
    inner = sorted(
        p
        for p in folder.iterdir()
        if p.is_file() and not p.name.startswith(".") and p.suffix.lower() in DATA_SUFFIXES
    )
    if not inner:
        raise DataError(f"{folder}: {split} split folder has no .json or .jsonl files")
    return inner


def require_nonempty(
    splits: Mapping[Split, Sequence[Any]], source: str | Mapping[Split, str], hint: str = ""
) -> None:
    """Raise :class:`DataError` naming the split and its source when any split is empty."""
    for split in SPLITS:
        if not splits.get(split):
            where = source if isinstance(source, str) else source.get(split, "?")
            raise DataError(f"{where}: split {split!r} is empty" + (f" ({hint})" if hint else ""))


def resolve_path(path: Path, base_dir: Path) -> Path:
    """``path`` as written in a config: relative paths are relative to the config's folder."""
    path = Path(path).expanduser()
    return path if path.is_absolute() else Path(base_dir) / path


def skill_file(common: EnvCommon, base_dir: Path) -> Path | None:
    """The skill file ``env.skill_init`` names (relative to the config's folder), if any."""
    return resolve_path(common.skill_init, base_dir) if common.skill_init else None


def load_splits(
    common: EnvCommon,
    data_path: Path | None,
    base_dir: Path,
    loader: Callable[[Path], list[T]],
    group_of: Callable[[T], str | None] | None = None,
) -> dict[Split, list[T]]:
    """The three splits an environment's config asks for.

    ``split_mode: ratio`` reads ``data_path`` with ``loader`` and splits it with
    :func:`split_by_ratio` (seeded; records of one ``group_of`` group never cross splits, so
    the gate is not fooled by near-duplicates); ``split_mode: split_dir`` reads the folder with
    :func:`load_split_dir`. An empty split is a :class:`DataError` naming the file.
    """
    if common.split_mode == "split_dir":
        if common.split_dir is None:
            raise ConfigError("env.split_dir is required when env.split_mode is 'split_dir'")
        if data_path is not None:
            raise ConfigError(
                "env.data_path is not used when env.split_mode is 'split_dir'; remove it "
                "or set env.split_mode to 'ratio'"
            )
        folder = resolve_path(common.split_dir, base_dir)
        loaded = load_split_dir(folder, loader)
        if group_of is not None:
            warn_shared_groups(loaded, group_of, folder)
        return loaded
    if data_path is None:
        raise ConfigError("env.data_path is required when env.split_mode is 'ratio'")
    path = resolve_path(data_path, base_dir)
    records = loader(path)
    splits = split_by_ratio(records, common.split_ratio, common.split_seed, group_of)
    ratio = "/".join(f"{r:g}" for r in common.split_ratio)
    counted = f"{len(records)} records"
    if group_of is not None:
        keys = [group_of(r) for r in records]
        grouped = {k for k in keys if k is not None}
        if grouped:  # whole groups are split, so their number is what limits the splits
            units = len(grouped) + sum(k is None for k in keys)
            counted += f" in {units} group{'s' * (units != 1)} (a group stays in one split)"
    require_nonempty(
        splits,
        str(path),
        hint=f"{counted}; env.split_ratio {ratio}, env.split_seed "
        f"{common.split_seed}; add records or change the ratio",
    )
    return splits


def warn_shared_groups(
    splits: Mapping[Split, Sequence[T]], group_of: Callable[[T], str | None], source: Path
) -> None:
    """Warn when splits the user made share a group (an article, a document, a template): the
    gate's and the test's scores then partly measure what training saw. Not an error:
    published splits sometimes share groups on purpose."""
    keys = {s: {k for k in map(group_of, splits[s]) if k is not None} for s in SPLITS}
    pairs: tuple[tuple[Split, Split], ...] = (("train", "val"), ("train", "test"), ("val", "test"))
    for a, b in pairs:
        common = sorted(keys[a] & keys[b])
        if common:
            shown = ", ".join(common[:3]) + (f" and {len(common) - 3} more" if len(common) > 3
                                             else "")
            log.warning("%s: the %s and %s splits share %d group%s (%s); their scores are not "
                        "independent", source, a, b, len(common), "s" * (len(common) != 1), shown)


OptionsT = TypeVar("OptionsT", bound=EnvOptions)


def shipped_skill(package: str) -> str:
    """The skill an environment package ships: the ``skill.md`` file of ``package``."""
    return resources.files(package).joinpath("skill.md").read_text("utf-8")


def package_file(package: str, *parts: str) -> Path:
    """A data file an environment package ships, e.g. ``package_file(__package__, "data",
    "games.jsonl")``, as a path (the package is installed as files, never zipped)."""
    found = resources.files(package)
    for part in parts:
        found = found.joinpath(part)
    return Path(str(found))


class SplitTasksMixin(Generic[OptionsT]):
    """Construction, ``tasks`` and ``initial_skill`` of an environment whose tasks are loaded
    up front: it holds its splits, its options and an optional skill file (``skill_path``);
    without one, the skill is the ``skill.md`` its package ``SKILL_PACKAGE`` ships. An
    environment with more state takes it in its own ``__init__`` and passes the rest on."""

    SKILL_PACKAGE: ClassVar[str]
    Options: ClassVar[type[EnvOptions]]

    def __init__(self, splits: Mapping[Split, Sequence[Any]], options: OptionsT | None = None,
                 skill_path: Path | None = None) -> None:
        self._splits: dict[Split, list[Any]] = {s: list(splits.get(s, ())) for s in SPLITS}
        self.options: OptionsT = options if options is not None else cast(
            "OptionsT", self.Options())
        self.skill_path = skill_path

    def tasks(self, split: Split) -> list[Any]:
        if split not in SPLITS:
            raise ValueError(f"unknown split {split!r}; expected one of {', '.join(SPLITS)}")
        return list(self._splits[split])

    def initial_skill(self) -> str:
        if self.skill_path is not None:
            return read_skill(self.skill_path)
        return shipped_skill(self.SKILL_PACKAGE)
