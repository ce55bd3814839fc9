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
from skillgrad.cli.main import app
from skillgrad.config import load_config
from skillgrad.errors import SkillgradError
from skillgrad.runview import Column, Versions, gains, paired_interval
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
    assert "(2 times): refused before rollout: quotes the gold answer of training" in text
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
    learned = runs["learned"]
    cfg = toy_config(tmp_path)
    (tmp_path / "best.md").write_text((learned / "best_skill.md").read_text())
    data = _json("compare", "--config", str(cfg), "toy_skill.md", "best.md", cwd=tmp_path)
    a, b = data["columns"]
    summary = json.loads((learned / "summary.json").read_text())
    assert a["kind"] == b["kind"] == "skill"
    assert a["test"]["best"]["hard"] == summary["test"]["initial"]["hard"]
    assert b["test"]["best"]["hard"] == summary["test"]["best"]["hard"]
    assert a["decisions"] is None and a["models"]["target"]["calls"] > 0
    [gain] = data["gains"]
    assert gain["n"] == summary["test"]["best"]["n"] and gain["hard"][0] > 0
    assert list((tmp_path / "runs").glob("eval-config-test-*/eval_summary.json"))
    proc = cli("compare", "--config", str(cfg), "toy_skill.md", "best.md", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "B vs A, best skills on" in proc.stdout and "toy_skill.md (skill file: scored on" in proc.stdout
    line = one_line_error(cli("compare", "--config", str(cfg), "toy_skill.md", "nope.md",
                              cwd=tmp_path))
    assert "nope.md" in line and "not found" in line
