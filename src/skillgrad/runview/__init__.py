"""Reading run directories back: what ``skillgrad show`` (:mod:`.show`), ``diff``
(:mod:`.versions`) and ``compare`` (:mod:`.compare`) print and the dashboard renders. Pure
logic over the files :class:`~skillgrad.rundir.RunDir` names; the console is the CLI's."""

from skillgrad.runview.common import (
    ACCEPTED,
    EditView,
    EpochView,
    GateView,
    ProposalView,
    RunView,
    StepView,
    jsonable,
    load_state,
    step_name,
)
from skillgrad.runview.compare import (
    UNCOMPARED,
    Column,
    ConfigDiff,
    ConfigRow,
    Gain,
    column_label,
    compare_rows,
    config_cell,
    config_diff,
    gain_line,
    gains,
    paired_interval,
    per_task_results,
    priced_roles,
    run_column,
    run_configs,
    skill_column,
)
from skillgrad.runview.rollouts import RolloutsView, RolloutView, read_rollouts
from skillgrad.runview.show import read_run
from skillgrad.runview.versions import Versions, load_versions

__all__ = ["ACCEPTED", "UNCOMPARED", "Column", "ConfigDiff", "ConfigRow", "config_cell",
           "config_diff", "priced_roles", "run_configs", "EditView", "EpochView", "Gain", "GateView", "ProposalView",
           "RolloutView", "RolloutsView", "RunView", "StepView", "Versions", "column_label", "compare_rows", "gain_line",
           "gains", "jsonable", "load_state", "load_versions", "paired_interval",
           "per_task_results", "read_rollouts", "read_run", "run_column", "skill_column", "step_name"]
