"""Inspecting runs from the command line: ``skillgrad show`` (each edit's outcome and the
gate's reason, at 80 columns and as JSON), ``diff`` between named skill versions, and
``compare`` of runs or skill files with a paired bootstrap interval of the test gain."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import toy
import yaml
from conftest import toy_config, toy_config_full
from e2e import cli, one_line_error

from skillgrad.callbacks import TrainerCallback
from skillgrad.cli.compare import config_lines
from skillgrad.cli.main import app
from skillgrad.config import load_config
from skillgrad.errors import SkillgradError
from skillgrad.runview import Column, Versions, config_diff, gains, paired_interval
from skillgrad.testing import scripted_optimizer
from skillgrad.trainer import build_trainer

FUZZY_ANCHOR = "Answer the question about the itme."  # one letter off the skill's line
MISSING_ANCHOR = "Rule zebra: a line the skill does not have."


def _mixed(skill: str, tasks: str, prompt: str) -> dict[str, Any]:
    """One edit of each outcome: a gold answer it saw (refused), a replace whose anchor is
    one letter off (applied fuzzily), an insert after a line that is not there (skipped),
    and the rule that works (applied)."""
    if toy.rule("year") in skill:
        return {"reasoning": "done", "edits": []}
    gold = re.search(r"year: (\d{4})", tasks)
    if gold is None:
        return {"reasoning": "no year failures here", "edits": []}
    return {"reasoning": "years carry extra words", "edits": [
        {"op": "append", "content": f"Rule year: the year is {gold.group(1)}.", "support": 9},
        {"op": "replace", "anchor": FUZZY_ANCHOR, "content": "Answer each question asked.",
         "support": 8},
        {"op": "insert_after", "anchor": MISSING_ANCHOR, "content": "Rule zebra: unused.",
         "support": 7},
        {"op": "append", "content": toy.rule("year"), "support": 1}]}


mixed_optimizer = scripted_optimizer(_mixed)
silent_optimizer = scripted_optimizer(lambda skill, tasks, prompt: {"reasoning": "none",
                                                                    "edits": []})


def _train(folder: Path, optimizer: str | None = None, overrides: Sequence[str] = (),
           full: bool = False, callbacks: Sequence[TrainerCallback] = ()) -> Path:
    """A toy run in ``folder/run`` (the optimizer ``test_runs_cli:NAME`` when given)."""
    folder.mkdir(parents=True, exist_ok=True)
    cfg = toy_config_full(folder) if full else toy_config(folder)
    if optimizer is not None:
        data = yaml.safe_load(cfg.read_text())
        data["model"]["optimizer"] = {"backend": "scripted",
                                      "function": f"test_runs_cli:{optimizer}"}
        cfg.write_text(yaml.safe_dump(data))
    build_trainer(load_config(cfg, list(overrides)), folder / "run",
                  callbacks=callbacks).fit()
    return folder / "run"


ONE_EPOCH = ["train.num_epochs=1", "train.steps_per_epoch=2"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("runs")
    return {
        "mixed": _train(base / "mixed", "mixed_optimizer",
                        [*ONE_EPOCH, "optimizer.learning_rate=3"]),
        "learned": _train(base / "learned", overrides=["train.num_epochs=1"]),
        "flat": _train(base / "flat", "silent_optimizer", ["train.num_epochs=1"]),
    }


def _json(*args: str, cwd: Path | None = None) -> Any:
    proc = cli(*args, "--json", cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _state(run: Path) -> dict[str, Any]:
    return json.loads((run / "checkpoint.json").read_text())


def _skill(run: Path, digest: str) -> str:
    return (run / "skills" / f"{digest[:16]}.md").read_text()


# ----------------------------------------------------------------------------- show


def test_show_gives_each_edit_its_outcome_and_the_gate_its_reason(runs: dict[str, Path]) -> None:
    proc = cli("show", str(runs["mixed"]), env={"COLUMNS": "80"})
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stdout.split())  # as if unwrapped
    assert ": refused before rollout: quotes the gold answer of training" in text
    assert "(2 times)" not in text  # written again when its analyst was asked once more: once
    assert f'replace "{FUZZY_ANCHOR}": applied fuzzily, the anchor matched "Answer the ' \
           f'question about the item."' in text
    assert f'insert_after "{MISSING_ANCHOR}": skipped: anchor not found' in text
    assert f"append: applied {toy.rule('year')}" in text
    assert "gate: accept_new_best, selection 0.000 -> " in text and "over current" in text
    assert "gate: skip: no edit was proposed" in text
    assert "best step: 1 (val" in text and "test (hard/soft): initial" in text
    lines = proc.stdout.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("step "))
    assert lines[head].split() == ["step", "applied", "skipped", "refused", "train", "val",
                                   "decision"]
    row = lines[head + 2]
    assert row.split()[:2] == ["1", "e01-s001"] and row.endswith("accept_new_best *")
    too_long = [line for line in lines if len(line) > 80]
    assert not too_long


def test_show_json_holds_the_edits_and_the_reasons(runs: dict[str, Path]) -> None:
    data = _json("show", str(runs["mixed"]))
    first, second = data["steps"]
    outcomes = {e["outcome"]: e for e in first["edits"]}
    assert set(outcomes) == {"refused", "applied_fuzzy", "skipped", "applied"}
    assert "quotes the gold answer" in outcomes["refused"]["reason"]
    assert outcomes["applied_fuzzy"]["anchor"] == FUZZY_ANCHOR
    assert outcomes["applied_fuzzy"]["matched"] == "Answer the question about the item."
    assert 0.82 <= outcomes["applied_fuzzy"]["similarity"] < 1
    assert outcomes["skipped"]["reason"].startswith("anchor not found")
    assert outcomes["applied"]["text"] == toy.rule("year")
    assert first["gate"]["decision"] == "accept_new_best" and first["gate"]["reason"]
    refused = [e for e in first["edits"] if e["outcome"] == "refused"]
    assert first["record"]["n_refused"] == len(refused) and first["best"] is True
    assert second["gate"]["decision"] == "skip" and second["edits"] == []
    state = _state(runs["mixed"])
    assert first["skill_after"] == state["best_hash"] == data["skills"]["best"]
    test = data["totals"]["test"]
    assert data["totals"]["finished"] and test["best"]["hard"] > test["initial"]["hard"]


def test_show_names_the_edits_cut_to_the_budget(runs: dict[str, Path]) -> None:
    first = _json("show", str(runs["learned"]))["steps"][0]
    tried, cut = first["edits"][0], first["edits"][1:]
    assert tried["outcome"] == "applied" and first["record"]["budget"] == 1
    assert cut and all(e["outcome"] == "not_selected" and e["reason"] == "cut to the budget "
                       "of 1" and e["text"].startswith("Rule ") for e in cut)


class _StopAtReflect(TrainerCallback):
    """Stops the run when reflection starts for the ``n``-th time (a step half done)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def on_stage_start(self, stage: str, total: int | None) -> None:
        if stage == "reflect":
            self.n -= 1
            if self.n == 0:
                raise KeyboardInterrupt


