"""Optimizer prompt tokens per step: skillgrad against SkillOpt 0.2.0 on the same tasks, the same
config values and the same loopback endpoints.

    python bench/optimizer_tokens.py --skillopt CHECKOUT [--skillopt-python PYTHON]
                                     [--settings quickstart officeqa] [--seeds 3] [--out DIR]
                                     [--skillgrad-set KEY=VALUE ...]

CHECKOUT is SkillOpt's repository at its v0.2.0 tag (git clone
https://github.com/microsoft/SkillOpt && git -C SkillOpt checkout v0.2.0); PYTHON a Python that
has SkillOpt 0.2.0's dependencies (python -m venv /tmp/skillopt-venv &&
/tmp/skillopt-venv/bin/pip install skillopt==0.2.0). SkillOpt runs as a subprocess through its
own entry point, ``CHECKOUT/scripts/train.py --config FILE``, with a config in its own format;
that script puts the checkout first on ``sys.path``. The checkout is needed because the 0.2.0
wheel and sdist on PyPI ship none of its prompt files (``skillopt/prompts/*.md``,
``skillopt/envs/*/prompts/*.md``): installed alone, every rollout fails on a missing
``rollout_system`` prompt and the run stops before its first optimizer call. skillgrad runs as
``skillgrad train`` (with SKILLGRAD_HOME pointed at an empty folder).

Settings (each system runs the same values; SkillOpt derives its steps per epoch from the size of
its train split, which must equal ``train_size``, so its train split holds as many items as
skillgrad's steps use: the first ``batch_size x steps_per_epoch`` of skillgrad's):

* ``quickstart``: examples/quickstart's data and config (batch 6, minibatch 6, failures only,
  edit budget 2 -> 1 cosine, 4 steps of one epoch), split as skillgrad splits it; skillgrad
  runs ``examples/quickstart/config.yaml`` itself, SkillOpt its ``searchqa`` environment on the
  same train / selection / test items, written in its split layout.
* ``officeqa``: a multi-turn environment both have (the agent calls tools over local documents
  before it answers): 50 generated questions over 10 generated reports in SkillOpt's OfficeQA
  layout (24 train, 16 selection, 10 test), one SkillOpt config file that both systems load
  (batch 8, minibatch 4, failures and successes, edit budget 2 -> 1 cosine, 3 steps), both with
  native tool calls. (household, the other multi-turn environment both have, needs the
  ALFWorld engine, which is not installed here.)

Two loopback OpenAI-compatible servers per run, one for the target and one for the optimizer,
answer deterministically. The target answers a question right or wrong by a hash of the
question and the number of the responder's rules its skill holds (more rules, more right
answers, up to 60%), in each system's answer format (``<answer>..</answer>`` for SkillOpt,
``Answer: ..`` for skillgrad), and on ``officeqa`` calls one tool first (SkillOpt's ``grep``,
skillgrad's ``search``). The optimizer answers each call in the JSON its system asks for, with
the same content: an analyst proposes the next rules of a fixed list of general answer rules
that its prompt does not mention yet (as many as it is allowed), a merge returns the rules its
proposals hold, a ranking keeps the given order. Every request the optimizer server receives is
counted with one tokenizer-free estimate for both systems: characters of the messages / 4.
``schema`` is the JSON schema a request carries in ``response_format`` (skillgrad sends one with
its edit calls, SkillOpt none), counted the same way and shown apart: servers that turn it into
a grammar do not bill it as prompt.

Each system runs ``--seeds`` times (``train.seed`` 42, 43, ...; the same seeds for both), and the
table pools the runs: ``steps``, ``optimizer calls``, ``accepted`` are totals, ``final skill
chars`` the mean length of the skill each run ended with. Each run works in
OUT/<setting>/<system>/seed<N>/ (default OUT: a temporary folder) and leaves
``optimizer_requests.jsonl`` there: every optimizer request with its kind, for inspection.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.table import Table

from skillgrad.build import build_environment
from skillgrad.config import load_config
from skillgrad.testing import FakeOpenAIServer, completion_body

ROOT = Path(__file__).resolve().parent.parent
QUICKSTART = ROOT / "examples" / "quickstart"
SKILLGRAD = Path(sys.executable).with_name("skillgrad")

# What the responder's optimizer proposes, in order: general rules about the form of an answer,
# each free of quotes (so a quoted copy in a proposal list can be told from the skill's own line).
RULES = (
    "Reply with the answer alone: no full sentence and no restated question.",
    "When the answer is a number, write its digits without separators, units or words.",
    "When the answer is a name, give the full name exactly as the text spells it.",
    "Take the answer from the given material and never from memory.",
    "When the material gives several candidates, pick the one the question asks about.",
    "Leave out units unless the question asks for them.",
    "Before you reply, check that the reply answers the exact question asked.",
    "Do not add explanations, sources or remarks after the answer.",
    "Keep the capitalisation the material uses.",
    "Never reply with more than one candidate answer.",
    "Read all of the material before you answer.",
    "Give the answer in the form the question implies: a year for when, a place for where.",
    "Drop leading articles and trailing punctuation from the answer.",
    "When unsure, still reply with the single most likely answer from the material.",
    "Use the period, row and column the question names, not a neighbouring one.",
    "Copy a value with all of its digits, never rounded.",
)
REASONING = "The failed replies share a pattern that the skill does not address yet."


def count_tokens(text: str) -> float:
    """The one estimate applied to both systems: four characters a token."""
    return len(text) / 4


# ----------------------------------------------------------------------------- the tasks


@dataclass(frozen=True)
class Item:
    id: str
    question: str
    answers: tuple[str, ...]
    wrong: str = ""  # the wrong reply's answer (default: the gold inside a full sentence)
    keyword: str = ""  # what the agent greps for on a multi-turn setting (SkillOpt's tool)
    query: str = ""  # what it searches for (skillgrad's tool)


@dataclass
class Setting:
    """A prepared setting: the items (every split), how each system is run, its steps."""

    name: str
    items: list[Item]
    steps: int
    multi_turn: bool
    skillgrad_config: Path | None  # None: skillgrad loads SkillOpt's file, as SkillOpt does
    skillgrad_sets: list[str]
    skillopt_config: Callable[[str, str, Path, int], Path]  # (target, optimizer, out, seed)


def _rules_in(text: str) -> int:
    return sum(rule in text for rule in RULES)


def _right(question: str, system: str) -> bool:
    """Deterministic: 2 in 10 questions are right with no rule, 2 more per rule, 6 at most (so
    that most training batches keep failures to analyse)."""
    h = int(hashlib.sha256(question.encode()).hexdigest(), 16) % 10
    return h < min(2 + 2 * _rules_in(system), 6)


def prepare_quickstart(work: Path) -> Setting:
    config = QUICKSTART / "config.yaml"
    env = build_environment(load_config(config))
    records = {r["id"]: r for r in map(json.loads, (QUICKSTART / "data.jsonl").open())}
    items = [Item(r["id"], r["question"], tuple(r["answer"])) for r in records.values()]
    raw = yaml.safe_load(config.read_text())
    train, grad, opt = raw["train"], raw["gradient"], raw["optimizer"]
    used = train["batch_size"] * train["steps_per_epoch"]
    split_dir = work / "searchqa_split"
    for split in ("train", "val", "test"):
        tasks = env.tasks(split)[:used] if split == "train" else env.tasks(split)
        rows = [{"id": t.id, "question": records[t.id]["question"],
                 "context": records[t.id].get("context") or "", "answers": records[t.id]["answer"]}
                for t in tasks]
        (split_dir / split).mkdir(parents=True, exist_ok=True)
        (split_dir / split / "items.json").write_text(json.dumps(rows, indent=1))

    def skillopt_config(target: str, optimizer: str, out: Path, seed: int) -> Path:
        cfg = _skillopt_common(target, optimizer, out, seed)
        cfg["train"].update(num_epochs=train["num_epochs"], batch_size=train["batch_size"],
                            train_size=used)
        cfg["gradient"].update(minibatch_size=grad["minibatch_size"],
                               analyst_workers=grad["analyst_workers"],
                               failure_only=grad["failure_only"])
        cfg["optimizer"].update(learning_rate=opt["learning_rate"],
                                min_learning_rate=opt["min_learning_rate"])
        cfg["env"].update(name="searchqa", skill_init=str(QUICKSTART / raw["env"]["skill_init"]),
                          split_dir=str(split_dir), max_turns=1,
                          max_completion_tokens=raw["env"]["max_tokens"], workers=1)
        return _write_yaml(out / "skillopt.yaml", cfg)

    return Setting("quickstart", items, train["steps_per_epoch"], False, config, [],
                   skillopt_config)


OFFICE_ITEMS = ("Receipts", "Outlays", "Customs duties", "Excise taxes", "Interest paid")


def prepare_officeqa(work: Path) -> Setting:
    """10 reports, each a table of 5 line items over 4 fiscal years; 50 questions."""
    docs = work / "officeqa_docs" / "transformed"
    docs.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, str]] = []
    items: list[Item] = []
    for d in range(10):
        year = 1950 + 5 * d
        years = [year - 3 + k for k in range(4)]
        name = f"fiscal_report_{year}.txt"
        lines = [f"# Fiscal Report {year}", "", f"Statement of accounts, fiscal years "
                 f"{years[0]}-{years[-1]} (in millions of dollars).", "",
                 "| Item | " + " | ".join(f"FY {y}" for y in years) + " |",
                 "|---" * 5 + "|"]
        for i, label in enumerate(OFFICE_ITEMS):
            values = [1000 + (d * 7919 + i * 104729 + k * 3571) % 90000 for k in range(4)]
            lines.append(f"| {label} | " + " | ".join(f"{v:,}" for v in values) + " |")
            k = (d + i) % 4
            uid = f"UID{d}{i}"
            question = (f"According to the Fiscal Report {year}, what were {label.lower()} in "
                        f"fiscal year {years[k]}, in millions of nominal dollars?")
            gold, wrong = f"{values[k]:,}", f"{values[(k + 1) % 4]:,}"
            items.append(Item(uid, question, (gold,), wrong=wrong, keyword=label,
                              query=f"{label} Fiscal Report {year}"))
            rows.append({"uid": uid, "question": question, "ground_truth": gold,
                         "category": "easy", "source_files": name, "source_docs": ""})
        lines += ["", "Figures are preliminary and subject to revision."]
        (docs / name).write_text("\n".join(lines) + "\n")
    split_dir = work / "officeqa_split"
    for split, part in (("train", rows[:24]), ("val", rows[24:40]), ("test", rows[40:])):
        (split_dir / split).mkdir(parents=True, exist_ok=True)
        with (split_dir / split / f"officeqa_{split}.csv").open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(part)
    skill = work / "officeqa_skill.md"
    skill.write_text("# Answering from reports\n\nFind the report the question names, read the "
                     "figure it asks for and answer with it.\n")

    def skillopt_config(target: str, optimizer: str, out: Path, seed: int) -> Path:
        cfg = _skillopt_common(target, optimizer, out, seed)
        cfg["train"].update(num_epochs=1, batch_size=8, train_size=24)
        cfg["gradient"].update(minibatch_size=4, analyst_workers=2, failure_only=False)
        cfg["optimizer"].update(learning_rate=2, min_learning_rate=1)
        cfg["env"].update(name="officeqa", skill_init=str(skill), split_dir=str(split_dir),
                          data_dirs=[str(docs.parent)], workers=2, max_tool_turns=4,
                          max_completion_tokens=256, search_mode="offline")
        return _write_yaml(out / "skillopt.yaml", cfg)

    # skillgrad loads the same SkillOpt file; its target gets tools natively, as SkillOpt's does.
    return Setting("officeqa", items, 3, True, None, ["env.tool_mode=native"], skillopt_config)


def _skillopt_common(target: str, optimizer: str, out: Path, seed: int) -> dict[str, Any]:
    """A SkillOpt config with its features that skillgrad leaves off by default off too."""
    return {
        "model": {"backend": "azure_openai", "optimizer_backend": "openai_chat",
                  "target_backend": "openai_chat", "optimizer": "optimizer", "target": "target",
                  "reasoning_effort": "", "azure_openai_auth_mode": "openai_compatible",
                  "optimizer_azure_openai_endpoint": optimizer,
                  "target_azure_openai_endpoint": target},
        "train": {"accumulation": 1, "seed": seed},
        "gradient": {"merge_batch_size": 8},
        "optimizer": {"lr_scheduler": "cosine", "lr_control_mode": "fixed",
                      "skill_update_mode": "patch", "use_slow_update": False,
                      "use_meta_skill": False, "use_skill_aware_reflection": False},
        "evaluation": {"use_gate": True, "sel_env_num": 0, "test_env_num": 0,
                       "eval_test": False},
        "env": {"split_mode": "split_dir", "data_path": "", "split_output_dir": "",
                "out_root": str(out / "run")},
    }


def _write_yaml(path: Path, data: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


# ----------------------------------------------------------------------------- the responders


def _texts(body: dict[str, Any]) -> list[tuple[str, str]]:
    out = []
    for m in body.get("messages") or []:
        content = m.get("content")
        if isinstance(content, list):
            content = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        out.append((str(m.get("role")), str(content or "")))
    return out


def target_responder(system_name: str, setting: Setting) -> Callable[[dict[str, Any]], Any]:
    def respond(body: dict[str, Any]) -> Any:
        messages = _texts(body)
        system = "\n".join(t for role, t in messages if role == "system")
        user = "\n".join(t for role, t in messages if role == "user")
        item = next((i for i in setting.items if i.question in user), None)
        if item is None:
            return "I cannot tell."
        if setting.multi_turn and not any(role == "tool" for role, _ in messages):
            return completion_body("", tool_calls=[_tool_call(system_name, item, user)])
        answer = item.answers[0] if _right(item.question, system) else (
            item.wrong or f"The material says the answer is {item.answers[0]}.")
        return f"<answer>{answer}</answer>" if system_name == "skillopt" else f"Answer: {answer}"

    return respond


def _tool_call(system_name: str, item: Item, user: str) -> dict[str, Any]:
    if system_name == "skillopt":  # its local tools take a file of the candidate list
        path = re.search(r"^- (/\S+)$", user, re.MULTILINE)
        name, args = "grep", {"pattern": item.keyword, "path": path.group(1) if path else ""}
    else:
        name, args = "search", {"query": item.query}
    return {"id": f"call_{item.id}", "type": "function",
            "function": {"name": name, "arguments": json.dumps(args)}}


def classify(text: str, setting: Setting) -> str:
    """The kind of an optimizer request, from what it holds: analysts see tasks."""
    if '"selected_indices"' in text or '"order"' in text:
        return "rank"
    if any(item.question in text for item in setting.items):
        return "analyst"
    return "merge"


def optimizer_responder(system_name: str, setting: Setting) -> Callable[[dict[str, Any]], Any]:
    def respond(body: dict[str, Any]) -> Any:
        text = "\n".join(t for _, t in _texts(body))
        kind = classify(text, setting)
        if kind == "rank":
            if system_name == "skillopt":
                budget = re.search(r"budget=(\d+)", text)
                n = int(budget.group(1)) if budget else 1
                return json.dumps({"reasoning": REASONING, "selected_indices": list(range(n))})
            return json.dumps({"reasoning": REASONING, "order": list(range(1, 9))})
        limit = _edit_limit(system_name, body, text)
        if kind == "analyst":  # the next rules the prompt does not mention yet
            rules = [r for r in RULES if r not in text][:limit]
        else:  # a merge: the rules its proposals quote
            rules = [r for r in RULES if f'"{r}"' in text or f"'{r}'" in text][:limit]
        if system_name == "skillopt":
            edits: list[dict[str, Any]] = [{"op": "append", "content": r} for r in rules]
            if kind == "merge":
                return json.dumps({"reasoning": REASONING, "edits": edits})
            summary = [{"failure_type": "answer_format", "count": 1, "description": REASONING}]
            return json.dumps({"batch_size": 1, "failure_summary": summary,
                               "patch": {"reasoning": REASONING, "edits": edits}})
        edits = [{"rationale": REASONING, "content": r, "op": "append", "anchor": "",
                  "support": 1} for r in rules]
        return json.dumps({"reasoning": REASONING, "edits": edits})

    return respond


def _edit_limit(system_name: str, body: dict[str, Any], text: str) -> int:
    """How many edits the request allows: SkillOpt says L=N; skillgrad's schema has maxItems."""
    if system_name == "skillopt":
        found = re.search(r"L=(\d+)", text)
        return int(found.group(1)) if found else len(RULES)
    schema = ((body.get("response_format") or {}).get("json_schema") or {}).get("schema") or {}
    return int(schema.get("properties", {}).get("edits", {}).get("maxItems", len(RULES)))


