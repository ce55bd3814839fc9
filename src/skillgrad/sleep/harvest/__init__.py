"""Harvest: a night's reading of the sessions local coding agents wrote, through the session
readers of :mod:`skillgrad.traces` (one adapter per agent, shared with the agent targets).
:class:`~skillgrad.sleep.harvest.harvester.Harvester` walks them for one project.
"""
