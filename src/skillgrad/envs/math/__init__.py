"""The ``math`` environment (:mod:`.env`): problems with one final answer, checked for
equivalence, with its shipped ``skill.md`` and bundled problems (``data/``, see
``data/DATA_CARD.md``)."""

from skillgrad.envs.math.env import MathEnvironment, MathOptions

__all__ = ["MathEnvironment", "MathOptions"]