# ----------------------------------------------------------------------------- running


@dataclass
class Measured:
    steps: int
    calls: Counter[str] = field(default_factory=Counter)
    tokens: Counter[str] = field(default_factory=Counter)
    schema_tokens: float = 0.0
    accepted: int = 0
    skill_chars: int = 0
    seconds: float = 0.0

    @property
    def per_step(self) -> float:
        return sum(self.tokens.values()) / max(self.steps, 1)

    def add(self, other: Measured) -> Measured:
        return Measured(self.steps + other.steps, self.calls + other.calls,
                        self.tokens + other.tokens, self.schema_tokens + other.schema_tokens,
                        self.accepted + other.accepted, self.skill_chars + other.skill_chars,
                        self.seconds + other.seconds)


def run_system(system_name: str, setting: Setting, out: Path, seed: int, skillopt: Path | None,
               python: str) -> Measured:
    if (out / "run").exists():  # an earlier run's: both systems would resume it, calling nothing
        shutil.rmtree(out / "run")
    out.mkdir(parents=True, exist_ok=True)
    target = FakeOpenAIServer(responder=target_responder(system_name, setting))
    optimizer = FakeOpenAIServer(responder=optimizer_responder(system_name, setting))
    started = time.perf_counter()
    with target, optimizer:
        if system_name == "skillopt":
            assert skillopt is not None
            config = setting.skillopt_config(target.url, optimizer.url, out, seed)
            _run([python, str(skillopt / "scripts" / "train.py"), "--config", str(config)],
                 out, cwd=skillopt)
            accepted, skill = _skillopt_outcome(out / "run")
        else:
            if setting.skillgrad_config is not None:
                config = setting.skillgrad_config
                sets = _skillgrad_models(target.url, optimizer.url)
            else:  # SkillOpt's file, its endpoints included, as skillgrad reads it
                config = setting.skillopt_config(target.url, optimizer.url, out, seed)
                sets = []
            sets += [*setting.skillgrad_sets, f"train.seed={seed}"]
            _run([str(SKILLGRAD), "train", str(config), "--out", str(out / "run"),
                  *(a for s in sets for a in ("--set", s))], out, cwd=out)
            accepted, skill = _skillgrad_outcome(out / "run")
        requests = list(optimizer.requests)
    measured = Measured(setting.steps, accepted=accepted, skill_chars=len(skill),
                        seconds=time.perf_counter() - started)
    with (out / "optimizer_requests.jsonl").open("w") as f:
        for body in requests:
            text = "\n".join(t for _, t in _texts(body))
            kind = classify(text, setting)
            measured.calls[kind] += 1
            measured.tokens[kind] += count_tokens(text)
            schema = body.get("response_format")
            measured.schema_tokens += count_tokens(json.dumps(schema)) if schema else 0.0
            f.write(json.dumps({"kind": kind, "tokens": count_tokens(text), "body": body}) + "\n")
    return measured


