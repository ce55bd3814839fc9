"""Loading and splitting: every data problem is one DataError line naming the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from skillgrad.envs.data import load_records, load_split_dir, split_by_ratio
from skillgrad.errors import ConfigError, DataError

ROWS = [{"id": "a", "x": 1}, {"id": "b", "x": 2}]


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


# ----------------------------------------------------------------------------- load_records


def test_json_list(tmp_path: Path) -> None:
    assert load_records(write(tmp_path / "d.json", json.dumps(ROWS))) == ROWS


@pytest.mark.parametrize("key", ["data", "items", "records", "examples"])
def test_json_object_with_one_list_key(tmp_path: Path, key: str) -> None:
    path = write(tmp_path / "d.json", json.dumps({"version": 2, key: ROWS}))
    assert load_records(path) == ROWS


def test_jsonl_with_blank_lines_and_bom(tmp_path: Path) -> None:
    text = "\ufeff" + json.dumps(ROWS[0]) + "\n\n  \n" + json.dumps(ROWS[1]) + "\n"
    assert load_records(write(tmp_path / "d.jsonl", text)) == ROWS


@pytest.mark.parametrize(
    ("name", "content", "fragment"),
    [
        ("empty.jsonl", "", "file is empty"),
        ("blank.json", "  \n\n", "file is empty"),
        ("latin1.jsonl", '{"q": "caf\xe9"}\n'.encode("latin-1"), "not valid UTF-8"),
        ("bad.jsonl", json.dumps(ROWS[0]) + "\n{oops\n", "line 2: invalid JSON"),
        ("bad.json", '[{"a": 1},', "invalid JSON at line 1"),
        ("lines.json", json.dumps(ROWS[0]) + "\n" + json.dumps(ROWS[1]), "name the file .jsonl"),
        ("scalar.json", "42", "top level is a number"),
        ("strings.json", '["a", "b"]', "record 1 is a string"),
        ("list.jsonl", "[1, 2]\n", "line 1: expected a JSON object, got a list"),
        ("nolist.json", '{"meta": 1}', "none of the list keys"),
        ("twolists.json", '{"data": [], "items": []}', "several of the list keys"),
        ("none.json", "[]", "contains no records"),
        ("data.csv", "a,b\n", "unsupported file type '.csv'"),
    ],
)
def test_load_errors_name_file_and_problem(
    tmp_path: Path, name: str, content: str | bytes, fragment: str
) -> None:
    path = write(tmp_path / name, content)
    with pytest.raises(DataError) as info:
        load_records(path)
    message = str(info.value)
    assert name in message and fragment in message
    assert "\n" not in message


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"nope\.jsonl: file not found"):
        load_records(tmp_path / "nope.jsonl")
    (tmp_path / "dir.json").mkdir()
    with pytest.raises(DataError, match=r"dir\.json: is a directory"):
        load_records(tmp_path / "dir.json")


# ----------------------------------------------------------------------------- split_by_ratio


def sizes(splits: dict) -> tuple[int, int, int]:
    return len(splits["train"]), len(splits["val"]), len(splits["test"])


def test_split_is_deterministic_and_seed_dependent() -> None:
    items = list(range(100))
    first = split_by_ratio(items, (0.6, 0.2, 0.2), seed=0)
    assert first == split_by_ratio(items, (0.6, 0.2, 0.2), seed=0)
    assert first != split_by_ratio(items, (0.6, 0.2, 0.2), seed=1)
    assert sizes(first) == (60, 20, 20)
    assert sorted(first["train"] + first["val"] + first["test"]) == items
    for part in first.values():
        assert part == sorted(part)  # original order kept within a split


def test_groups_never_cross_splits_and_ratio_is_respected() -> None:
    items = [{"i": i, "g": f"g{i % 25}" if i % 7 else None} for i in range(200)]
    for seed in range(5):
        splits = split_by_ratio(items, (0.5, 0.3, 0.2), seed, group_of=lambda it: it["g"])
        owner: dict[str, str] = {}
        for split, part in splits.items():
            for item in part:
                if item["g"] is not None:
                    assert owner.setdefault(item["g"], split) == split
        train, val, test = sizes(splits)
        assert train + val + test == 200
        assert abs(train - 100) <= 12 and abs(val - 60) <= 12 and abs(test - 40) <= 12


def test_zero_ratio_gives_empty_split() -> None:
    assert sizes(split_by_ratio(list(range(10)), (0.8, 0.2, 0.0), 3)) == (8, 2, 0)


@pytest.mark.parametrize(
    ("ratio", "fragment"),
    [((0.5, 0.2, 0.2), "sum to 1"), ((1.2, -0.1, -0.1), "non-negative"), ((0.5, 0.5), "three")],
)
def test_bad_ratio_rejected(ratio: tuple, fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment):
        split_by_ratio([1, 2, 3], ratio, 0)


# ----------------------------------------------------------------------------- load_split_dir


def test_split_dir_files_and_folders(tmp_path: Path) -> None:
    write(tmp_path / "train.jsonl", json.dumps({"id": "t1"}) + "\n" + json.dumps({"id": "t2"}))
    write(tmp_path / "val.json", json.dumps([{"id": "v1"}]))
    write(tmp_path / "test" / "b.jsonl", json.dumps({"id": "x2"}))
    write(tmp_path / "test" / "a.json", json.dumps([{"id": "x1"}]))
    write(tmp_path / "test" / "README.md", "not data")
    splits = load_split_dir(tmp_path)
    assert [r["id"] for r in splits["train"]] == ["t1", "t2"]
    assert [r["id"] for r in splits["val"]] == ["v1"]
    assert [r["id"] for r in splits["test"]] == ["x1", "x2"]


def test_split_dir_passes_each_file_to_loader(tmp_path: Path) -> None:
    for split in ("train", "val", "test"):
        write(tmp_path / f"{split}.jsonl", json.dumps({"id": split}))
    splits = load_split_dir(tmp_path, loader=lambda p: [p.name])
    assert splits == {"train": ["train.jsonl"], "val": ["val.jsonl"], "test": ["test.jsonl"]}


def test_split_dir_errors(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="split directory not found"):
        load_split_dir(tmp_path / "absent")
    write(tmp_path / "train.jsonl", json.dumps({"id": "t"}))
    write(tmp_path / "test.jsonl", json.dumps({"id": "x"}))
    with pytest.raises(DataError, match=r"no val split found \(looked for val\.json, val\.jsonl"):
        load_split_dir(tmp_path)
    (tmp_path / "val").mkdir()
    with pytest.raises(DataError, match="val split folder has no .json or .jsonl files"):
        load_split_dir(tmp_path)
    write(tmp_path / "val.json", "[]")
    with pytest.raises(DataError, match="val split is ambiguous"):
        load_split_dir(tmp_path)
    (tmp_path / "val").rmdir()
    with pytest.raises(DataError, match=r"val\.json: file contains no records"):
        load_split_dir(tmp_path)
    write(tmp_path / "val.json", json.dumps([{"id": "v"}]))
    with pytest.raises(DataError, match=r"test\.jsonl: split 'test' is empty"):
        load_split_dir(tmp_path, loader=lambda p: [] if p.stem == "test" else [p])
