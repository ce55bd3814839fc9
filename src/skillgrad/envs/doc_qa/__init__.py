"""The ``doc_qa`` environment (questions over a document collection with search / open / read
tools: the data set and loss of the OfficeQA family, :mod:`.env`) and ``officeqa`` (OfficeQA
from the user's copy, :mod:`.officeqa`), which shares its tools, rollout and shipped
``skill.md``. The bundled collection is in ``data/`` (see ``data/DATA_CARD.md``).
"""

from skillgrad.envs.doc_qa.corpus import Document, DocumentIndex, Section, sections_from_text
from skillgrad.envs.doc_qa.env import DocQAEnvironment, DocQAOptions, load_collection
from skillgrad.envs.doc_qa.officeqa import OfficeQAEnvironment, OfficeQAOptions
from skillgrad.envs.doc_qa.rollout import DocToolOptions, doc_rollout

__all__ = ["DocQAEnvironment", "DocQAOptions", "DocToolOptions", "Document", "DocumentIndex",
           "OfficeQAEnvironment", "OfficeQAOptions", "Section", "doc_rollout", "load_collection",
           "sections_from_text"]