def _skillgrad_models(target: str, optimizer: str) -> list[str]:
    return [f"model.{role}.{key}={value}" for role, url in (("target", target),
                                                            ("optimizer", optimizer))
            for key, value in (("backend", "openai_compatible"), ("base_url", url),
                               ("model", role), ("max_retries", 0))] + [
        "evaluation.eval_test=false"]


def _run(argv: Sequence[str], out: Path, cwd: Path) -> None:
    env = {**os.environ, "SKILLGRAD_HOME": str(out / "home"), "PYTHONUNBUFFERED": "1"}
    (out / "home").mkdir(exist_ok=True)
    with (out / "log.txt").open("w") as log:
        done = subprocess.run(argv, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT,
                              timeout=1800, check=False)
    if done.returncode != 0:
        tail = (out / "log.txt").read_text()[-3000:]
        raise SystemExit(f"{argv[0]} failed ({done.returncode}); see {out / 'log.txt'}:\n{tail}")


def _skillopt_outcome(run: Path) -> tuple[int, str]:
    history = json.loads((run / "history.json").read_text())
    accepted = sum(1 for h in history if str(h.get("action", "")).startswith("accept"))
    skills = sorted((run / "skills").glob("skill_v*.md"))
    return accepted, skills[-1].read_text() if skills else ""


