"""The ``docvqa`` environment (:mod:`.env`): questions about document page images scored by
ANLS, with its shipped ``skill.md`` (the data is the user's copy of DocVQA)."""

from skillgrad.envs.docvqa.env import DocVQAEnvironment, DocVQAOptions, load_docvqa

__all__ = ["DocVQAEnvironment", "DocVQAOptions", "load_docvqa"]
