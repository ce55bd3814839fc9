"""``skillgrad dashboard``: a local, read-only web dashboard over run directories (the
training curves a deep-learning run is watched through, with the reasons for every update kept
or refused).

Needs the ``dashboard`` extra (Starlette, uvicorn, Jinja2); only :mod:`.cli` imports without
it, so that the command can say how to install it.
"""
