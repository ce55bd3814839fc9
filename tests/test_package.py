"""Skill packages: an Agent Skills folder carried as one text through training."""

from __future__ import annotations

import difflib
import json
import re
import signal
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import toy
from conftest import toy_config
from e2e import cli

from skillgrad.config import load_config
from skillgrad.errors import DataError, RunDirError
from skillgrad.package import (
    MAIN,
    file_marker,
    is_package,
    join_package,
    package_diff,
    read_folder,
    read_skill,
    split_package,
    write_folder,
)
from skillgrad.records import Edit
from skillgrad.rundir import RunDir
from skillgrad.skill import skill_hash
from skillgrad.stages.update import apply_edits
from skillgrad.testing import scripted_optimizer
from skillgrad.trainer import build_trainer

SKILL = "---\nname: dates\ndescription: Formats dates. Use when asked for a date.\n---\n" \
        "# Dates\n\nRead references/format.md before you answer.\n"
FORMAT = "# Format\n\nWrite dates as YYYY-MM-DD.\n"


def make_folder(root: Path) -> Path:
    folder = root / "dates"
    (folder / "references").mkdir(parents=True)
    (folder / "scripts").mkdir()
    (folder / MAIN).write_text(SKILL)
    (folder / "references" / "format.md").write_text(FORMAT)
    (folder / "scripts" / "check.py").write_text("print('ok')")  # no final newline
    (folder / ".git").mkdir()
    (folder / ".git" / "HEAD").write_text("ref: x\n")
    (folder / "__pycache__").mkdir()
    (folder / "__pycache__" / "check.cpython-311.pyc").write_bytes(b"\x00\x01")
    return folder


def test_a_folder_reads_as_one_text_and_writes_back_byte_for_byte(tmp_path: Path) -> None:
    folder = make_folder(tmp_path)
    text = read_folder(folder)
    package = split_package(text)
    assert package.main == SKILL
    assert dict(package.files) == {"references/format.md": FORMAT,
                                   "scripts/check.py": "print('ok')"}
    assert text.index(file_marker("references/format.md")) < text.index(
        file_marker("scripts/check.py"))
    assert join_package(package.main, package.files) == text
    out = tmp_path / "out"
    write_folder(text, out)
    for rel in ("SKILL.md", "references/format.md", "scripts/check.py"):
        assert (out / rel).read_bytes() == (folder / rel).read_bytes(), rel
    assert not (out / ".git").exists() and not (out / "__pycache__").exists()
    assert read_folder(out) == text
    assert (folder / MAIN).read_text() == SKILL  # only read, never changed


def test_a_single_file_skill_is_a_package_of_one_file_with_the_same_hash(tmp_path: Path) -> None:
    path = tmp_path / "skill.md"
    path.write_text(SKILL)
    assert read_skill(path) == SKILL and not is_package(SKILL)
    folder = tmp_path / "one"
    folder.mkdir()
    (folder / MAIN).write_text(SKILL)
    assert read_skill(folder) == SKILL  # the same text, so the same hash and the same replays
    assert skill_hash(read_skill(folder)) == skill_hash(SKILL)
    package = split_package(SKILL)
    assert package.main == SKILL and not package.files


def test_the_hash_covers_paths_and_contents() -> None:
    base = join_package(SKILL, {"references/format.md": FORMAT})
    moved = join_package(SKILL, {"references/formats.md": FORMAT})
    changed = join_package(SKILL, {"references/format.md": FORMAT + "More.\n"})
    assert len({skill_hash(base), skill_hash(moved), skill_hash(changed)}) == 3


@pytest.mark.parametrize(("make", "message"), [
    (lambda f: (f / MAIN).unlink(), "a skill folder holds SKILL.md, and this one does not"),
    (lambda f: (f / "assets").mkdir() or (f / "assets" / "logo.png").write_bytes(b"\x89PNG\x00"),
     "logo.png: a binary file"),
    (lambda f: (f / "references" / "bad.md").write_bytes(b"caf\xe9"), "not valid UTF-8"),
    (lambda f: (f / "references" / "x.md").write_text("a\n<!-- skillgrad:file y.md -->\n"),
     "x.md: it holds a line skillgrad uses to join"),
    (lambda f: (f / "references" / "link.md").symlink_to(f / MAIN), "link.md: a skill package"),
    (lambda f: (f / "references" / "a b.md").write_text("x"), "each part of a path"),
])
def test_a_folder_that_cannot_be_trained_is_refused_naming_the_file(tmp_path: Path, make,  # type: ignore[no-untyped-def]
                                                                    message: str) -> None:
    folder = make_folder(tmp_path)
    make(folder)
    with pytest.raises(DataError, match=message.replace("(", r"\(").replace(".", r"\.")):
        read_folder(folder)