def test_show_on_a_run_stopped_in_the_middle_of_a_step(tmp_path: Path) -> None:
    with pytest.raises(KeyboardInterrupt):
        _train(tmp_path, callbacks=[_StopAtReflect(3)])
    run = tmp_path / "run"
    proc = cli("show", str(run), env={"COLUMNS": "80"})
    assert proc.returncode == 0, proc.stderr
    assert "at epoch 1 step 3 of 3, 2 of 6 steps done" in " ".join(proc.stdout.split())
    assert re.search(r"^e01-s003 +unfinished$", proc.stdout, re.MULTILINE)
    text = " ".join(proc.stdout.split())
    assert "e01-s003: not finished (in progress, or interrupted" in text
    assert re.search(r"its folder holds calls\.jsonl \(\d+ model calls answered\)", text)
    assert "best step: 2" in proc.stdout and "optimizer:" in proc.stdout
    assert "summary:" not in proc.stdout
    data = _json("show", str(run))
    assert [s["record"] is None for s in data["steps"]] == [False, False, True]
    assert data["steps"][2]["files"] == ["calls.jsonl"] and data["steps"][2]["calls"] > 0
    assert not data["totals"]["finished"] and data["totals"]["test"] == {}


@pytest.mark.parametrize("mode, outcomes", [
    ("rewrite_from_suggestions", {"rewritten", "not_selected"}),
    ("full_rewrite_minibatch", {"chosen", "scored"}),
])
def test_show_in_the_rewrite_modes(tmp_path: Path, mode: str, outcomes: set[str]) -> None:
    run = _train(tmp_path, overrides=[f"optimizer.skill_update_mode={mode}", *ONE_EPOCH],
                 full=True)
    data = _json("show", str(run))
    assert data["mode"] == mode
    first = data["steps"][0]
    assert {e["outcome"] for e in first["edits"]} == outcomes
    assert first["gate"]["reason"]


