"""Playing one ALFWorld game in the real engine (the simulator behind the ``household`` loss).

A game is TextWorld's :class:`~textworld.envs.PddlEnv` (the Fast Downward planner drives the
state) with ALFWorld's name demangler, exactly what ``alfworld.agents.environment.alfred_tw_env``
assembles, minus its gym batching.

Concurrency: every :class:`Game` has its own environment and its own copy of the planner library
(``fast_downward.load_lib`` copies the shared object for that purpose), so no game state is
shared. TextWorld, however, parses grammars with module-global TatSu parsers that break when two
threads use them at once (seen here: ``IndexError`` deep in ``tatsu.contexts``). Every engine
call therefore holds :data:`_ENGINE_LOCK`. The calls are pure-Python CPU work that the GIL
serialises anyway, and the slow part of a rollout (the model) runs outside the lock, so
concurrent rollouts lose nothing.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from skillgrad.errors import ConfigError, DataError

INVALID_FEEDBACK = "Nothing happens."
GAME_KEYS = ("pddl_domain", "grammar", "pddl_problem")
_GOAL = re.compile(r"Your task is to: (.*?)\.?\"", re.DOTALL)
# Guards TextWorld's process-wide parsers (see the module docstring); it holds no game state.
_ENGINE_LOCK = threading.Lock()


def _require_engine() -> Any:
    try:
        import textworld
        from textworld.envs import PddlEnv
    except ImportError:
        raise ConfigError('env household needs alfworld: pip install "skillgrad[household]"'
                          ) from None
    return textworld, PddlEnv


@lru_cache(maxsize=1)
def game_logic() -> tuple[str, str]:
    """ALFWorld's PDDL domain and text grammar, read once from the installed package (they are
    immutable strings, so caching them shares no state)."""
    _require_engine()
    import alfworld

    folder = Path(alfworld.__file__).parent / "data"
    return ((folder / "alfred.pddl").read_text("utf-8"),
            (folder / "alfred.twl2").read_text("utf-8"))


def game_data(pddl_problem: str, goal: str) -> dict[str, Any]:
    """A ``game.tw-pddl`` object for a generated problem: ALFWorld's domain, its grammar with the
    goal sentence filled in (``add_task_to_grammar``), and the problem."""
    domain, grammar = game_logic()
    return {"pddl_domain": domain, "grammar": grammar.replace("UNKNOWN GOAL", goal),
            "pddl_problem": pddl_problem}


def goal_of_grammar(grammar: str) -> str | None:
    """The goal sentence an official game file's grammar carries, or None."""
    match = _GOAL.search(grammar)
    return match.group(1).strip() if match else None


@dataclass(frozen=True)
class Observation:
    """What one reset or step returns."""

    feedback: str
    admissible: tuple[str, ...]
    won: bool
    facts: frozenset[tuple[str, ...]]  # (predicate, *argument ids), lower case


class Game:
    """One playing of one game. Not thread-safe itself; make one per rollout."""

    def __init__(self, data: Mapping[str, Any], *, plan: bool = False) -> None:
        textworld, pddl_env = _require_engine()
        from alfworld.agents.utils.misc import Demangler

        infos = textworld.EnvInfos(admissible_commands=True, won=True, policy_commands=plan)
        with _ENGINE_LOCK:
            self._env = pddl_env(infos)
            self._env.load(dict(data))
        # What alfred_tw_env.AlfredDemangler does: "apple_bar_..." -> "apple 1".
        demangler = Demangler(game_infos=self._env._entity_infos)
        for info in self._env._entity_infos.values():
            info.name = demangler.demangle_alfred_name(info.id)
        self.names = {key: info.name for key, info in self._env._entity_infos.items()}
        self._state: Any = None

    def reset(self) -> Observation:
        with _ENGINE_LOCK:
            self._state = self._env.reset()
        return self._observe()

    def step(self, command: str) -> Observation:
        with _ENGINE_LOCK:
            self._state, _, _ = self._env.step(command)
        return self._observe()

    def plan(self) -> list[str]:
        """The planner's commands from the current state (needs ``plan=True``); [] if none."""
        return [str(c) for c in (self._state["policy_commands"] or [])]

    def _observe(self) -> Observation:
        facts = frozenset((str(f.name).lower(), *(str(v.name).lower() for v in f.arguments))
                          for f in self._state["_facts"])
        return Observation(str(self._state.feedback).strip(),
                           tuple(self._state["admissible_commands"]),
                           bool(self._state["won"]), facts)


def load_game(data: Mapping[str, Any], where: str, *, plan: bool = False) -> Game:
    """A :class:`Game`; a game the engine cannot load is one :class:`DataError` naming
    ``where`` (a file, a game id or a seed)."""
    try:
        return Game(data, plan=plan)
    except ConfigError:
        raise
    except Exception as exc:  # noqa: BLE001 - the engine reports bad PDDL with assorted types
        # The translator also fails here when it proves the goal unreachable (KeyError 'val1').
        raise DataError(f"{where}: unsolvable or malformed game; the engine cannot load it "
                        f"({exc!r})") from None


def solve(data: Mapping[str, Any], where: str) -> list[str]:
    """The planner's walkthrough of a game, checked by replaying it until ``won``.

    Raises :class:`DataError` naming ``where`` (a file or a seed) when the game does not load or
    has no winning plan.
    """
    game = load_game(data, where, plan=True)
    first = game.reset()
    plan = game.plan()
    if first.won:
        raise DataError(f"{where}: the goal already holds before any action")
    if not plan:
        raise DataError(f"{where}: unsolvable game (the planner finds no plan)")
    obs = first
    for command in plan:
        obs = game.step(command)
    if not obs.won:
        raise DataError(f"{where}: the planner's walkthrough does not win the game")
    return plan


def check_game_file(data: Any, path: Path) -> None:
    """Schema check of a ``game.tw-pddl`` object; one DataError naming the file."""
    if not isinstance(data, dict):
        raise DataError(f"{path}: expected a JSON object with {', '.join(GAME_KEYS)}")
    missing = [k for k in GAME_KEYS if not isinstance(data.get(k), str) or not data[k].strip()]
    if missing:
        raise DataError(f"{path}: missing or empty {', '.join(missing)}")
    walkthrough = data.get("walkthrough")
    if walkthrough is not None and (not isinstance(walkthrough, list)
                                    or not all(isinstance(c, str) for c in walkthrough)):
        raise DataError(f"{path}: 'walkthrough' must be a list of commands")
