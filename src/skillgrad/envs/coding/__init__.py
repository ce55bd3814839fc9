"""Small requests to a coding agent in real git repositories (``coding``, :mod:`.env`), scored
by each task's checks in the working copy the agent leaves; the bundled task set is in
``data/`` (see ``data/DATA_CARD.md``), written by :mod:`.generate`."""

from skillgrad.envs.coding.env import CodingEnvironment, CodingOptions

__all__ = ["CodingEnvironment", "CodingOptions"]