def test_show_with_slow_update_and_meta_skill(tmp_path: Path) -> None:
    run = _train(tmp_path, overrides=["train.num_epochs=3", "train.steps_per_epoch=1",
                                      "optimizer.use_slow_update=true",
                                      "optimizer.use_meta_skill=true"], full=True)
    data = _json("show", str(run))
    epochs = data["epochs"]
    assert [e["epoch"] for e in epochs] == [2, 3]
    slow = epochs[0]["update"]["slow_update"]
    assert slow["decision"] and slow["reason"] and epochs[0]["update"]["meta_skill_updated"]
    state = _state(run)
    assert epochs[0]["skill_after"] == state["epoch_start"]["2"]
    # The last step was skipped: the skill after it is the one its epoch's slow update made.
    assert data["steps"][-1]["gate"]["decision"] == "skip"
    assert data["steps"][-1]["skill_after"] == state["epoch_start"]["3"] == state["current_hash"]
    text = cli("show", str(run), env={"COLUMNS": "80"}).stdout
    block = text.split("before epoch 2:", 1)[1].split("\n\n", 1)[0]
    assert "meta skill updated" in " ".join(block.split()) and "slow update:" in block
    assert text.index("before epoch 2:") < text.index("e02-s001 (step 2")
    assert all(len(line) <= 80 for line in text.splitlines())


def test_show_lists_the_screened_proposals(tmp_path: Path) -> None:
    tmp_path.mkdir(exist_ok=True)
    cfg = toy_config(
        tmp_path,
        model={"target": {"backend": "scripted", "function": "toy:target"},
               "optimizer": {"backend": "scripted", "function": "toy:make_sampled_optimizer",
                             "function_args": {"helpful": True}}},
        train={"num_epochs": 1, "steps_per_epoch": 1},
        gradient={"minibatch_size": 100, "failure_only": True, "proposals": 3,
                  "proposal_form": "rules"})
    build_trainer(load_config(cfg), tmp_path / "run").fit()
    [step] = _json("show", str(tmp_path / "run"))["steps"]
    assert [p["chosen"] for p in step["proposals"]] == [False, False, True]
    assert step["edits_of"] == 2 and step["edits"][0]["text"] == f"- {toy.rule('year')}"
    text = cli("show", str(tmp_path / "run")).stdout
    assert "2. scored" in text and "(chosen)" in text and "edits of proposal 2:" in text


# ----------------------------------------------------------------------------- diff


# ----------------------------------------------------------------------------- rollouts


def _rollout_rows(run: Path) -> list[dict[str, Any]]:
    """Every rollout the run wrote, as its files hold them."""
    return [json.loads(line) for path in sorted(run.glob("*/*/rollouts.jsonl"))
            for line in path.read_text().splitlines()]


