"""The continuity harness as a command runs it: one entry point (RFC 0028, fifth amendment).

``holon-ctx inspect-continuity`` runs the resumption experiment (:mod:`.experiment`) and
``holon-ctx eval-continuity`` the full-vs-compacted evaluation (:mod:`.evaluation`). The command
line needs both runs, what each returns (for its tables and JSON) and the seed's policy version
(its option's default); they are gathered here so the CLI names one thing of the harness's
instead of five.
"""

from __future__ import annotations

from typing import Final, TypeAlias

from holon_ctx.continuity.evaluation import ScenarioResult, run_evaluation
from holon_ctx.continuity.experiment import ExperimentResult, run_experiment
from holon_ctx.continuity.scenario import SEED

__all__ = ["ContinuityHarness"]


class ContinuityHarness:
    """The harness's runs and results, as attributes: nothing to instantiate."""

    #: The policy version the seed envelope is compacted under (``--current-policy-version``'s
    #: default, so a resumption under it is not a policy change).
    SEED_POLICY_VERSION: Final = SEED.policy_version
    #: One scenario's full-history and compacted-history outcomes.
    Scenario: TypeAlias = ScenarioResult
    #: The experiment's decision, envelope and trace events.
    Experiment: TypeAlias = ExperimentResult
    #: Run every scenario on both paths.
    evaluation = staticmethod(run_evaluation)
    #: Compact and rehydrate the seed's session with the given faults.
    experiment = staticmethod(run_experiment)
