"""The built-in qa environment: loading, tasks, rollout and scoring."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from skillgrad.envs.base import EnvCommon, Environment
from skillgrad.envs.qa import QAEnvironment, QAOptions
from skillgrad.envs.scoring import normalize_answer
from skillgrad.errors import ConfigError, DataError, TransientModelError
from skillgrad.models.messages import ChatRequest, Completion, Usage
from skillgrad.models.scripted import ScriptedModel
from skillgrad.records import Task

QUICKSTART = Path(__file__).resolve().parents[1] / "examples" / "quickstart"
CAPITAL = Task(
    id="fr", prompt="Question: What is the capital of France?", reference={"answers": ["Paris"]}
)


def records(n: int = 10) -> list[dict]:
    return [
        {
            "id": f"r{i}",
            "question": f"What is item {i}?",
            "answer": [f"item {i}", f"#{i}"],
            "group": f"g{i // 2}",
        }
        for i in range(n)
    ]


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def env_with(**options) -> QAEnvironment:
    return QAEnvironment(
        {"train": [CAPITAL], "val": [CAPITAL], "test": [CAPITAL]}, QAOptions(**options)
    )


# ----------------------------------------------------------------------------- loading


def test_create_resolves_relative_path_and_splits(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "qa.jsonl", records(10))
    common = EnvCommon(split_ratio=(0.6, 0.2, 0.2), split_seed=0)
    env = QAEnvironment.create(common, QAOptions(data_path=Path("qa.jsonl")), base_dir=tmp_path)
    assert isinstance(env, Environment)
    parts = {s: env.tasks(s) for s in ("train", "val", "test")}
    assert [len(p) for p in parts.values()] == [6, 2, 2]
    ids = [t.id for p in parts.values() for t in p]
    assert sorted(ids) == sorted(f"r{i}" for i in range(10))
    groups = {s: {t.group for t in p} for s, p in parts.items()}
    assert not (groups["train"] & groups["val"]) and not (groups["val"] & groups["test"])
    task = parts["train"][0]
    assert task.prompt.startswith("Question: What is item")
    assert task.reference == {"answers": [f"item {task.id[1:]}", f"#{task.id[1:]}"]}
    # tasks() hands out a copy; the environment is not mutated by callers
    env.tasks("train").clear()
    assert len(env.tasks("train")) == 6


def test_context_prompt_default_id_and_cut(tmp_path: Path) -> None:
    rows = [{"question": "Who?", "answer": "Ann", "context": "Ann wrote it. " * 10}] + [
        {"question": f"Q{i}?", "answer": "x"} for i in range(9)
    ]
    write_jsonl(tmp_path / "qa.jsonl", rows)
    env = QAEnvironment.create(
        EnvCommon(split_ratio=(0.4, 0.3, 0.3)),
        QAOptions(data_path=tmp_path / "qa.jsonl", context_chars=20),
        tmp_path,
    )
    task = next(t for s in ("train", "val", "test") for t in env.tasks(s) if "Who?" in t.prompt)
    assert task.prompt.startswith(
        "Context:\nAnn wrote it. Ann wr\n[context cut to its first 20 of 140"
    )
    assert task.prompt.endswith("\n\nQuestion: Who?")
    assert len(task.id) == 12 and int(task.id, 16) >= 0


def test_split_dir_mode(tmp_path: Path) -> None:
    rows = records(6)
    for split, part in (("train", rows[:3]), ("val", rows[3:5]), ("test", rows[5:])):
        write_jsonl(tmp_path / f"{split}.jsonl", part)
    common = EnvCommon(split_mode="split_dir", split_dir=Path("."))
    env = QAEnvironment.create(common, QAOptions(), tmp_path)
    assert [t.id for t in env.tasks("val")] == ["r3", "r4"]
    write_jsonl(tmp_path / "test.jsonl", [rows[0]])  # the same id in train and test
    with pytest.raises(DataError, match=r"test\.jsonl: line 1: key 'id' 'r0' duplicates"):
        QAEnvironment.create(common, QAOptions(), tmp_path)


def test_split_dir_groups_shared_across_splits_are_warned_about(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    rows = records(6)  # groups g0 = r0, r1; g1 = r2, r3; g2 = r4, r5
    for split, part in (("train", rows[:3]), ("val", rows[3:4]), ("test", rows[4:])):
        write_jsonl(tmp_path / f"{split}.jsonl", part)
    common = EnvCommon(split_mode="split_dir", split_dir=Path("."))
    with caplog.at_level("WARNING"):
        env = QAEnvironment.create(common, QAOptions(), tmp_path)
    assert len(env.tasks("val")) == 1  # a warning, not a refusal
    assert [r.getMessage().split(": ", 1)[1] for r in caplog.records] == [
        "the train and val splits share 1 group (g1); their scores are not independent"]
    caplog.clear()
    write_jsonl(tmp_path / "val.jsonl", [{**rows[3], "group": "g9"}])
    with caplog.at_level("WARNING"):
        QAEnvironment.create(common, QAOptions(), tmp_path)
    assert not caplog.records


def test_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="env.data_path is required"):
        QAEnvironment.create(EnvCommon(), QAOptions(), tmp_path)
    with pytest.raises(ConfigError, match="env.split_dir is required"):
        QAEnvironment.create(EnvCommon(split_mode="split_dir"), QAOptions(), tmp_path)
    with pytest.raises(ValueError):
        QAOptions(unknown_key=1)


def test_empty_split_names_split_and_file(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "tiny.jsonl", records(2))
    with pytest.raises(DataError, match=r"tiny\.jsonl: split '\w+' is empty \(2 records in 1 "
                       r"group \(a group stays in one split\); env.split_ratio 0.6/0.2/0.2"):
        QAEnvironment.create(EnvCommon(), QAOptions(data_path=tmp_path / "tiny.jsonl"), tmp_path)
    # enough records, too few groups: the message says which of the two is short
    write_jsonl(tmp_path / "few.jsonl", [{**r, "group": f"g{i % 2}"}
                                         for i, r in enumerate(records(10))])
    with pytest.raises(DataError, match=r"is empty \(10 records in 2 groups"):
        QAEnvironment.create(EnvCommon(), QAOptions(data_path=tmp_path / "few.jsonl"), tmp_path)


@pytest.mark.parametrize(
    ("bad", "fragment"),
    [
        ({"answer": "x"}, "line 4: key 'question' must be a non-empty string (missing)"),
        ({"question": "q"}, "line 4: missing key 'answer'"),
        ({"question": "q", "answers": ["x"]}, "found 'answers'"),
        ({"question": "q", "answer": []}, "line 4: key 'answer' must be"),
        ({"question": "q", "answer": 1987}, "key 'answer' must be a non-empty string or"),
        ({"question": "q", "answer": ["ok", 3]}, "key 'answer'"),
        ({"question": "q", "answer": "x", "context": 5}, "key 'context' must be"),
        ({"question": "q", "answer": "x", "group": ["g"]}, "key 'group' must be"),
        ({"question": "q", "answer": "x", "id": ""}, "key 'id' must be"),
        ({"id": "r0", "question": "q", "answer": "x"}, "line 4: key 'id' 'r0' duplicates"),
        ({"id": "again", "question": "What is item 0?", "answer": "y"},
         "line 4: keys 'question' and 'context' repeat those of"),
    ],
)
def test_bad_records_name_file_index_and_key(tmp_path: Path, bad: dict, fragment: str) -> None:
    path = write_jsonl(tmp_path / "bad.jsonl", records(3) + [bad] + records(10)[3:])
    with pytest.raises(DataError) as info:
        QAEnvironment.create(EnvCommon(), QAOptions(data_path=path), tmp_path)
    assert "bad.jsonl: " in str(info.value) and fragment in str(info.value)


# ----------------------------------------------------------------------------- initial skill


def test_initial_skill_default_and_file(tmp_path: Path) -> None:
    default = env_with().initial_skill()
    assert "Answer:" in default and len(default.splitlines()) < 15
    write_jsonl(tmp_path / "qa.jsonl", records(10))
    (tmp_path / "skill.md").write_text("# My skill\nBe brief.\n", encoding="utf-8")
    common = EnvCommon(skill_init=Path("skill.md"))
    env = QAEnvironment.create(common, QAOptions(data_path=Path("qa.jsonl")), tmp_path)
    assert env.initial_skill() == "# My skill\nBe brief.\n"


def test_non_utf8_or_missing_skill_file_is_data_error(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "qa.jsonl", records(10))
    (tmp_path / "skill.md").write_bytes("r\xe8gle".encode("latin-1"))
    for name, fragment in (("skill.md", "not valid UTF-8"), ("gone.md", "skill file not found")):
        env = QAEnvironment.create(
            EnvCommon(skill_init=Path(name)), QAOptions(data_path=Path("qa.jsonl")), tmp_path
        )
        with pytest.raises(DataError, match=rf"{name}: .*{fragment}"):
            env.initial_skill()


# ----------------------------------------------------------------------------- rollout


def test_rollout_correct_answer_and_skill_is_system_message() -> None:
    model = ScriptedModel(rules=[{"when": "capital of France", "reply": "Answer: Paris"}])
    result = env_with(max_tokens=32, temperature=0.3).rollout(CAPITAL, "SKILL TEXT", model)
    assert (result.hard, result.soft, result.reason, result.answer) == (1.0, 1.0, "", "Paris")
    assert result.success and result.turns == 1 and result.task_id == "fr"
    request = model.calls[0]
    assert request.messages[0].role == "system" and request.messages[0].content == "SKILL TEXT"
    assert request.messages[1].content == CAPITAL.prompt
    assert (request.max_tokens, request.temperature) == (32, 0.3)
    assert [m.role for m in result.messages] == ["system", "user", "assistant"]
    assert result.messages[2].content == "Answer: Paris"
    assert result.usage.completion_tokens > 0


def test_rollout_wrong_answer_is_scored_not_raised() -> None:
    model = ScriptedModel(["The capital is Paris, France."])
    result = env_with().rollout(CAPITAL, "skill", model)
    assert result.hard == 0.0 and 0.0 < result.soft < 1.0
    assert "does not match gold 'Paris'" in result.reason and "token F1" in result.reason
    wrong = env_with().rollout(CAPITAL, "skill", ScriptedModel(["Answer: Lyon"]))
    assert (wrong.hard, wrong.soft) == (0.0, 0.0)
    assert wrong.reason == "answer 'Lyon' does not match gold 'Paris'"


def test_rollout_empty_and_truncated() -> None:
    empty = env_with().rollout(CAPITAL, "skill", ScriptedModel(["  "]))
    assert empty.hard == 0.0 and empty.reason.startswith("empty answer")
    cut = Completion(
        text="Let me think about the history of",
        finish_reason="length",
        usage=Usage(prompt_tokens=5, completion_tokens=64),
    )
    result = env_with().rollout(CAPITAL, "skill", ScriptedModel([cut]))
    assert result.hard == 0.0 and "cut off at the token limit (max_tokens=64)" in result.reason
    assert result.usage == Usage(prompt_tokens=5, completion_tokens=64)


def test_model_errors_propagate() -> None:
    class Down:
        def complete(self, request: ChatRequest) -> Completion:
            raise TransientModelError("endpoint down")

    with pytest.raises(TransientModelError, match="endpoint down"):
        env_with().rollout(CAPITAL, "skill", Down())


# ----------------------------------------------------------------------------- quickstart


def test_quickstart_data_loads_splits_and_is_reproducible() -> None:
    common = EnvCommon(skill_init=Path("initial_skill.md"))
    env = QAEnvironment.create(common, QAOptions(data_path=Path("data.jsonl")), QUICKSTART)
    counts = [len(env.tasks(s)) for s in ("train", "val", "test")]
    assert counts == [36, 12, 12]
    assert "| train | 36 | 9 |" in (QUICKSTART / "DATA_CARD.md").read_text(encoding="utf-8")
    assert env.initial_skill().startswith("# Reading comprehension")
    # every gold answer is checkable against its context
    for split in ("train", "val", "test"):
        for task in env.tasks(split):
            context = task.prompt.split("\n\nQuestion:")[0]
            spans = normalize_answer(context)
            assert any(
                normalize_answer(a) in spans or a in ("yes", "no")
                for a in task.reference["answers"]
            )

    spec = importlib.util.spec_from_file_location("make_data", QUICKSTART / "make_data.py")
    assert spec is not None and spec.loader is not None
    make_data = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_data)
    regenerated = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in make_data.build())
    assert regenerated == (QUICKSTART / "data.jsonl").read_text(encoding="utf-8")