def test_show_rollouts_gives_each_task_its_reply_expected_answer_and_reason(
        runs: dict[str, Path]) -> None:
    run = runs["mixed"]
    proc = cli("show", str(run), "--rollouts", env={"COLUMNS": "80"})
    assert proc.returncode == 0, proc.stderr
    written = _rollout_rows(run)
    failed = [r for r in written if r["hard"] < 1]
    assert written and failed and len(failed) < len(written)
    lines = proc.stdout.splitlines()
    assert lines[0].endswith(f"{len(written)} rollouts ({len(failed)} failed)")
    heads = [line for line in lines if " · task " in line]
    assert len(heads) == len(written)
    verdicts = [head.rsplit(" · ", 1)[-1].split()[0] for head in heads]
    assert verdicts == ["FAILED"] * len(failed) + ["solved"] * (len(written) - len(failed))
    text = " ".join(proc.stdout.split())
    one = failed[0]
    assert f"task {one['task_id']} · " in text
    assert f"expected: '{one['expected'].strip(chr(39))}'" in text or \
        f"expected: {one['expected']}" in text
    assert one["expected"] and one["reason"] and f"reason: {one['reason'][:30]}" in text
    assert "reply: Answer:" in text and "e01-s001 · task" in text and "test · task" in text
    assert not [line for line in lines if len(line) > 80]


def test_show_rollouts_of_one_step_one_skill_one_split(runs: dict[str, Path]) -> None:
    run = runs["mixed"]
    state = _state(run)
    first = state["history"][0]
    data = _json("show", str(run), "--rollouts", "1")
    assert data["filters"] == {"step": "e01-s001"}
    steps = {(r["step"], r["split"]) for r in data["rows"]}
    assert steps == {("e01-s001", "train"), ("", "selection")}
    assert {r["skill"] for r in data["rows"] if r["split"] == "selection"} == {
        first["candidate_hash"]}
    batch = (run / "steps" / "e01-s001" / "rollouts.jsonl").read_text().splitlines()
    assert sum(r["split"] == "train" for r in data["rows"]) == len(batch)
    assert {r["skill"] for r in data["rows"] if r["split"] == "train"} == {
        state["initial_hash"]}
    test_initial = _json("show", str(run), "--rollouts", "--skill", "initial",
                         "--split", "test")["rows"]
    assert test_initial and {(r["split"], r["skill"]) for r in test_initial} == {
        ("test", state["initial_hash"])}
    failed = _json("show", str(run), "--rollouts", "--failed")["rows"]
    assert failed and all(r["hard"] < 1 for r in failed)
    assert all(r["reply"] and r["task"] for r in failed)


def test_show_rollouts_refuses_what_it_cannot_find_in_one_line(runs: dict[str, Path]) -> None:
    run = str(runs["mixed"])
    line = one_line_error(cli("show", run, "e01-s001"))
    assert "STEP is for the rollouts; add --rollouts" in line
    line = one_line_error(cli("show", run, "--rollouts", "e09-s009x"))
    assert "no step 'e09-s009x'" in line and "e01-s001" in line
    line = one_line_error(cli("show", run, "--rollouts", "--split", "val2"))
    assert "train, selection and test" in line
    proc = cli("show", run, "--rollouts", "e01-s001", "--split", "test")
    assert proc.returncode == 0, proc.stderr
    assert "0 rollouts (0 failed); step e01-s001, split test" in proc.stdout
    assert "no rollouts match; the run has rollouts of: e01-s001, e01-s002, selection, test" \
        in " ".join(proc.stdout.split())


