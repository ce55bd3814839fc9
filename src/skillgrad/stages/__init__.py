"""The stages of a training step, one module each: rollout (forward pass), reflect (backward
pass), aggregate (gradient accumulation), select and schedule (clipping, learning rate), update
(optimizer step), gate (validation), and the epoch-level slow update and meta skill; rewrite and
appendix serve the other update modes. Each is a pure function of its inputs and the model it
is handed; :mod:`skillgrad.stages.candidate` runs aggregate, select and update per update mode.
"""
