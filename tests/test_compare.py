"""bench/compare.py: the side-by-side harness, with scripted models only (no network, no
embedded model): the budget counter, the paired bootstrap, the quote listing, and whole
comparisons of every method on the toy task family."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
import toy
import yaml
from conftest import toy_config

from skillgrad.models.client import ModelClient
from skillgrad.models.messages import ChatRequest, Message
from skillgrad.models.scripted import ScriptedModel
from skillgrad.records import RolloutResult, Task

ROOT = Path(__file__).resolve().parents[1]


def _load_compare() -> Any:
    spec = importlib.util.spec_from_file_location("bench_compare", ROOT / "bench" / "compare.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_compare"] = module
    spec.loader.exec_module(module)
    return module


compare = _load_compare()

LEAK = "Remember that item {n} has the answer {gold}."


def optimizer(request: ChatRequest) -> Any:
    """The toy optimizer, which also writes a one-shot skill (the rules of the topics it was
    shown, plus one line that leaks the first example's gold answer) and answers GEPA's
    reflection like :func:`reflect`."""
    if request.kind == "oneshot":
        prompt = request.messages[0].text()
        topics = dict.fromkeys(re.findall(r"What is the (\w+) of item", prompt))
        n = re.search(r"What is the \w+ of item (\d+)", prompt).group(1)  # type: ignore[union-attr]
        gold = re.search(r'Reference: \{"answers": \["([^"]+)"\]', prompt).group(1)  # type: ignore[union-attr]
        rules = "\n".join(toy.rule(t) for t in topics if toy.rule(t) not in toy.INITIAL_SKILL)
        return {"document": f"{toy.INITIAL_SKILL}\n{rules}\n{LEAK.format(n=n, gold=gold)}\n"}
    if request.kind == "gepa_reflect":  # GEPA's reflection through the optimizer client
        return reflect(request.messages[0].text())
    return toy.optimizer(request)


def reflect(prompt: Any) -> str:
    """A scripted GEPA reflection LM: the current skill plus the rule of every topic in the
    examples it was shown."""
    text = prompt if isinstance(prompt, str) else str(prompt)
    current = text.split("```")[1].strip()
    topics = dict.fromkeys(re.findall(r"What is the (\w+) of item", text))
    added = [toy.rule(t) for t in topics if toy.rule(t) not in current]
    return "```\n" + "\n".join([current, *added]) + "\n```"


def _config(folder: Path) -> Path:
    path = toy_config(folder)
    data = yaml.safe_load(path.read_text())
    data["model"]["optimizer"] = {"backend": "scripted", "function": "test_compare:optimizer"}
    path.write_text(yaml.safe_dump(data))
    return path


# ----------------------------------------------------------------------------- the budget


def test_the_counter_refuses_the_call_past_the_budget() -> None:
    model = ScriptedModel(default="ok")
    budget = compare.RolloutBudget(3)
    client = compare.CountedClient(ModelClient(model, "target"), budget)
    stage = client.for_stage("rollout")
    request = ChatRequest(messages=(Message(role="user", content="hi"),))
    for _ in range(3):
        assert stage.complete(request).text == "ok"
    with pytest.raises(compare.CompareBudgetStop):
        stage.complete(request)
    assert budget.used == 3 and budget.exhausted and len(model.calls) == 3
    assert budget.by_stage == {"rollout": 3}
    assert client.meter.totals("target").calls == 3  # the wrapped client's own metering


def test_the_budget_stops_skillgrad_and_gepa_at_the_budget(toy_dir: Path) -> None:
    import gepa  # noqa: F401  (in the dev extra: the comparison with GEPA is tested, not skipped)
    h = compare.Harness(_config(toy_dir), [], toy_dir / "out", reflection=reflect)
    # 9 validation tasks for the initial skill, then the first step's 18 rollouts: 20 stops
    # skillgrad in its first step, before any change; the initial skill is what it keeps.
    sg = h.run("skillgrad", 0, 20)
    assert sg["stopped"] and sg["train"]["target_calls"] == 20 and sg["counted"] == 20
    assert sg["skill"] == toy.INITIAL_SKILL
    # GEPA: 9 to score the seed candidate, 3 for the first minibatch, 3 for the child's; the
    # child's full validation would need 9 more, so 18 stops GEPA inside its first iteration.
    gp = h.run("gepa", 0, 18)
    assert gp["stopped"] and gp["train"]["target_calls"] == 18 and gp["counted"] == 18
    assert gp["skill"] == toy.INITIAL_SKILL  # the child was never fully validated
    assert gp["gepa"]["candidates"] == 1
    # Killed before its result was written, skillgrad resumes from its checkpoint: the calls
    # of the finished scope and the replayed journal count again, so it stops at 20 again.
    (toy_dir / "out/skillgrad/seed0" / compare.RESULT).unlink()
    again = h.run("skillgrad", 0, 20)
    assert again["stopped"] and again["counted"] == 20 and again["skill"] == toy.INITIAL_SKILL
    # A rerun reads the results back, and refuses another budget for the same folder.
    assert h.run("gepa", 0, 18)["read_back"]
    with pytest.raises(SystemExit, match="budget 18"):
        h.run("gepa", 0, 30)


def test_each_seed_can_have_its_own_budget(toy_dir: Path, capsys: Any) -> None:
    import gepa  # noqa: F401  (in the dev extra: the comparison with GEPA is tested, not skipped)
    cfg = _config(toy_dir)
    # GEPA alone, given per seed what a skillgrad run recorded elsewhere used.
    assert compare.main([str(cfg), "--seeds", "2", "--out", str(toy_dir / "out"),
                         "--methods", "initial,gepa", "--budget", "12,18"]) == 0
    report = json.loads((toy_dir / "out" / "compare.json").read_text())
    assert [r["budget"] for r in report["runs"]["gepa"]] == [12, 18]
    assert all(r["train"]["target_calls"] <= r["budget"] for r in report["runs"]["gepa"])
    assert report["budget"] == [12, 18] and "budget 12/18" in capsys.readouterr().out
    # One number per seed or one for all: anything else is one line and a non-zero exit.
    assert compare.main([str(cfg), "--seeds", "3", "--out", str(toy_dir / "other"),
                         "--methods", "initial,gepa", "--budget", "12,18"]) == 1
    assert "--budget gives 2 numbers for 3 seeds" in capsys.readouterr().err
    for bad in ("12,x", "0"):
        with pytest.raises(SystemExit) as exc:
            compare.main([str(cfg), "--out", str(toy_dir / "other"), "--budget", bad])
        assert exc.value.code == 2
        assert "--budget" in capsys.readouterr().err


def test_gepa_within_its_budget_improves_the_skill(toy_dir: Path) -> None:
    import gepa  # noqa: F401  (in the dev extra: the comparison with GEPA is tested, not skipped)
    h = compare.Harness(_config(toy_dir), [], toy_dir / "out", reflection=reflect)
    initial = h.run("initial", 0, None)
    gp = h.run("gepa", 0, 60)
    assert gp["train"]["target_calls"] <= 60
    assert gp["gepa"]["candidates"] >= 2 and gp["skill"] != toy.INITIAL_SKILL
    assert gp["test"]["hard"] > initial["test"]["hard"]
    assert gp["train"]["optimizer_calls"] == 0  # the scripted reflection is no client call
    rows = [json.loads(line) for line in
            (toy_dir / "out/gepa/seed0/gepa_train_rollouts.jsonl").read_text().splitlines()]
    assert rows and all(r["task_id"] in h.train_by_id for r in rows)


# ----------------------------------------------------------------------------- statistics


def test_paired_bootstrap_on_known_cases() -> None:
    # A constant gain has no spread: the interval is the gain itself.
    mean, lo, hi = compare.paired_bootstrap({"a": [0.5], "b": [0.5], "c": [0.5, 0.5]})
    assert (mean, lo, hi) == (0.5, 0.5, 0.5)
    # Two tasks, gains 0 and 1: resampled means are 0, 0.5, 1 with p = 1/4, 1/2, 1/4, so the
    # 95% interval is [0, 1] around the mean 0.5. Seeds pool within a task.
    mean, lo, hi = compare.paired_bootstrap({"a": [0.0, 0.0], "b": [1.0, 1.0]}, samples=4000)
    assert (mean, lo, hi) == (0.5, 0.0, 1.0)
    # The same resamples for the same seed.
    gains = {f"t{i}": [i % 3 - 1.0] for i in range(20)}
    assert compare.paired_bootstrap(gains, seed=3) == compare.paired_bootstrap(gains, seed=3)


def test_gains_are_paired_per_task() -> None:
    # Scores vary a lot between tasks, but the method beats the reference by 0.25 on every
    # task: paired, the interval is exactly that.
    ref = [{"seed_index": 0, "test": {"per_task": {f"t{i}": [i / 10, 0.0] for i in range(8)}}}]
    runs = [{"seed_index": k, "test": {"per_task": {f"t{i}": [i / 10 + 0.25, 0.0]
                                                    for i in range(8)}}} for k in range(3)]
    gains = compare.paired_gains(runs, ref, 0)  # a reference scored once serves every seed
    assert all(len(g) == 3 for g in gains.values())
    mean, lo, hi = compare.paired_bootstrap(gains)
    assert mean == pytest.approx(0.25) and lo == pytest.approx(0.25) and hi == pytest.approx(0.25)


# ----------------------------------------------------------------------------- hygiene


def test_the_quote_listing_finds_a_planted_leak() -> None:
    tasks = {"t1": Task(id="t1", prompt="Context:\nitem 7: city: Town7\n\nQuestion: What is "
                        "the city of item 7?", reference={"answers": ["Town7"]})}
    shown = compare.shown_as_rollouts(list(tasks.values()))
    initial = "# Skill\n\nAnswer the question.\n"
    skill = (initial + "Reply with the bare value.\nFor the city of item 7, reply Town7.\n"
             "Answer the question.\n")
    quotes = compare.quoted_lines(skill, initial, shown, tasks)
    assert [(q["line"], q["kind"], q["task_id"]) for q in quotes] == [
        ("For the city of item 7, reply Town7.", "answer", "t1")]
    assert "gold answer" in quotes[0]["reason"]
    assert compare.new_lines(skill, initial) == 2
    # Feedback echoed from a rollout's reason counts too.
    failed = RolloutResult(task_id="t1", messages=(Message(role="user", content="hi"),),
                           answer="x", hard=0, soft=0,
                           reason="the answer carries extra words after the expected value")
    line = "Never let the answer carry extra words after the expected value."
    quotes = compare.quoted_lines(initial + line + "\n", initial, [failed], tasks)
    assert [q["kind"] for q in quotes] == ["feedback"]


def test_the_quote_listing_finds_a_methods_own_instructions() -> None:
    """The one-shot skill of a small model copies the one-shot prompt's rules into itself."""
    initial = "# Skill\n\nAnswer the question.\n"
    copied = ("2. Write the complete improved skill: the procedure and the answer form that let "
              "the agent solve tasks like these.")
    skill = initial + copied + "\n"
    quotes = compare.quoted_lines(skill, initial, [], {}, compare.method_prompts("oneshot"))
    assert [(q["line"], q["kind"]) for q in quotes] == [(copied, "instructions")]
    assert compare.quoted_lines(skill, initial, [], {}) == []  # not skillgrad's own prompts


def test_a_oneshot_document_loses_the_wrapper_a_small_model_copies() -> None:
    assert compare.unwrap("<skill>\n# Skill\n\nAnswer.\n</skill>") == "# Skill\n\nAnswer."
    assert compare.unwrap("```markdown\n# Skill\n```") == "# Skill"
    assert compare.unwrap("# Skill\n\nUse <skill> tags.") == "# Skill\n\nUse <skill> tags."


def test_the_oneshot_prompt_speaks_no_task_familys_language() -> None:
    from test_prompt_vocabulary import DOMAIN

    words = set(re.findall(r"[a-z]+", compare.ONESHOT_PROMPT.lower()))
    assert [w for ws in DOMAIN.values() for w in ws if w in words] == []


# ----------------------------------------------------------------------------- end to end


def test_compare_end_to_end_writes_compare_json(toy_dir: Path) -> None:
    cfg = _config(toy_dir)
    out = toy_dir / "out"
    report = compare.compare(cfg, seeds=1, out=out,
                             methods=["none", "initial", "oneshot", "skillgrad"])
    assert json.loads((out / "compare.json").read_text()) == json.loads(json.dumps(report))
    s, runs = report["summary"], report["runs"]
    assert list(s) == ["none", "initial", "oneshot", "skillgrad"]
    assert report["splits"] == {"train": 18, "val": 9, "test": 9}
    # skillgrad's own run size sets the budget; the baselines use no target call to train.
    used = runs["skillgrad"][0]["train"]["target_calls"]
    assert used > 0 and report["budget_per_seed"] == {"0": used}
    assert used == json.loads((out / "skillgrad/seed0/summary.json").read_text())[
        "models"]["target"]["calls"]
    assert runs["skillgrad"][0]["counted"] == used
    assert [s[m]["target_calls"] for m in ("none", "initial", "oneshot")] == [0, 0, 0]
    assert s["oneshot"]["optimizer_calls"] == 1
    # Scores: the toy target answers exactly only the topics the skill has a rule for.
    assert s["initial"]["test_hard"]["mean"] < s["skillgrad"]["test_hard"]["mean"]
    assert s["skillgrad"]["gain_hard"]["mean"] > 0 and "gain_hard" not in s["initial"]
    g = s["skillgrad"]["gain_hard"]
    assert g["lo"] <= g["mean"] <= g["hi"]
    assert all(r["test"]["n"] == 9 for rs in runs.values() for r in rs)
    # The quote listing: oneshot's planted leak is found, skillgrad's rules quote nothing.
    leaks = runs["oneshot"][0]["quotes"]
    assert [q["kind"] for q in leaks] == ["answer"] and "Remember" in leaks[0]["line"]
    assert runs["skillgrad"][0]["quotes"] == [] and runs["skillgrad"][0]["new_lines"] >= 1
    # A rerun reads every finished run back.
    again = compare.compare(cfg, seeds=1, out=out,
                            methods=["none", "initial", "oneshot", "skillgrad"])
    assert again["summary"] == report["summary"]


def test_the_command_runs_gepa_on_skillgrads_budget(toy_dir: Path, capsys: Any) -> None:
    import gepa  # noqa: F401  (in the dev extra: the comparison with GEPA is tested, not skipped)
    cfg = _config(toy_dir)
    out = toy_dir / "out"
    # Through the command line: GEPA reflects with the config's optimizer model.
    assert compare.main([str(cfg), "--seeds", "2", "--out", str(out),
                         "--methods", "initial,skillgrad,gepa"]) == 0
    report = json.loads((out / "compare.json").read_text())
    for k in (0, 1):
        used = report["runs"]["skillgrad"][k]["train"]["target_calls"]
        gp = report["runs"]["gepa"][k]
        assert gp["budget"] == used and gp["train"]["target_calls"] <= used
    assert report["summary"]["initial"]["runs"] == 1  # scored once, the reference of both
    assert report["summary"]["gepa"]["runs"] == 2
    assert report["summary"]["gepa"]["optimizer_calls"] >= 1  # metered like any optimizer call
    assert report["summary"]["gepa"]["test_hard"]["mean"] > report["summary"]["initial"][
        "test_hard"]["mean"]
    shown = capsys.readouterr().out
    assert "gepa seed1: target calls" in shown and "Δ hard vs initial" in shown


def test_main_rejects_an_unknown_method(toy_dir: Path) -> None:
    with pytest.raises(SystemExit):
        compare.main([str(_config(toy_dir)), "--methods", "none,bogus"])