def test_diff_of_every_kind_of_version_name(runs: dict[str, Path]) -> None:
    run = runs["mixed"]
    state = _state(run)
    initial, best = state["initial_hash"], state["best_hash"]
    proc = cli("diff", str(run))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == f"--- initial ({initial[:8]})"
    assert lines[1] == f"+++ best, step 1 ({best[:8]})"
    assert f"+{toy.rule('year')}" in lines and "-Answer the question about the item." in lines
    assert "\x1b[" not in proc.stdout  # plain when not a terminal
    for a, b in (("initial", "best"), ("initial", "e01-s001"), ("initial", "1"),
                 ("initial", best[:6]), (initial[:10], "final"),
                 ("e1-s1", "e01-s002")):
        proc = cli("diff", str(run), a, b)
        assert proc.returncode == 0, proc.stderr
    same = cli("diff", str(run), "e01-s001", best[:8])
    assert same.returncode == 0 and same.stdout == ""
    assert "are the same skill" in same.stderr
    after_two = cli("diff", str(run), "initial", "2").stdout
    assert after_two.splitlines()[2:] == lines[2:]  # step 2 skipped: the best skill still


def test_diff_refuses_a_name_that_names_no_version(runs: dict[str, Path]) -> None:
    run = str(runs["mixed"])
    for name in ("e09-s001", "7", "zzzz", "latest"):
        line = one_line_error(cli("diff", run, "initial", name))
        assert f"no skill version {name!r}" in line
        assert "initial, best, final" in line and "e01-s001 (1), e01-s002 (2)" in line
        assert _state(runs["mixed"])["best_hash"][:8] in line
    line = one_line_error(cli("diff", run, "best"))
    assert "give two versions" in line


def test_an_ambiguous_hash_prefix_lists_what_it_matches() -> None:
    known = ("abcd1111" + "0" * 56, "abcd2222" + "0" * 56, "ffff" + "0" * 60)
    versions = Versions("RUN", known[2], known[2], known[2], 0, (), known)
    with pytest.raises(SkillgradError, match="'abcd' matches 2 skill versions in RUN: "
                                             "abcd11110000, abcd22220000"):
        versions.resolve("abcd")
    assert versions.resolve("abcd2")[1] == known[1]
    with pytest.raises(SkillgradError, match="or a skill-hash prefix"):
        versions.resolve("abc")  # too short to be a prefix


def test_diff_is_coloured_on_a_terminal(runs: dict[str, Path]) -> None:
    from typer.testing import CliRunner

    result = CliRunner().invoke(app, ["diff", str(runs["mixed"])], color=True)
    assert result.exit_code == 0, result.output
    assert f"\x1b[32m+{toy.rule('year')}" in result.output
    assert "\x1b[31m-Answer the question about the item." in result.output


# ----------------------------------------------------------------------------- compare


def _per_task(run: Path) -> dict[str, tuple[float, float]]:
    best = _state(run)["best_hash"]
    rows = (run / "evals" / f"test-{best[:16]}" / "rollouts.jsonl").read_text().splitlines()
    return {r["task_id"]: (r["hard"], r["soft"]) for r in map(json.loads, rows)}


def test_compare_two_runs_with_the_interval_of_the_paired_gain(runs: dict[str, Path]) -> None:
    flat, learned = runs["flat"], runs["learned"]
    a, b = _per_task(flat), _per_task(learned)
    shared = sorted(set(a) & set(b))
    hard = [b[t][0] - a[t][0] for t in shared]
    soft = [b[t][1] - a[t][1] for t in shared]
    data = _json("compare", str(flat), str(learned))
    [gain] = data["gains"]
    assert gain["label"] == "B" and gain["against"] == "A" and gain["n"] == len(shared)
    assert gain["hard"] == pytest.approx(list(paired_interval(hard)))
    assert gain["soft"] == pytest.approx(list(paired_interval(soft)))
    assert gain["hard"][0] == pytest.approx(sum(hard) / len(hard)) and gain["hard"][1] > 0
    cols = data["columns"]
    assert cols[0]["decisions"]["accept"] == 0 and cols[1]["decisions"]["accept"] >= 1
    best = cols[1]["test"]["best"]["hard"]
    assert best > cols[1]["test"]["initial"]["hard"] and cols[1]["test_tasks"] == len(b)
    assert cols[0]["models"]["optimizer"]["calls"] > 0
    proc = cli("compare", str(flat), str(learned), env={"COLUMNS": "80"})
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stdout.split())
    lo, hi = paired_interval(hard)[1:]
    assert f"B vs A, best skills on {len(shared)} shared test tasks: hard " \
           f"{sum(hard) / len(hard):+.3f} (95% interval {lo:+.3f} to {hi:+.3f})" in text
    assert re.search(rf"^test best +0\.\d{{3}}/0\.\d{{3}} +{best:.3f}/\d\.\d{{3}}$",
                     proc.stdout, re.M)
    assert all(len(line) <= 80 for line in proc.stdout.splitlines())


