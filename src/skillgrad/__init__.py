"""skillgrad: train the skill document of a frozen LLM agent like the weights of a network."""

__version__ = "0.1.0"