def test_a_package_text_with_a_bad_path_or_a_file_twice_is_refused() -> None:
    with pytest.raises(DataError, match="twice"):
        split_package(f"x\n{file_marker('a.md')}\n1\n{file_marker('a.md')}\n2")
    with pytest.raises(DataError, match="plain relative path"):
        split_package(f"x\n{file_marker('../a.md')}\n1")
    with pytest.raises(DataError, match="main file"):
        join_package("x", {MAIN: "y"})


def test_edits_land_inside_one_file_of_a_package() -> None:
    text = join_package(SKILL, {"references/format.md": FORMAT})
    new, report = apply_edits(text, [
        Edit(op="replace", anchor="Write dates as YYYY-MM-DD.",
             content="Write dates as YYYY-MM-DD, with leading zeros."),
        Edit(op="append", content="- Answer with the date only."),
        Edit(op="insert_after", anchor="# Format", content="Dates in the question may differ."),
    ])
    assert [o.status for o in report.outcomes] == ["applied", "applied", "applied"]
    package = split_package(new)
    assert package.main.endswith("Read references/format.md before you answer.\n\n"
                                 "- Answer with the date only.\n")  # an append: SKILL.md
    assert package.files["references/format.md"] == (
        "# Format\nDates in the question may differ.\n\nWrite dates as YYYY-MM-DD, with "
        "leading zeros.\n")


def test_an_edit_creates_or_removes_a_file_and_never_crosses_a_file_line() -> None:
    text = join_package(SKILL, {"references/format.md": FORMAT})
    new, report = apply_edits(text, [
        Edit(op="append", file="references/examples.md", content="# Examples\n\n2024-01-05"),
        Edit(op="delete", file="references/format.md"),
        Edit(op="replace", file="references/none.md", anchor="x", content="y"),
        Edit(op="append", file="../outside.md", content="z"),
        Edit(op="append", content=f"{file_marker('evil.md')}\nsneaked in"),
    ])
    assert [o.status for o in report.outcomes] == [
        "applied", "applied", "skipped", "skipped", "applied"]
    assert report.outcomes[2].reason == "no file references/none.md in the skill package"
    assert "plain relative path" in (report.outcomes[3].reason or "")
    package = split_package(new)
    assert dict(package.files) == {"references/examples.md": "# Examples\n\n2024-01-05\n"}
    assert "<!- - skillgrad:file evil.md -->" in package.main  # no new file from content
    # An anchor spanning the line between two files is found in neither, and skipped.
    _, report = apply_edits(text, [Edit(op="delete", anchor="before you answer.\n"
                                        + file_marker("references/format.md"))])
    assert report.outcomes[0].status == "skipped"


def test_a_single_file_skill_s_edits_are_unchanged() -> None:
    edits = [Edit(op="append", content="- Be brief."),
             Edit(op="replace", anchor="# Dates", content="# Dates and times")]
    new, report = apply_edits(SKILL, edits)
    assert not is_package(new) and new.endswith("- Be brief.\n")
    assert "file" not in report.outcomes[0].edit.model_dump()  # records read as before


# ----------------------------------------------------------------------------- end to end

RULES = "# Rules\n\nAnswer with the value the context gives.\n"


def _into_rules(skill: str, tasks: str, prompt: str) -> dict[str, Any]:
    """The toy optimizer, but each rule goes under "# Rules", which only the reference holds."""
    failing = Counter(re.findall(r"What is the (\w+) of", tasks))
    for topic, count in sorted(failing.items(), key=lambda kv: (-kv[1], kv[0])):
        if toy.rule(topic) not in skill:
            return {"reasoning": f"{topic} answers carry extra words",
                    "edits": [{"op": "insert_after", "anchor": "# Rules",
                               "content": toy.rule(topic), "support": count}]}
    return {"reasoning": "no pattern", "edits": []}