def test_compare_says_when_a_run_has_no_test_results(tmp_path: Path,
                                                     runs: dict[str, Path]) -> None:
    untested = _train(tmp_path, overrides=["train.num_epochs=1", "evaluation.eval_test=false"])
    proc = cli("compare", str(runs["learned"]), str(untested))
    assert proc.returncode == 0, proc.stderr
    assert "B vs A: no interval (B: no test results" in proc.stdout
    assert "(evaluation.eval_test is off)" in proc.stdout
    assert "(run: the run is finished)" in proc.stdout
    line = one_line_error(cli("compare", str(untested)))
    assert "two or more run directories" in line
    line = one_line_error(cli("compare", str(untested), str(tmp_path)))
    assert "not a skillgrad run directory" in line
    line = one_line_error(cli("compare", str(untested), str(untested), "--set",
                              "train.seed=1"))
    assert "--set applies to the --config" in line


def test_the_bootstrap_interval_is_seeded_and_brackets_the_mean() -> None:
    assert paired_interval([0.5] * 10) == (0.5, 0.5, 0.5)
    gains = [1.0] * 3 + [0.0] * 9
    mean, lo, hi = paired_interval(gains)
    assert mean == 0.25 and 0.0 <= lo < mean < hi <= 0.6
    assert paired_interval(gains) == (mean, lo, hi)
    mean, lo, hi = paired_interval([1.0, -1.0] * 10)
    assert mean == 0.0 and lo < 0 < hi


def test_the_gain_is_paired_on_the_shared_tasks_only() -> None:
    def column(label: str, per_task: dict[str, tuple[float, float]] | None) -> Column:
        return Column(label, label, "run", "", {}, {}, note="no test results (why)",
                      per_task=per_task)

    a = column("A", {"t1": (0.0, 0.5), "t2": (1.0, 1.0), "t3": (0.0, 0.0)})
    b = column("B", {"t1": (1.0, 1.0), "t2": (1.0, 0.5), "t4": (1.0, 1.0)})
    c = column("C", None)
    found_b, found_c = gains([a, b, c])
    assert found_b.n == 2 and found_b.label == "B" and found_b.against == "A"
    assert found_b.hard == paired_interval([1.0, 0.0]) and found_b.hard[0] == 0.5
    assert found_b.soft == paired_interval([0.5, -0.5]) and found_b.soft[0] == 0.0
    assert found_c.hard is None and found_c.note == "C: no test results (why)"
    [apart] = gains([a, column("D", {"t9": (1.0, 1.0)})])
    assert apart.hard is None and apart.note == "no shared test tasks"


