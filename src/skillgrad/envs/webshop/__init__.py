"""WebShop's text web shop (Yao et al. 2022): search, open, choose options, buy; scored with
WebShop's reward. Plays the bundled generated catalogue (``data/``, see ``data/DATA_CARD.md``)
or WebShop's published data files, with the shipped ``skill.md``."""

from skillgrad.envs.webshop.env import WebShopEnvironment, WebShopOptions

__all__ = ["WebShopEnvironment", "WebShopOptions"]
