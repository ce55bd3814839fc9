"""The command line: ``skillgrad`` and its commands (:mod:`.main` builds the app and holds
``train`` and ``eval``; :mod:`.config`, :mod:`.runs`, :mod:`.export`, :mod:`.dashboard` and
:mod:`.sleep` the rest). The console and the one-line failure are :mod:`skillgrad.console`'s;
no module below the command line imports this package."""
