"""Partial credit for a household game, read off the engine's state (the soft part of the loss).

Each task type has an ordered list of milestones, the sub-goals every solution passes through
(find the target, pick it up, transform it, bring it to the destination, ...). A state's level is
the furthest milestone that holds in it, judged from the planner's facts, never from the text;
the soft score of an episode is the best level it reached over the number of milestones, and a
won game is always at the top.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from skillgrad.envs.household.engine import Observation

# task type -> (the engine's flag, what the agent did, what the object became)
_TRANSFORM = {"pick_clean_then_place_in_recep": ("isclean", "cleaned", "clean"),
              "pick_heat_then_place_in_recep": ("ishot", "heated", "hot"),
              "pick_cool_then_place_in_recep": ("iscool", "cooled", "cool")}


@dataclass
class _View:
    """The facts of one state, indexed for the milestone tests."""

    types: dict[str, str] = field(default_factory=dict)
    where: dict[str, str] = field(default_factory=dict)
    at: dict[str, str] = field(default_factory=dict)
    held: set[str] = field(default_factory=set)
    flags: set[tuple[str, str]] = field(default_factory=set)
    agent_at: str = ""

    @classmethod
    def of(cls, facts: Iterable[tuple[str, ...]]) -> _View:
        view = cls()
        for fact in facts:
            name, args = fact[0], fact[1:]
            if name in ("objecttype", "receptacletype") and len(args) == 2:
                view.types[args[0]] = args[1]
            elif name == "inreceptacle" and len(args) == 2:
                view.where[args[0]] = args[1]
            elif name == "receptacleatlocation" and len(args) == 2:
                view.at[args[0]] = args[1]
            elif name == "holds" and len(args) == 2:
                view.held.add(args[1])
            elif name == "atlocation" and len(args) == 2:
                view.agent_at = args[1]
            elif len(args) == 1:
                view.flags.add((name, args[0]))
        return view

    def of_type(self, kind: str) -> list[str]:
        return [o for o, t in self.types.items() if t == kind]

    def here(self, receptacle: str) -> bool:
        return bool(self.agent_at) and self.at.get(receptacle) == self.agent_at

    def visible(self, obj: str) -> bool:
        r = self.where.get(obj)
        if obj in self.held:
            return True
        if r is None or not self.here(r):
            return False
        return ("openable", r) not in self.flags or ("opened", r) in self.flags


Test = Callable[[_View], bool]


def milestones(task_type: str, obj: str, recep: str, toggle: str) -> list[tuple[str, Test]]:
    """The ordered milestones of a task; the last is the goal (the engine's ``won``)."""
    o, r, t = (f"{x.lower()}type" for x in (obj, recep, toggle))
    name, dest, lamp = obj.lower(), recep.lower(), toggle.lower()

    def found(v: _View) -> bool:
        return any(v.visible(x) or v.types.get(v.where.get(x, "")) == r for x in v.of_type(o))

    def picked(v: _View) -> bool:
        return any(x in v.held for x in v.of_type(o))

    steps: list[tuple[str, Test]] = [(f"found a {name}", found), (f"picked up a {name}", picked)]
    if task_type in _TRANSFORM:
        flag, did, became = _TRANSFORM[task_type]
        steps.append((f"{did} a {name}", lambda v: any((flag, x) in v.flags
                                                       for x in v.of_type(o))))
        steps.append((f"put the {became} {name} in {dest}", lambda v: False))
    elif task_type == "look_at_obj_in_light":
        steps.append((f"stood at the {lamp} holding a {name}", lambda v: picked(v) and any(
            v.here(v.where.get(x, "")) for x in v.of_type(t))))
        steps.append((f"turned on the {lamp} while holding the {name}", lambda v: False))
    elif task_type == "pick_two_obj_and_place":
        steps.append((f"put one {name} in {dest}", lambda v: any(
            v.types.get(v.where.get(x, "")) == r for x in v.of_type(o))))
        steps.append((f"put a second {name} in {dest}", lambda v: False))
    else:
        steps.append((f"put the {name} in {dest}", lambda v: False))
    return steps


def level(steps: list[tuple[str, Test]], obs: Observation) -> int:
    """How many milestones this state has reached (the furthest that holds, 1-based)."""
    if obs.won:
        return len(steps)
    view = _View.of(obs.facts)
    return max((i for i, (_, test) in enumerate(steps, start=1) if test(view)), default=0)