def test_compare_two_skill_files_on_one_config(tmp_path: Path, runs: dict[str, Path]) -> None:
    """Skill files get their own table (no run-only rows), their evaluations go to skillgrad's
    cache folder (or --out), never the working directory, and a rerun replays their calls."""
    learned = runs["learned"]
    project, cwd, home = tmp_path / "project", tmp_path / "cwd", tmp_path / "home"
    project.mkdir()
    cwd.mkdir()
    cfg = toy_config(project)
    initial, best = project / "toy_skill.md", project / "best.md"
    best.write_text((learned / "best_skill.md").read_text())
    args = ("compare", "--config", str(cfg), str(initial), str(best))
    proc = cli(*args, "--json", cwd=cwd, env={"SKILLGRAD_HOME": str(home)})
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    a, b = data["columns"]
    summary = json.loads((learned / "summary.json").read_text())
    assert a["kind"] == b["kind"] == "skill"
    assert a["test"]["skill"]["hard"] == summary["test"]["initial"]["hard"]
    assert b["test"]["skill"]["hard"] == summary["test"]["best"]["hard"]
    assert a["decisions"] is None and a["models"]["target"]["calls"] > 0
    assert a["models"]["target"]["cost"] is None  # no prices: the cost is unknown, not 0
    [gain] = data["gains"]
    assert gain["n"] == summary["test"]["best"]["n"] and gain["hard"][0] > 0
    assert data["config"] is None
    assert list(cwd.iterdir()) == []  # nothing written where the command ran
    journals = sorted((home / "evals").glob("config-*-test-*/calls.jsonl"))
    assert len(journals) == 2 and all(j.with_name("eval_summary.json").exists() for j in journals)
    lines = {j: j.read_text() for j in journals}

    proc = cli(*args, cwd=cwd, env={"SKILLGRAD_HOME": str(home)})
    assert proc.returncode == 0, proc.stderr
    assert {j: j.read_text() for j in journals} == lines  # every call replayed, none made
    stage = json.loads(journals[0].with_name("eval_summary.json").read_text())[
        "models"]["target"]["stages"]["eval_test"]
    assert stage["replayed"] == stage["calls"] > 0
    assert list(cwd.iterdir()) == []
    text, flat = proc.stdout, " ".join(proc.stdout.split())
    assert "B vs A, skill files on" in flat and "toy_skill.md (skill file: scored on" in flat
    lines = text.splitlines()
    dashes = next(i for i, line in enumerate(lines) if line.startswith("---"))
    table = lines[dashes + 1:lines.index("", dashes)]
    assert [row.rsplit(None, 2)[0] for row in table] == [  # no run's rows (decisions, ...)
        "test", "test tasks", "target calls", "target tokens", "target cost"]
    assert re.fullmatch(r"test +0\.\d{3}/0\.\d{3} +0\.\d{3}/0\.\d{3}", table[0])
    assert table[-1].split() == ["target", "cost", "-", "-"]  # no prices: unknown, not 0
    assert "same config" not in text

    # --out: the evaluations go there; prices make the cost known.
    out = tmp_path / "evals"
    proc = cli(*args, "--out", str(out), "--set", "model.target.prices.prompt=1000",
               "--set", "model.target.prices.completion=1000", cwd=cwd,
               env={"SKILLGRAD_HOME": str(home)})
    assert proc.returncode == 0, proc.stderr
    assert len(list(out.glob("config-*-test-*/eval_summary.json"))) == 2
    assert re.search(r"^target cost +\d+\.\d{4} +\d+\.\d{4}$", proc.stdout, re.M)
    assert list(cwd.iterdir()) == []
    line = one_line_error(cli(*args[:-1], str(project / "nope.md"), cwd=cwd,
                              env={"SKILLGRAD_HOME": str(home)}))
    assert "nope.md" in line and "not found" in line
    line = one_line_error(cli("compare", str(learned), str(learned), "--out", str(out)))
    assert "--out is where the skill files scored with --config" in line


# ----------------------------------------------------------------------------- compare: config