package_optimizer = scripted_optimizer(_into_rules)


def test_a_skill_folder_trains_replays_and_exports_as_a_folder(tmp_path: Path) -> None:
    """``env.skill_init`` names a folder: it is read, never changed, trained as one package
    (the rules land in its reference file), replayed to the same skills, and exported as an
    Agent Skills folder with its reference."""
    cfg = toy_config(tmp_path, model={"optimizer": {"backend": "scripted",
                                                    "function": "test_package:package_optimizer"}},
                     env={"skill_init": "toy-skill"})
    folder = tmp_path / "toy-skill"
    (folder / "references").mkdir(parents=True)
    main = ("---\nname: toy-skill\ndescription: Answers questions about items. Use for item "
            "questions.\n---\n" + toy.INITIAL_SKILL + "\nThe rules are in references/rules.md.\n")
    (folder / MAIN).write_text(main)
    (folder / "references" / "rules.md").write_text(RULES)
    before = {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}

    summary = build_trainer(load_config(cfg), tmp_path / "run").fit()
    assert summary["test"]["best"]["hard"] > summary["test"]["initial"]["hard"]
    best = (tmp_path / "run" / "best_skill.md").read_text()
    package = split_package(best)
    assert package.main == main  # the body was not the edits' target
    assert toy.rule("year") in package.files["references/rules.md"]
    assert {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()} == before

    stored = tmp_path / "run" / "skills"
    assert not list(stored.glob("*.md"))  # each version is a manifest of its files' hashes
    manifests = [json.loads(p.read_text()) for p in stored.glob("*.json")]
    assert len(manifests) >= 2
    assert len({m["files"]["SKILL.md"] for m in manifests}) == 1  # SKILL.md never changed...
    blobs = list((stored / "files").iterdir())
    assert len(blobs) == len({h for m in manifests for h in m["files"].values()})  # ...stored once

    replayed = tmp_path / "replayed"
    again = build_trainer(load_config(cfg), replayed, replay=tmp_path / "run").fit()
    assert again["test"] == summary["test"]
    assert (replayed / "best_skill.md").read_text() == best
    assert sorted(p.name for p in (replayed / "skills").iterdir()) == sorted(
        p.name for p in (tmp_path / "run" / "skills").iterdir())

    proc = cli("export", str(tmp_path / "run"), "--format", "skill-folder", "--out",
               str(tmp_path / "exported"))
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "exported" / "toy-skill"
    assert (out / "references" / "rules.md").read_text() == package.files["references/rules.md"]
    assert read_folder(out).endswith(package.files["references/rules.md"])
    assert "skillgrad:file" not in (out / MAIN).read_text()

    blob = next((stored / "files").iterdir())
    blob.write_text(blob.read_text() + "tampered\n")
    version = next(p.stem for p in stored.glob("*.json") if blob.name in p.read_text())
    with pytest.raises(RunDirError, match="a skill package's file was modified"):
        RunDir(tmp_path / "run").load_skill(version)
    blob.write_text(blob.read_text().removesuffix("tampered\n"))

    proc = cli("diff", str(tmp_path / "run"))
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"--- initial \(\w+\): references/rules.md\n\+\+\+ best, step \d \(\w+\): "
                     r"references/rules.md\n", proc.stdout), proc.stdout
    assert f"+{toy.rule('year')}" in proc.stdout and "skillgrad:file" not in proc.stdout
    assert "SKILL.md" not in proc.stdout  # an unchanged file shows nothing


def test_a_package_diff_names_each_file_and_a_single_file_diff_is_as_before() -> None:
    a = join_package(SKILL, {"references/format.md": FORMAT, "references/old.md": "x\n"})
    b = join_package(SKILL + "- New.\n", {"references/format.md": FORMAT,
                                           "references/new.md": "y\n"})
    lines = package_diff(a, b, "initial", "best")
    assert lines[:2] == ["--- initial: SKILL.md", "+++ best: SKILL.md"]
    assert "--- initial: references/old.md" in lines and "+++ /dev/null" in lines
    assert "--- /dev/null" in lines and "+++ best: references/new.md" in lines
    assert not any(line.startswith(("---", "+++")) and "format.md" in line for line in lines)
    assert package_diff(SKILL, SKILL + "- New.\n", "a", "b") == list(difflib.unified_diff(
        SKILL.splitlines(), (SKILL + "- New.\n").splitlines(), "a", "b", lineterm=""))



