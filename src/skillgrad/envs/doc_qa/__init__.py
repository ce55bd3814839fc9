"""The ``doc_qa`` environment (questions over a document collection with search / open / read
tools: the data set and loss of the OfficeQA family) and the pieces ``officeqa`` shares with it.

The entry point is ``skillgrad.envs.doc_qa:DocQAEnvironment``.
"""

from skillgrad.envs.doc_qa.corpus import Document, DocumentIndex, Section, sections_from_text
from skillgrad.envs.doc_qa.env import DocQAEnvironment, DocQAOptions, load_collection
from skillgrad.envs.doc_qa.rollout import DocToolOptions, doc_rollout

__all__ = ["DocQAEnvironment", "DocQAOptions", "DocToolOptions", "Document", "DocumentIndex",
           "Section", "doc_rollout", "load_collection", "sections_from_text"]