def _skillgrad_outcome(run: Path) -> tuple[int, str]:
    summary = json.loads((run / "summary.json").read_text())
    accepted = sum(n for decisions in summary["decisions_per_epoch"].values()
                   for decision, n in decisions.items() if decision.startswith("accept"))
    current = run / "current_skill.md"
    return accepted, current.read_text() if current.exists() else ""


# ----------------------------------------------------------------------------- the table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skillopt", type=Path, required=True,
                        help="SkillOpt's repository at its v0.2.0 tag")
    parser.add_argument("--skillopt-python", default="/tmp/skillopt-venv/bin/python",
                        help="a Python with SkillOpt 0.2.0's dependencies")
    parser.add_argument("--settings", nargs="+", default=["quickstart", "officeqa"],
                        choices=["quickstart", "officeqa"])
    parser.add_argument("--seeds", type=int, default=3, help="runs per system (train.seed 42, "
                        "43, ...), pooled")
    parser.add_argument("--skillgrad-set", action="append", default=[], metavar="KEY=VALUE",
                        help="another config override for the skillgrad runs (repeatable)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if not (args.skillopt / "skillopt" / "prompts" / "analyst_error.md").exists():
        raise SystemExit(f"{args.skillopt}: not a SkillOpt checkout with its prompt files")
    out = args.out or Path(tempfile.mkdtemp(prefix="optimizer-tokens-"))
    table = Table(title="Optimizer prompt tokens per step (characters / 4, counted at the "
                  "loopback optimizer endpoint)")
    for col in ("setting", "system", "steps", "optimizer calls", "tokens / step",
                "+ schema / step", "ratio", "accepted", "final skill chars", "wall s"):
        table.add_column(col, justify="left" if col in ("setting", "system", "optimizer calls")
                         else "right")
    prepare = {"quickstart": prepare_quickstart, "officeqa": prepare_officeqa}
    for name in args.settings:
        work = out / name
        setting = prepare[name](work / "data")
        setting.skillgrad_sets += args.skillgrad_set
        rows = {}
        for system_name in ("skillopt", "skillgrad"):
            total = Measured(0)
            for seed in range(42, 42 + args.seeds):
                total = total.add(run_system(system_name, setting, work / system_name /
                                             f"seed{seed}", seed, args.skillopt,
                                             args.skillopt_python))
            rows[system_name] = total
        base = rows["skillopt"].per_step
        for system_name, m in rows.items():
            calls = ", ".join(f"{k} {n}" for k, n in sorted(m.calls.items()))
            with_schema = m.per_step + m.schema_tokens / max(m.steps, 1)
            table.add_row(name, system_name, str(m.steps), calls, f"{m.per_step:,.0f}",
                          f"{with_schema:,.0f}", f"{m.per_step / base:.2f}", str(m.accepted),
                          f"{m.skill_chars / args.seeds:,.0f}", f"{m.seconds:.0f}")
    Console(width=160).print(table)
    print(f"requests and logs: {out}")


if __name__ == "__main__":
    main()
