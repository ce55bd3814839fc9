"""The ``open_qa`` environment (:mod:`.env`): open-domain questions answered with a search
tool, with its shipped ``skill.md`` and bundled data (``data/``, see ``data/DATA_CARD.md``)."""

from skillgrad.envs.open_qa.env import (
    OpenQAEnvironment,
    OpenQAOptions,
    Paragraph,
    Question,
    SearchIndex,
    load_squad,
    tokens,
)

__all__ = ["OpenQAEnvironment", "OpenQAOptions", "Paragraph", "Question", "SearchIndex",
           "load_squad", "tokens"]