def _new_reference(skill: str, tasks: str, prompt: str) -> dict[str, Any]:
    """An analyst that starts a reference file for the first failing topic."""
    failing = Counter(re.findall(r"What is the (\w+) of", tasks))
    for topic, count in sorted(failing.items(), key=lambda kv: (-kv[1], kv[0])):
        if toy.rule(topic) not in skill:
            return {"reasoning": "no file holds the rule",
                    "edits": [{"op": "append", "anchor": "", "content": toy.rule(topic),
                               "support": count, "file": f"references/{topic}.md"}]}
    return {"reasoning": "no pattern", "edits": []}


reference_optimizer = scripted_optimizer(_new_reference)
seen: list[dict[str, Any]] = []


def test_an_analyst_of_a_package_is_told_of_its_files_and_may_start_a_reference(
        tmp_path: Path) -> None:
    """The analyst's reply may name a file, the grammar's anchors leave out the file lines,
    and a rule appended to a new path becomes a new reference file of the package."""
    from skillgrad.models.scripted import ScriptedModel
    from skillgrad.stages.reflect import PACKAGE_NOTE, ReflectSettings, analyse

    skill = join_package(toy.INITIAL_SKILL, {"references/rules.md": RULES})
    calls: list[Any] = []

    def reply(request: Any) -> Any:
        calls.append(request)
        return reference_optimizer(request)

    failed = [toy_result("What is the year of item 1?", "Answer: 1901 probably")]
    patch = analyse("failure", failed, skill, ScriptedModel(fn=reply), ReflectSettings(),
                    "", 0)
    prompt = calls[0].messages[-1].text()
    assert PACKAGE_NOTE.strip() in prompt
    schema = calls[0].json_schema
    edit = schema["$defs"]["PackageEditReply"]
    assert "file" in edit["required"]
    assert not any("skillgrad:file" in a for a in edit["properties"]["anchor"]["enum"])
    assert [(e.op, e.file) for e in patch.edits] == [("append", "references/year.md")]
    new, report = apply_edits(skill, patch.edits)
    assert report.outcomes[0].status == "applied"
    assert split_package(new).files["references/year.md"] == toy.rule("year") + "\n"

    # A single-file skill's analyst is asked exactly as before: no file key, no note.
    calls.clear()
    analyse("failure", failed, toy.INITIAL_SKILL, ScriptedModel(fn=reply), ReflectSettings(),
            "", 0)
    assert "PackageEditReply" not in str(calls[0].json_schema)
    assert PACKAGE_NOTE.strip() not in calls[0].messages[-1].text()


def toy_result(question: str, answer: str) -> Any:
    from skillgrad.models.messages import Message
    from skillgrad.records import RolloutResult

    return RolloutResult(task_id="t1", answer=answer, hard=0.0, soft=0.0, reason="extra words",
                         messages=(Message(role="system", content="S"),
                                   Message(role="user", content=question),
                                   Message(role="assistant", content=answer)))


@pytest.mark.parametrize("i", [1, 6, 11, 16])
def test_a_package_run_killed_at_an_instant_resumes_to_the_same_run(tmp_path: Path,
                                                                     i: int) -> None:
    """``kill -9`` at one of several instants spread over a package's run, then the same
    command again: the run ends as the uninterrupted one did, to the byte of its best skill."""
    from test_reliability_suite import DELAY, journal_lines, kill_and_resume
    from test_resume import comparable

    model = {"target": {"backend": "scripted", "function": "toy:target", "delay": DELAY},
             "optimizer": {"backend": "scripted", "delay": DELAY,
                           "function": "test_package:package_optimizer"}}
    cfg = toy_config(tmp_path, model=model, env={"skill_init": "toy-skill"},
                     train={"num_epochs": 2, "batch_size": 100, "steps_per_epoch": 2, "seed": 7})
    (tmp_path / "toy-skill" / "references").mkdir(parents=True)
    (tmp_path / "toy-skill" / MAIN).write_text(toy.INITIAL_SKILL)
    (tmp_path / "toy-skill" / "references" / "rules.md").write_text(RULES)
    done = cli("train", str(cfg), "--out", str(tmp_path / "reference"))
    assert done.returncode == 0, done.stderr
    expected = comparable(tmp_path / "reference")
    assert is_package(expected["best"].decode()) and b"Rule year" in expected["best"]

    killed = kill_and_resume(cfg, tmp_path / "killed", i, journal_lines(tmp_path / "reference"))
    assert killed.status == -signal.SIGKILL and not killed.finished_anyway
    assert killed.resumed.returncode == 0, killed.resumed.stderr
    assert killed.result == expected


