"""The spottune error family (see ``docs/design/decisions.md``, "Errors").

Only :mod:`spottune.cli` catches these bases; it turns them into one line and exit code 2.
Each subclass also inherits the built-in it resembles, so ``except ValueError`` still works.
"""


from spotmarket.errors import MarketError  # noqa: F401  (re-exported: market errors live in spotmarket)


class SpottuneError(Exception):
    """Base class of every error spottune raises on purpose."""


class ConfigError(SpottuneError, ValueError):
    """An experiment option or CLI argument is invalid; the message names the value and the rule."""


class BackendError(SpottuneError, RuntimeError):
    """A backend (sim, local, aws, ray) could not carry out an action."""


class CheckpointError(SpottuneError, RuntimeError):
    """A checkpoint could not be stored or restored intact."""


class IllegalTransition(SpottuneError, RuntimeError):
    """A trigger is not legal for a trial in its current state; the trial is left unchanged.

    Parameters
    ----------
    trial_id : str
    state : str
        The trial's state, unchanged.
    trigger : str
        The event or action, with its marker, e.g. ``"CheckpointSaved(reason=hop)"``.
    """

    def __init__(self, trial_id: str, state: str, trigger: str):
        self.trial_id, self.state, self.trigger = trial_id, state, trigger
        super().__init__(f"trial {trial_id}: can't handle {trigger} in state {str(state).upper()}")


class UnexpectedEvent(IllegalTransition):
    """The driver or the cloud sent an event that is impossible in the trial's state (their fault)."""


class InvalidAction(IllegalTransition):
    """The policy tried an action that is illegal in the trial's state (an orchestrator bug)."""


class JournalMismatch(SpottuneError, RuntimeError):
    """Replaying a run's journal produced a record other than the journaled one (never a silent divergence).

    Parameters
    ----------
    position : int
        The record's position ``n`` in the journal.
    expected, got : dict
        The journaled record and the replayed one.
    """

    def __init__(self, position: int, expected: dict, got: dict):
        self.position, self.expected, self.got = position, expected, got
        super().__init__(f"journal record {position} differs on replay: journaled {_short(expected)}, "
                         f"replayed {_short(got)} (the code, the data or the spec changed since the run started)")


def _short(record: dict) -> str:
    text = repr(record)
    return text if len(text) <= 300 else text[:297] + "..."