@pytest.fixture(scope="module")
def alike(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Runs set up alike but for one key each: the learning rate (edits per step), where the
    target's response cache would be kept (not compared), and the target's prices."""
    base = tmp_path_factory.mktemp("alike")
    return {
        "lr1": _train(base / "lr1", overrides=["train.num_epochs=1"]),
        "lr3": _train(base / "lr3", overrides=["train.num_epochs=1",
                                               "optimizer.learning_rate=3",
                                               f"model.target.cache_dir={base / 'cache'}"]),
        "cached": _train(base / "cached", overrides=["train.num_epochs=1",
                                                     f"model.target.cache_dir={base / 'c2'}"]),
        "priced": _train(base / "priced", overrides=["train.num_epochs=1",
                                                     "model.target.prices.prompt=1000"]),
    }


def test_compare_lists_the_config_keys_that_differ(alike: dict[str, Path]) -> None:
    lr1, lr3 = alike["lr1"], alike["lr3"]
    data = _json("compare", str(lr1), str(lr3))
    assert data["config"]["same"] is False and data["config"]["unread"] == []
    assert data["config"]["rows"] == [{"key": "optimizer.learning_rate",
                                       "values": {"A": 1, "B": 3}}]
    proc = cli("compare", str(lr1), str(lr3), env={"COLUMNS": "80"})
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    head = lines.index("config keys that differ (1):")
    assert lines[head + 1].split() == ["key", "A", "B"]
    assert lines[head + 3].split() == ["optimizer.learning_rate", "1", "3"]
    assert "cache_dir" not in proc.stdout and "same config" not in proc.stdout
    assert re.search(r"^target cost +- +-$", proc.stdout, re.M)  # no prices: unknown
    assert all(len(line) <= 80 for line in lines)


def test_compare_says_same_config_in_one_line(alike: dict[str, Path]) -> None:
    # The two differ only in where the target's response cache would be kept.
    proc = cli("compare", str(alike["lr1"]), str(alike["cached"]))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "same config"
    assert "config keys that differ" not in proc.stdout
    data = _json("compare", str(alike["lr1"]), str(alike["cached"]))
    assert data["config"]["same"] is True and data["config"]["rows"] == []


def test_compare_shows_the_cost_of_priced_roles_only(alike: dict[str, Path]) -> None:
    data = _json("compare", str(alike["lr1"]), str(alike["priced"]))
    a, b = (c["models"] for c in data["columns"])
    assert a["target"]["cost"] is None and a["optimizer"]["cost"] is None
    assert b["target"]["cost"] == pytest.approx(
        b["target"]["tokens"] * 1000 / 1e6, rel=0.5) and b["optimizer"]["cost"] is None
    assert data["config"]["rows"] == [{"key": "model.target.prices", "values": {
        "A": None, "B": {"prompt": 1000.0, "completion": 0.0}}}]
    proc = cli("compare", str(alike["lr1"]), str(alike["priced"]))
    assert re.search(r"^target cost +- +\d+\.\d{4}$", proc.stdout, re.M)
    assert re.search(r"^optimizer cost +- +-$", proc.stdout, re.M)


def test_config_differences_are_masked_and_unreadable_configs_named() -> None:
    old = {"model": {"target": {"backend": "openai", "api_key": "sk-old-secret-1",
                                "cache_dir": "/a"}}, "train": {"seed": 1}}
    new = {"model": {"target": {"backend": "openai", "api_key": "sk-new-secret-2",
                                "cache_dir": "/b"}}, "train": {"seed": 1, "accumulation": 2}}
    found = config_diff(["A", "B", "C"], [old, new, None])
    # Both keys masked alike: a secret is never shown, nor compared by its value.
    assert [(r.key, r.values) for r in found.rows] == [("train.accumulation", {"B": 2})]
    assert found.unread == ("C",) and not found.same
    text = "\n".join(config_lines(found, 80))
    assert "C: its config.yaml could not be read" in text
    assert re.search(r"^train\.accumulation +- +2$", text, re.M) and "secret" not in text
    assert config_lines(config_diff(["A", "B"], [old, old]), 80) == ["same config"]
    wide = config_diff(["A", "B"], [{"env": {"data_path": "x" * 60}},
                                    {"env": {"data_path": "y" * 60}}])
    assert config_lines(wide, 80) == ["config keys that differ (1):", "env.data_path",
                                      "  A: " + "x" * 60, "  B: " + "y" * 60]