class _ToolEnv:
    """An environment with one tool, whose rollout is a ``run_episode``."""

    def __init__(self, skill_files: str = "tool") -> None:
        self.skill_files = skill_files

    def rollout(self, task: Any, skill: str, model: Any) -> Any:
        from skillgrad.envs.tools import Tool, run_episode
        from skillgrad.records import RolloutResult

        tool = Tool("lookup", "Look a word up.", {"type": "object", "properties": {
            "word": {"type": "string"}}, "required": ["word"]}, lambda word: f"{word}: a date")
        episode = run_episode(model, skill, task.prompt, [tool], max_turns=4,
                              skill_files=self.skill_files)  # type: ignore[arg-type]
        right = episode.answer == "2024-01-05"
        return RolloutResult(task_id=task.id, messages=episode.messages,
                             answer=episode.answer or "", hard=float(right), soft=float(right),
                             turns=episode.turns)


def _reader(request: Any) -> str:
    """A target that reads the format file when the skill lists it, then answers by it."""
    seen = "\n".join(m.text() for m in request.messages)
    if "YYYY-MM-DD" in seen:
        return "ANSWER: 2024-01-05"
    if "- references/format.md: Format" in seen:
        return 'ACTION: read_skill_file {"path": "references/format.md"}'
    return "ANSWER: 5 January 2024"


def test_an_agent_with_tools_sees_the_files_listed_and_reads_one_with_a_tool() -> None:
    from skillgrad.envs.base import traced_rollout
    from skillgrad.models.scripted import ScriptedModel
    from skillgrad.records import Task
    from skillgrad.stages.render import render_trajectory
    from skillgrad.stages.rollout import references_read

    skill = join_package(SKILL, {"references/format.md": FORMAT,
                                 "references/unused.md": "# Unused\n\nNothing.\n"})
    task = Task(id="d1", prompt="When was it? 5 Jan 2024")
    result = traced_rollout(_ToolEnv(), task, skill, ScriptedModel(fn=_reader))  # type: ignore[arg-type]
    system = result.messages[0].text()
    assert system.startswith(SKILL.rstrip() + "\n\n## Files of this skill\n")
    assert ("- references/format.md: Format\n- references/unused.md: Unused\n" in system)
    assert "Write dates as" not in system  # listed, not inlined
    assert "read_skill_file(path: string)" in system  # the text protocol lists the tool
    assert result.hard == 1.0 and result.turns == 2
    assert result.metadata["references_read"] == {"references/format.md": True,
                                                  "references/unused.md": False}
    assert "it never opened references/unused.md" in render_trajectory(result, 4000, 1)
    assert references_read([result]) == {"rollouts": 1, "references/format.md": 1,
                                         "references/unused.md": 0}

    missing = _ToolEnv().rollout(task, skill, ScriptedModel(
        ['ACTION: read_skill_file {"path": "references/none.md"}', "ANSWER: x"]))
    assert "error: no file 'references/none.md' in the skill" in missing.messages[3].text()

    inline = traced_rollout(_ToolEnv("inline"), task, skill, ScriptedModel(fn=_reader))  # type: ignore[arg-type]
    assert "Write dates as YYYY-MM-DD." in inline.messages[0].text()
    assert inline.hard == 1.0 and "references_read" not in inline.metadata
    plain = traced_rollout(_ToolEnv(), task, SKILL, ScriptedModel(fn=_reader))  # type: ignore[arg-type]
    assert plain.messages[0].text().startswith(SKILL) and "references_read" not in plain.metadata


def test_the_example_package_is_a_valid_skill_folder_the_doc_qa_env_starts_from() -> None:
    from skillgrad.agentskills import read_skill as read_skill_file_of
    from skillgrad.agentskills import validate_skill
    from skillgrad.build import build_environment

    folder = Path(__file__).resolve().parent.parent / "examples" / "doc_qa" / "document-questions"
    skill = read_skill_file_of(folder / MAIN)
    assert validate_skill(skill.front, skill.body, folder.name) == []
    config = folder.parent / "config.yaml"
    env = build_environment(load_config(config, [f"env.skill_init={folder}"]))
    initial = env.initial_skill()
    assert split_package(initial).paths == [MAIN, "references/lookup.md"]


