"""bench/full_run.py's critical-path bound, on call graphs made by hand whose bound is worked out
here by hand; and the recording it is computed from (the client's observer, the fan-out
frames), with a scripted model. Nothing here is timed: the timestamps only order the calls."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

from skillgrad import parallel
from skillgrad.models.client import CallJournal, CallTiming, ModelClient
from skillgrad.models.messages import ChatRequest, Message
from skillgrad.models.scripted import ScriptedModel

ROOT = Path(__file__).resolve().parents[1]


def _load_full_run() -> Any:
    spec = importlib.util.spec_from_file_location("bench_full_run", ROOT / "bench" / "full_run.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_full_run"] = module
    spec.loader.exec_module(module)
    return module


full_run = _load_full_run()
Call = full_run.Call


class Graph:
    """Builds calls in the order they are made: each unit starts after the last one."""

    def __init__(self) -> None:
        self.calls: list[Any] = []
        self._fan_outs = 0

    def _at(self) -> float:
        return float(len(self.calls))

    def fan_out(self, scope: str, stage: str, workers: int, items: list[int],
                endpoint: str = "e") -> None:
        """A fan-out whose item ``i`` makes ``items[i]`` calls one after the other."""
        self._fan_outs += 1
        for i, n in enumerate(items):
            for _ in range(n):
                t = self._at()
                self.calls.append(Call(scope, stage, endpoint, ((self._fan_outs, workers, i),),
                                       started=t, ended=t + 0.5))

    def single(self, scope: str, stage: str, endpoint: str = "e") -> None:
        t = self._at()
        self.calls.append(Call(scope, stage, endpoint, (), started=t, ended=t + 0.5))


def rounds(graph: Graph, limits: dict[str, int]) -> list[tuple[str, str, int]]:
    return [(p.scope, p.stage, p.rounds) for p in full_run.phases(graph.calls, limits)]


def test_a_step_is_its_stages_in_sequence() -> None:
    g = Graph()
    g.fan_out("s1", "rollout", 4, [1] * 8)     # 8 calls on 4 threads: 2 rounds
    g.fan_out("s1", "reflect", 4, [1] * 5)     # 5 analysts on 4 threads: 2 rounds
    g.fan_out("s1", "aggregate", 4, [1, 1])    # a merge level of two groups: 1
    g.single("s1", "aggregate")                # the level above it: 1
    g.single("s1", "select")                   # rank: 1
    g.single("s1", "select")                   # the learning rate reads the ranking: 1
    g.fan_out("s1", "eval_val", 4, [1] * 8)    # the candidate's selection evaluation: 2
    assert rounds(g, {"e": 16}) == [("s1", "rollout", 2), ("s1", "reflect", 2),
                                    ("s1", "aggregate", 1), ("s1", "aggregate", 1),
                                    ("s1", "select", 1), ("s1", "select", 1),
                                    ("s1", "eval_val", 2)]
    assert full_run.bound(g.calls, 0.1, {"e": 16}) == 10 * 0.1


def test_the_endpoint_limit_caps_a_phase_below_its_threads() -> None:
    g = Graph()
    g.fan_out("s1", "rollout", 8, [1] * 8)     # 8 threads, but 2 calls at a time: 4 rounds
    assert rounds(g, {"e": 2}) == [("s1", "rollout", 4)]


def test_the_evaluations_the_semantics_let_overlap_share_a_phase() -> None:
    g = Graph()
    # An epoch's update: both skills' longitudinal rollouts (2 + 2 calls on 4 threads: one
    # round, not two), then meta skill, then slow update, then the gate's evaluation.
    g.fan_out("e2", "longitudinal", 4, [1, 1])
    g.fan_out("e2", "longitudinal", 4, [1, 1])
    g.single("e2", "meta_skill")
    g.single("e2", "slow_update")
    g.fan_out("e2", "eval_val", 4, [1, 1])
    # The final evaluation: three skills, 3 tasks each, on 4 threads: ceil(9 / 4) = 3 rounds.
    for _ in range(3):
        g.fan_out("final", "eval_test", 4, [1, 1, 1])
    assert rounds(g, {"e": 16}) == [("e2", "longitudinal", 1), ("e2", "meta_skill", 1),
                                    ("e2", "slow_update", 1), ("e2", "eval_val", 1),
                                    ("final", "eval_test", 3)]


def test_units_that_must_wait_for_each_other_do_not_share_a_phase() -> None:
    g = Graph()
    g.fan_out("s1", "rollout", 4, [1, 1])      # two accumulated batches: each batch's rollouts
    g.fan_out("s1", "rollout", 4, [1, 1])      # stay a phase of their own
    g.fan_out("s1", "eval_val", 4, [1, 1])
    g.fan_out("s2", "eval_val", 4, [1, 1])     # another scope: after the first one's
    assert rounds(g, {"e": 16}) == [("s1", "rollout", 1), ("s1", "rollout", 1),
                                    ("s1", "eval_val", 1), ("s2", "eval_val", 1)]


def test_a_job_of_several_calls_and_uneven_jobs() -> None:
    g = Graph()
    g.fan_out("s1", "reflect", 4, [1, 2, 1])   # an analyst asked again: the longest job, 2
    g.fan_out("s1", "aggregate", 2, [2, 2, 2])  # 3 jobs of 2 on 2 threads: one thread runs
    assert rounds(g, {"e": 16}) == [           # two of them, 4 (the endpoint alone: 6/16)
        ("s1", "reflect", 2), ("s1", "aggregate", 4)]


def test_a_fan_out_inside_a_job_counts_as_that_fan_outs_bound() -> None:
    g = Graph()
    for i in range(4):                         # 4 items on 2 threads, each running a rollout
        t = float(len(g.calls))                # fan-out of one task inside it
        g.calls.append(Call("s1", "eval_test", "e", ((1, 2, i), (10 + i, 1, 0)), started=t,
                            ended=t + 0.5))
    assert rounds(g, {"e": 16}) == [("s1", "eval_test", 2)]


def test_each_endpoint_has_its_own_limit() -> None:
    g = Graph()
    g.fan_out("s1", "eval_val", 8, [1, 1, 1], endpoint="slow")   # limit 1: 3 rounds
    g.fan_out("s1", "eval_val", 8, [1, 1, 1], endpoint="fast")   # limit 4: 1 round
    assert rounds(g, {"slow": 1, "fast": 4}) == [("s1", "eval_val", 3)]


def test_the_recorded_graph_of_real_fan_outs_gives_their_bound(tmp_path: Path) -> None:
    """The observer and the fan-out frames, end to end: five calls on two threads are three
    rounds; a call made on its own after them is a fourth."""
    model = ScriptedModel(default="ok")
    client = ModelClient(model, "target", concurrency=4)
    recorder = full_run.Recorder(tmp_path, {"target": "e"})
    client.observer = recorder
    journal = CallJournal(tmp_path / "step" / "calls.jsonl")
    stage = client.for_stage("rollout", journal)

    def ask(i: int) -> str:
        return stage.complete(ChatRequest(messages=(Message(role="user", content=f"q{i}"),))).text

    assert parallel.fan_out(ask, list(range(5)), 2, "rollout") == ["ok"] * 5
    client.for_stage("select", journal).complete(
        ChatRequest(messages=(Message(role="user", content="rank"),), kind="rank"))
    calls = recorder.calls()
    assert [(c.scope, c.stage, c.kind) for c in calls] == [("step", "rollout", None)] * 5 + [
        ("step", "select", "rank")]
    assert sorted(c.frames[0][2] for c in calls[:5]) == [0, 1, 2, 3, 4]
    assert {c.frames[0][:2] for c in calls[:5]} == {(0, 2)} and calls[5].frames == ()
    assert full_run.bound(calls, 1.0, {"e": 4}) == 4.0


def test_the_observer_sees_attempts_only_and_changes_no_record(tmp_path: Path) -> None:
    seen: list[CallTiming] = []
    request = ChatRequest(messages=(Message(role="user", content="hello"),))
    for folder, observer in (("plain", None), ("observed", seen.append)):
        client = ModelClient(ScriptedModel(["hi"]), "target", observer=observer)
        client.call(request, stage="rollout", journal=CallJournal(tmp_path / folder / "c.jsonl"))
    plain, observed = ([{k: v for k, v in json.loads(line).items() if k != "seconds"}
                        for line in (tmp_path / f / "c.jsonl").read_text().splitlines()]
                       for f in ("plain", "observed"))
    assert plain == observed and len(plain) == 1 and len(seen) == 1
    assert (seen[0].role, seen[0].stage, seen[0].outcome) == ("target", "rollout", "ok")
    assert seen[0].journal == tmp_path / "observed" / "c.jsonl"
    assert seen[0].ended >= seen[0].started
    replayed = ModelClient(ScriptedModel([]), "target", observer=seen.append)
    again = replayed.call(request, stage="rollout",
                          journal=CallJournal(tmp_path / "observed" / "c.jsonl"))
    assert again.text == "hi" and len(seen) == 1  # answered by the journal: no attempt


def test_frames_say_which_fan_out_item_runs() -> None:
    def where(_x: int) -> list[tuple[str, int]]:
        inner = parallel.fan_out(lambda _y: [(f.fan_out.name, f.index) for f in parallel.frames()],
                                 [0], 1, "inner")
        return inner[0]

    assert parallel.frames() == ()
    got = parallel.fan_out(where, [0, 1, 2], 2, "outer")
    assert got == [[("outer", i), ("inner", 0)] for i in range(3)]
    assert parallel.frames() == ()