def test_scripts_change_only_where_they_run_and_never_into_code_that_does_not_parse() -> None:
    text = join_package(SKILL, {"scripts/check.py": "print('ok')\n",
                                "scripts/run.sh": "echo ok\n", "references/data.json": "{}\n"})
    edits = [Edit(op="replace", anchor="print('ok')", content="print('checked')"),
             Edit(op="replace", anchor="print('ok')", content="print('ok'"),
             Edit(op="replace", anchor="echo ok", content="if then"),
             Edit(op="replace", anchor="{}", content="{'a': 1}"),
             Edit(op="append", file="scripts/new.py", content="def f(:")]
    outcomes = [apply_edits(text, [edit])[1].outcomes[0] for edit in edits]  # each alone
    assert [o.status for o in outcomes] == [
        "applied", "skipped", "skipped", "skipped", "skipped"]
    reasons = [o.reason or "" for o in outcomes[1:]]
    new, _ = apply_edits(text, edits[:1])
    assert reasons[0].startswith("edit would leave scripts/check.py unparseable: ")
    assert reasons[1].startswith("edit would leave scripts/run.sh unparseable: ")
    assert reasons[2].startswith("edit would leave references/data.json unparseable: ")
    assert reasons[3].startswith("edit would leave scripts/new.py unparseable: ")
    assert split_package(new).files["scripts/check.py"] == "print('checked')\n"

    _, report = apply_edits(text, edits[:1], scripts=False)
    assert report.outcomes[0].status == "skipped"
    assert report.outcomes[0].reason == ("scripts/check.py: the environment does not run the "
                                         "skill's scripts, so a change to one could not be "
                                         "checked")


def test_only_an_agent_target_runs_a_package_s_scripts(tmp_path: Path) -> None:
    from skillgrad.settings import runs_scripts

    assert not runs_scripts(load_config(toy_config(tmp_path)).config)
    agent = toy_config(tmp_path, model={"target": {
        "backend": "agent", "cli": "codex", "endpoint": "http://127.0.0.1:9/v1",
        "isolate": False}})
    assert runs_scripts(load_config(agent).config)


def test_show_names_the_file_an_edit_created(tmp_path: Path) -> None:
    cfg = toy_config(tmp_path, model={"optimizer": {
        "backend": "scripted", "function": "test_package:reference_optimizer"}},
        env={"skill_init": "toy-skill"}, train={"num_epochs": 1, "batch_size": 100,
                                                "steps_per_epoch": 2, "seed": 7})
    (tmp_path / "toy-skill").mkdir()
    (tmp_path / "toy-skill" / MAIN).write_text(toy.INITIAL_SKILL)
    (tmp_path / "toy-skill" / "old.md").write_text("# Old notes\n")
    build_trainer(load_config(cfg), tmp_path / "run").fit()
    shown = " ".join(cli("show", str(tmp_path / "run")).stdout.split())
    assert "append references/year.md: applied" in shown, shown
    best = split_package((tmp_path / "run" / "best_skill.md").read_text())
    assert "references/year.md" in best.files



@pytest.mark.parametrize("override", ["optimizer.use_slow_update=true",
                                      "optimizer.skill_update_mode=rewrite_from_suggestions"])
def test_a_mode_that_writes_across_a_package_s_files_is_refused_in_one_line(
        tmp_path: Path, override: str) -> None:
    from e2e import one_line_error

    cfg = toy_config(tmp_path, env={"skill_init": "toy-skill"})
    (tmp_path / "toy-skill").mkdir()
    (tmp_path / "toy-skill" / MAIN).write_text(toy.INITIAL_SKILL)
    (tmp_path / "toy-skill" / "notes.md").write_text("# Notes\n")
    proc = cli("train", str(cfg), "--out", str(tmp_path / "run"), "--set", override)
    line = one_line_error(proc)
    assert f"{override.replace('=', ': ')}: a skill package" in line, line
    assert not (tmp_path / "run" / "checkpoint.json").exists()
