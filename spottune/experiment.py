"""The experiment spec: everything a tuning run needs, validated when it is built.

Options use Ray Tune's vocabulary where it exists (``metric``, ``mode``, ``max_steps``,
``num_samples``, ``storage_path``, ``max_failures``) and SpotTune's own names otherwise (``theta``,
``top_k``; the paper's Table I). An :class:`ExperimentSpec` comes from Python, from a YAML file
(:meth:`ExperimentSpec.from_yaml`), and CLI flags override the file
(:meth:`ExperimentSpec.with_overrides`). ``ExperimentSpec()`` is the default experiment: ``digits-mlp``
(16 configurations) on every market of the ``us-east-1_2015`` trace (5 types x 3 zones = 15), θ = 0.7,
top-3, the simulator in the legacy (2017 bid) market mode.

Every field is checked when the spec is built (a pydantic model of the fields' types, bounds and cross-field
rules; the ``aws`` and ``ray`` mappings against the fields of :class:`AwsOptions` and :class:`RayOptions`, which
the backends' settings extend); an invalid value raises :class:`~spottune.errors.ConfigError` with one line naming the option, the value and the rule.

Fields left as None that the workload knows (``metric``, ``mode``, ``max_steps``, ``search_space``,
``num_samples``) are filled from it at construction, and re-derived if an override changes the
workload.

Example YAML::

    workload: logreg
    search_space:
      lr: {loguniform: [0.001, 0.1]}
      l2: {grid_search: [0.0, 0.01]}
    num_samples: 4
    theta: 0.8
    top_k: 2
    instance_types: [r3.large, c3.xlarge]
    storage_path: s3://my-bucket/spottune
    storage_options: {endpoint_url: "http://127.0.0.1:8333"}
"""

from __future__ import annotations

import dataclasses
import difflib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin, get_type_hints

import pandas as pd
import yaml
from provisioner import DEFAULT_EXCLUSION_S
from pydantic import (AfterValidator, AllowInfNan, BaseModel, BeforeValidator, ConfigDict, Field, Strict,
                      ValidationError, ValidationInfo, create_model, field_validator)

from spottune.checkpoint._secrets import has_userinfo, redact
from spottune.speed import DEFAULT_BOOT_S
from spottune.errors import ConfigError
from spottune.orchestrator._config import check_rungs, steps_at
from spottune.search_space import count_configs, generate_configs, has_domain, parse_space, space_to_dict
from spottune.trainable import Trainable, parse_resources, trial_seed
from spottune.workloads import Workload, get_workload

__all__ = ["AWS_KEYS", "AwsOptions", "RAY_KEYS", "RayOptions", "BACKENDS", "BILLING", "DEADLINE_MODES", "SEARCHES", "DEFAULT_START_UTC", "MARKET_MODES", "OBJECTIVES", "PREDICTORS", "PREDICTOR_KINDS", "EVALUATION_ONLY_PREDICTORS", "SPEED_MODELS", "DEFAULT_STOPPER", "STOPPERS", "BARRIER_STOPPERS", "ExperimentSpec",
           "TrialSpec"]

BACKENDS = ("sim", "local", "aws", "ray")
MARKET_MODES = ("legacy", "modern")
#: Revocation predictors for Eq 1 (:func:`spottune.compose.make_predictor`). ``revpred`` and ``tributary`` are trained
#: LSTMs (cached on disk), ``constant`` a per-market hazard fitted on the training window, ``hindsight`` is the replay's
#: own future as p (perfect p in Eq 2, evaluation only; not a lower bound), ``none`` is p = 0. ``calibrated`` is
#: trained on the provisioner's own (market, time, max price) queries, monotone in the max price; ``online-hazard``
#: adds a per-market capacity-interruption rate learned online during the run (modern mode). ``auto`` (the default)
#: is ``calibrated`` in legacy mode and ``online-hazard`` in modern mode.
PREDICTOR_KINDS = ("auto", "revpred", "tributary", "constant", "hindsight", "none", "calibrated", "online-hazard")
#: The kinds of :data:`PREDICTOR_KINDS` that only ``spottune simulate`` offers (a spec refuses them).
EVALUATION_ONLY_PREDICTORS = ("tributary", "hindsight")
#: The predictors a spec may name: :data:`PREDICTOR_KINDS` without :data:`EVALUATION_ONLY_PREDICTORS`.
PREDICTORS = tuple(k for k in PREDICTOR_KINDS if k not in EVALUATION_ONLY_PREDICTORS)
#: Provisioner objectives: ``refund`` (expected USD per useful step over the decision horizon, choosing
#: the market and the max price; design R1) and ``paper`` (SpotTune's Eq 2 with the D1 max price).
OBJECTIVES = ("refund", "paper")
#: Provisioning of the SpotTune-provisioned policies (``spottune-<θ>``, ``optuna-*``): ``spottune`` (the default: with the
#: refund objective, :class:`provisioner.GuardedProvisioner`, spot-restart's choice unless another candidate beats it by
#: ``spottune.compose.provisioning.DEFAULT_RESTART_MARGIN``, no hourly hop; decision R12), ``refund-hop`` (the
#: refund objective's choice unguarded, with hourly hops: the default before 2026-11-29), ``restart`` (spot-restart's:
#: cheapest market at each launch, max price = on-demand, no hop), which compares the stoppers on a provisioning that
#: does not depend on when a trial will stop, or ``restart-failover`` (``restart`` that, after a capacity refusal,
#: leaves that market out for 30 min and relaunches at once in the next cheapest: SkyPilot's failover, design E12).
PROVISIONINGS = ("spottune", "refund-hop", "restart", "restart-failover")
#: How the refund objective's performance matrix predicts an instance type a trial has not run on (design R9):
#: ``pooled`` learns the speed ratios between types from all trials of the run (:class:`provisioner.PooledSpeedMatrix`),
#: ``cores`` is the per-trial ``κ / cores`` rule (:class:`provisioner.PerformanceMatrix`; the paper's T starts from the
#: CPU cores, §III-A).
SPEED_MODELS = ("pooled", "cores")
#: The refund objective's default value of the job's time, USD per job-hour (design R11, chosen by its rule on the
#: tuning starts: ``benchmarks/bench_time_value.py --per job``).
DEFAULT_JOB_TIME_VALUE_USD_PER_HOUR = 0.01
#: Early-stopping rules: ``paper`` (EarlyCurve at θ, as published), ``rank`` (the rank-confidence rule
#: at rungs before θ, then the last value's top-k at θ), ``predictive`` (predictive ASHA at rungs before θ, then
#: the same), ``barrier`` (no rungs, the last value's top-k at θ) and ``hparams`` (``barrier`` with every barrier ranked
#: by the final loss predicted from the trial's hyperparameters and curve, learned from previous runs of the search
#: space, :class:`earlycurve.HyperparameterCurvePredictor`); :mod:`spottune._early_stop`.
STOPPERS = ("paper", "rank", "predictive", "barrier", "hparams")
#: Stoppers whose barriers are synchronous and may have rungs before θ.
BARRIER_STOPPERS = ("barrier", "hparams")
#: The default stopper (design ES18): the θ barrier ranked by the last value; ``paper`` is the faithful one.
DEFAULT_STOPPER = "barrier"
BILLING = ("second", "hour")
#: How the trials' configurations are searched (decision SV13): ``random`` and ``grid`` (the same thing, Ray Tune's
#: BasicVariantGenerator: every configuration of :func:`~spottune.search_space.generate_configs` runs, the grid's
#: cross product ``num_samples`` times with the random domains drawn anew) or ``gp-ucb``: those configurations are the
#: candidates, and ``trial_budget`` of them run one after another, each picked by cost-aware GP-UCB
#: (:class:`spottune.scheduling.CostAwareGPUCB`, SV6) from the results so far.
SEARCHES = ("random", "grid", "gp-ucb")
#: What a run with both ``deadline`` and ``budget_usd`` executes (decision DB14): ``plan`` runs
#: SEER's printed plan (``seer-predictive``: brackets, wall-clock rounds, elimination by EarlyCurve's predicted
#: final value; sim backend only), ``guard`` runs SpotTune's Algorithm 1 under the budget cap and the deadline
#: guard (the plan is only printed).
DEADLINE_MODES = ("plan", "seer", "guard")
#: Start of a run whose spec leaves ``start_utc`` as None (decision D10: the 2015 trace's default window).
DEFAULT_START_UTC = pd.Timestamp("2015-05-05T00:00Z")
#: Largest ``max_steps``: a bigger budget is a typo (it would run for hours of wall time in the simulator).
MAX_STEPS = 1_000_000
#: Longest predictor training window, days (ten years; the shipped traces span months).
MAX_TRAIN_DAYS = 3650.0
#: Most trials in one experiment (``num_samples`` x grid size): every trial is built before the run starts.
MAX_TRIALS = 10_000
#: Longest launch-to-training latency, seconds: an instance is relaunched at its hourly hop, so a boot of an hour
#: or more would never train a step.
MAX_BOOT_S = 3600.0
#: Slowest local, ray or aws time scale, simulated seconds per wall-clock second (1 is real time).
MIN_TIME_SCALE = 1.0
#: ``storage_path`` URL schemes the checkpoint store reads ("" is a plain folder).
STORAGE_SCHEMES = ("", "file", "s3", "s3a", "memory")
_FROM_WORKLOAD = ("metric", "mode", "max_steps", "search_space", "num_samples")
_ALIASES = {"trainable": "workload", "pool_types": "instance_types", "zones": "availability_zones",
            "k": "top_k", "storage": "storage_path", "start": "start_utc"}


class _UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a mapping with the same key twice (the second would silently win)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # "<<: *anchor" may be overridden by the mapping's own keys
                continue
            key = self.construct_object(key_node, deep=deep)
            line = key_node.start_mark.line + 1
            try:
                first = seen.get(key)
                seen.setdefault(key, line)
            except TypeError:  # an unhashable key: SafeLoader's own error follows
                continue
            if first is not None:
                raise yaml.YAMLError(f"key {key!r} appears twice in one mapping (lines {first} and {line}); keep one")
        return super().construct_mapping(node, deep=deep)


@dataclass(frozen=True, slots=True, kw_only=True)
class TrialSpec:
    """One trial of an experiment: its id, position, configuration and seed.

    Attributes
    ----------
    trial_id : str
        ``t00``, ``t01``, ... (zero-padded to the width of the trial count).
    index : int
        Position in :func:`~spottune.search_space.generate_configs` order.
    config : dict
        The hyperparameter configuration.
    seed : int
        Seed of the trial's ``Trainable.rng`` (:func:`~spottune.trainable.trial_seed`).
    """

    trial_id: str
    index: int
    config: dict[str, Any]
    seed: int


def _storage_scheme(path: str) -> str:
    """The URL scheme of a storage path (``s3``, ``file``, ...), or ``""`` for a plain folder."""
    scheme, sep, _ = path.partition("://")
    return scheme.lower() if sep else ""


def _normalise_key(key: str) -> str:
    k = str(key).strip().replace("-", "_")
    return _ALIASES.get(k, k)


def _is_int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def parse_predictive_options(value: Mapping[str, Any] | str | None, stopper: str) -> dict[str, Any] | None:
    """Predictive ASHA's settings (``predictive_options``, ``--predictive-options``) from a mapping or JSON object
    text, checked (:func:`earlycurve.check_predictive_options`); None when not given (None, ``""``, ``{}`` or JSON
    ``null``). Where they may lie against θ is :func:`check_predictive_rungs`.

    Raises
    ------
    ConfigError
        Text that is not a JSON object, settings that :func:`earlycurve.check_predictive_options` refuses, or settings
        with a ``stopper`` other than ``predictive`` (one line).
    """
    import json

    from earlycurve import InvalidCurveError, check_predictive_options

    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else None
        except ValueError as e:
            raise ConfigError(f"predictive_options {value!r} is not JSON ({e}); give an object such as "
                              '\'{"fractions": [0.1, 0.3], "keep": 0.25}\'') from None
    try:
        options = check_predictive_options(value)
    except InvalidCurveError as e:
        raise ConfigError(f"predictive_options: {e}") from None
    if not options:
        return None
    if stopper != "predictive":
        raise ConfigError(f"predictive_options are settings of stopper 'predictive', not {stopper!r}")
    return options


def check_predictive_rungs(options: Mapping[str, Any] | None, theta: float, max_steps: int | None = None) -> None:
    """Refuse predictive settings that would be ignored: any at θ = 1 (every trial trains to the end), and a given
    rung fraction at or after θ (a rung at or after the θ barrier stops nothing), or, when S_max is known, whose rung
    step (:func:`earlycurve.rungs_for`) is not before θ's (:func:`spottune.orchestrator.steps_at`).

    Raises
    ------
    ConfigError
        One line, naming the fractions.
    """
    from earlycurve import rungs_for

    if not options:
        return
    if theta >= 1:
        raise ConfigError("predictive_options need theta < 1: at theta = 1 every trial trains to the end")
    fractions = options.get("fractions", [])
    late = [f for f in fractions if f >= theta or (max_steps is not None
                                                  and rungs_for(max_steps, [f])[0] >= steps_at(theta, max_steps))]
    if late:
        raise ConfigError(f"predictive_options fractions {late} must lie before theta {theta:g} (a rung at or after "
                          "the θ barrier would stop nothing)")


# -- the aws and ray options ----------------------------------------------------------------------------------------
# Field types below are checked as annotated (pydantic): a value of another type is refused in one line naming the
# key, the value and the type in words (:func:`_option_rule`), or a field's own ``_Rule``.


class _Refused(ValueError):
    """A validator's refusal of a field's value under ``rule`` (the field's own rule when None); the message shows
    ``value`` when given (a normalised form), else the value given."""

    def __init__(self, rule: str | None = None, *, value: Any = None):
        super().__init__(rule or "refused")
        self.rule, self.value = rule, value


@dataclass(frozen=True, slots=True)
class _Rule:
    """``Annotated`` metadata of a field: what its value must be, as the refusal message says it."""

    text: str


def _real_only(value: Any) -> Any:
    if not (isinstance(value, (int, float)) and not isinstance(value, bool)):  # no str, Fraction, Decimal, numpy int
        raise _Refused()
    return value


def _name_or_int(value: Any) -> Any:
    return str(value) if _is_int(value) else value  # YAML reads a numeric name (a bucket, an experiment) as an int


def _one_slash(key: str) -> str:
    if key.count("/") != 1:
        raise _Refused()
    return key


#: A finite int or float (not bool), as a float.
_Real = Annotated[float, BeforeValidator(_real_only), Strict(), AllowInfNan(False)]
#: An int (not bool).
_Int = Annotated[int, Strict()]
#: A non-empty str.
_Name = Annotated[str, Strict(), Field(min_length=1)]
#: A str; an int is taken as its digits.
_Text = Annotated[str, BeforeValidator(_name_or_int), Strict()]
#: A bool (not 0 or 1, not "yes").
_Flag = Annotated[bool, Strict()]


@dataclass(slots=True, kw_only=True)
class AwsOptions:
    """The keys of an experiment spec's ``aws`` mapping (:data:`AWS_KEYS`), their types and the AWS backend's
    defaults; :class:`spottune.backends.aws.AwsSettings` is these plus what the driver sets. A spec holds only the
    keys it is given, each checked against the field's type (a string may be given as an integer).

    Parameters
    ----------
    bucket : str
        S3 bucket of the control objects (segments, commands, the lease); required by ``backend: aws``.
    image : str, default "spottune-worker:latest"
        Worker image URI (ECR) the user data runs (``docker run --network host IMAGE``).
    ami : str, default "ami-12c6146b"
        Host AMI with Docker (e.g. the ECS-optimized Amazon Linux 2023 AMI of the region).
    instance_profile : str, default "spottune-worker"
        Name (or ARN) of the instance profile the workers run as (S3, SQS; docs/guide/aws.md).
    region : str, default "us-east-1"
    experiment : str
        The experiment's name: the value of the ``spottune:experiment`` tag of every instance, the SQS
        queue name (``spottune-<experiment>.fifo``) and the S3 folder of its control objects. A spec that leaves
        it out gets the output folder's name.
    subnets : mapping zone -> subnet id, default {}
        Subnet per availability zone (default VPC when absent).
    security_groups : sequence of str, default ()
    prefix : str, default "spottune"
        S3 key prefix of the control objects.
    endpoint_url : str, optional
        AWS endpoint (a moto server in tests); None: the real AWS endpoints.
    live_prices : bool, default True
        Price the run from the EC2 API's recent spot prices, starting now; false replays the spec's ``prices``
        from its start (a test endpoint seeded with that trace).
    lease_s : float, default 600.0
        Engine seconds an agent waits after the last renewal of the orchestrator's lease before it shuts
        its instance down (the dead-man switch); the lease is renewed every ``lease_s / 4``.
    lease_save_s : float, default 60.0
        Engine seconds an agent that found the lease stale waits for the checkpoint it asks its worker for,
        before it shuts the instance down anyway.
    linger_s : float, default 600.0
        Engine seconds an agent whose worker has exited waits to be terminated (by us after a hop, by the
        provider after a notice) before it shuts the instance down itself.
    exclusion_s : float, default 1800.0
        Engine seconds a market that refused a launch for capacity stays out of the choice.
    describe_every_s : float, default 15.0
        Engine seconds between ``describe_instances`` calls (who ended which instance).
    report_timeout_s : float, default 900.0
        Wall seconds (engine seconds on AWS) a launched instance may stay silent (no report of its worker)
        before the run names it in a warning and fails its segment (it is terminated and retried within
        ``max_failures``): a host whose user data never starts the agent is not waited for (decision AWS16).
    """

    bucket: _Text
    image: _Text = "spottune-worker:latest"
    ami: _Text = "ami-12c6146b"
    instance_profile: _Text = "spottune-worker"
    region: _Text = "us-east-1"
    experiment: _Text
    subnets: Mapping[_Text, _Text] = field(default_factory=dict)
    security_groups: Sequence[_Text] = ()
    prefix: _Text = "spottune"
    endpoint_url: _Text | None = None
    live_prices: _Flag = True
    lease_s: _Real = 600.0
    lease_save_s: _Real = 60.0
    linger_s: _Real = 600.0
    exclusion_s: _Real = DEFAULT_EXCLUSION_S
    describe_every_s: _Real = 15.0
    report_timeout_s: _Real = 900.0


@dataclass(slots=True, kw_only=True)
class RayOptions:
    """The keys of an experiment spec's ``ray`` mapping (:data:`RAY_KEYS`), their types and the Ray backend's
    defaults; :class:`spottune.backends.ray.RaySettings` is these plus what the driver sets. A spec holds only the
    keys it is given, each checked against the field's type and rule.

    Parameters
    ----------
    address : str, default "auto"
        Ray cluster address for ``ray.init``: ``auto`` (the cluster this machine belongs to, ``ray start``),
        ``HOST:PORT`` of the head's GCS, or ``ray://HOST:10001`` (Ray Client). Ignored when this process is
        already connected (``ray.is_initialized()``).
    prices : mapping market -> float, default {}
        A price table, USD per instance-hour (>= 0), keyed ``"<instance type>/<zone>"`` (e.g.
        ``{"m5.large/us-east-1a": 0.035}``); a market in it is billed at that constant price instead of
        the replayed price history.
    imds_url : str, default "none"
        IMDS root a segment polls for the spot interruption notice (``http://169.254.169.254`` on EC2
        nodes); ``none``: no polling (a laptop, or any cluster whose nodes are not EC2 instances).
    poll_s : float, default 5.0
        Engine seconds between a segment's IMDS polls (AWS recommends 5 s).
    watch_s : float, default 1.0
        Engine seconds between two looks at the cluster's nodes (draining, dead); the wall interval is
        ``watch_s / time_scale`` but never below 0.05 s.
    notice_s : float, default 120.0
        Engine seconds between a drain without deadline and the node's end, assumed for the deadline of
        the ``RevocationNotice`` (AWS gives two minutes).
    lost_after_s : float, default 60.0
        Wall seconds an actor may stay unreachable (``ActorUnavailableError``) while its node is still
        alive in the GCS before the segment is failed (a node lost without a drain is marked dead by
        the GCS's health checks, about 15 s with Ray's defaults).
    num_cpus : float, default 0.0
        CPUs each segment actor reserves besides its market (0: the market resource alone limits how
        many segments share a node).
    log_to_driver : bool, default False
        Forward the actors' stdout and stderr to this process (Ray's ``log_to_driver``); they are always
        in the nodes' Ray logs (``/tmp/ray/session_latest/logs``).
    place_s : float, default 600.0
        Engine seconds a segment actor may wait for a node of its market before its launch fails
        (``LaunchFailed``, and a capacity refusal: the trial goes to another market); the wall bound is
        ``place_s / time_scale`` but never below 10 s.
    lease_s : float, default 600.0
        Engine seconds a segment actor waits after the driver's last lease renewal before it saves a
        ``lease`` checkpoint and ends (the driver died; decision RY11); the wall lease is
        ``lease_s / time_scale`` but never below 10 s, renewed every quarter of it.
    """

    address: Annotated[_Name, _Rule("'auto', HOST:PORT or ray://HOST:PORT")] = "auto"
    prices: Annotated[Mapping[Annotated[str, Strict(), AfterValidator(_one_slash)], Annotated[_Real, Field(ge=0)]],
                      _Rule("a mapping '<instance type>/<zone>' -> USD per instance-hour >= 0")] = field(
        default_factory=dict)
    imds_url: _Text = "none"
    poll_s: _Real = 5.0
    watch_s: _Real = 1.0
    notice_s: _Real = 120.0
    lost_after_s: _Real = 60.0
    num_cpus: _Real = 0.0
    log_to_driver: _Flag = False
    lease_s: _Real = 600.0
    place_s: _Real = 600.0


#: Keys of ``ExperimentSpec.aws``: the fields of :class:`AwsOptions`.
AWS_KEYS = tuple(f.name for f in dataclasses.fields(AwsOptions))
#: Keys of ``ExperimentSpec.ray``: the fields of :class:`RayOptions` (docs/guide/ray.md).
RAY_KEYS = tuple(f.name for f in dataclasses.fields(RayOptions))


def _option_rule(tp: Any, *, plural: bool = False) -> str:
    """What a value of the annotation ``tp`` must be, in words (``plural``: what its items must be)."""
    origin, args = get_origin(tp), get_args(tp)
    if origin is Annotated:
        return _option_rule(args[0], plural=plural)
    if origin in (Union, UnionType):
        return " or ".join(_option_rule(a, plural=plural) for a in args)
    if origin is not None and isinstance(origin, type) and issubclass(origin, Mapping):
        return (f"{'mappings' if plural else 'a mapping'} of {_option_rule(args[0], plural=True)} to "
                f"{_option_rule(args[1], plural=True)}")
    if origin is not None and isinstance(origin, type) and issubclass(origin, Sequence):
        return f"{'lists' if plural else 'a list'} of {_option_rule(args[0], plural=True)}"
    words = {str: ("a string", "strings"), float: ("a finite number", "finite numbers"),
             int: ("an integer", "integers"), bool: ("true or false", "true or false"), type(None): ("None", "None")}
    return words.get(tp, (str(tp), str(tp)))[plural]


def _options_model(options: type) -> type[BaseModel]:
    """The pydantic model of a spec mapping whose keys are the fields of the dataclass ``options``: each of the
    field's annotated type, with its ``_Rule`` or its type in words (:func:`_option_rule`) as the rule; no other
    key. Every key is optional here (a backend that needs one says so when it is built)."""
    fields: dict[str, Any] = {}
    for name, tp in get_type_hints(options, include_extras=True).items():
        rules = [m for m in getattr(tp, "__metadata__", ()) if isinstance(m, _Rule)]
        fields[name] = (tp if rules else Annotated[tp, _Rule(_option_rule(tp))], None)
    return create_model(f"_{options.__name__}Model", __config__=ConfigDict(extra="forbid"), **fields)


_AwsModel = _options_model(AwsOptions)
_RayModel = _options_model(RayOptions)


# -- validation (pydantic) -------------------------------------------------------------------------------------
# Every field below carries its rule, the text after "but must be" in the one-line ConfigError
# "<name> is <value>, but must be <rule>" (:func:`_check_fields`). A validator refuses a value with
# ``_Refused(rule)`` (a rule other than the field's own) or with a whole ConfigError (a message of another form).


def _storage_url(path: str) -> str:
    if has_userinfo(path):  # the URL reaches every worker's command line (and this message): no credentials in it
        raise ConfigError(f"storage_path is {redact(path)!r}, but must not hold user information; give credentials "
                          "in storage_options or the environment (AWS_ACCESS_KEY_ID, ...)")
    if _storage_scheme(path) not in STORAGE_SCHEMES:
        raise _Refused()
    return path


def _at_least_real_time(value: float) -> float:
    if value < MIN_TIME_SCALE:
        raise _Refused(f"a number >= {MIN_TIME_SCALE:g} (simulated s per wall s; {MIN_TIME_SCALE:g} is real time)")
    return value


def _one_of(choices: Sequence[str]) -> Any:
    return Annotated[Literal[tuple(choices)], _Rule(f"one of {', '.join(choices)}")]


_USD = Annotated[_Real | None, Field(gt=0), _Rule("a number of USD > 0, or None")]


class _SpecFields(BaseModel):
    """The checks of an :class:`ExperimentSpec`'s fields after :meth:`ExperimentSpec.__post_init__` has filled and
    normalised them, in the order the first failure is reported (:func:`_check_fields`). Validators that need
    other fields read them from ``info.data`` (absent when they failed: then that earlier failure is reported)."""

    model_config = ConfigDict(arbitrary_types_allowed=True, strict=True)

    metric: Annotated[_Name, _Rule("a non-empty metric name")]
    mode: Annotated[Literal["min", "max"], _Rule("'min' or 'max'")]
    max_steps: Annotated[_Int, Field(ge=1, le=MAX_STEPS), _Rule(f"an integer >= 1 and <= {MAX_STEPS:,}")]
    theta: Annotated[_Real, Field(gt=0, le=1), _Rule("0 < theta <= 1")]
    search_space: Any
    num_samples: Annotated[_Int, Field(ge=1), _Rule("an integer >= 1")]
    top_k: Annotated[_Int, Field(ge=1), _Rule("an integer with 1 <= top_k <= {n_trials} (the number of trials)")]
    search: _one_of(SEARCHES)
    trial_budget: Annotated[_Int | None, Field(ge=1),
                            _Rule("an integer with 1 <= trial_budget <= {n_trials} (the candidate configurations) with "
                                  "search 'gp-ucb'")]
    prices: Annotated[_Name, _Rule("a price file path or dataset name")]
    storage_path: Annotated[Annotated[_Name, AfterValidator(_storage_url)] | None,
                            _Rule(f"a folder, a {', '.join(s + '://' for s in STORAGE_SCHEMES[1:])} URL, or None")]
    seed: Annotated[_Int, Field(ge=0), _Rule("an integer >= 0")]
    backend: _one_of(BACKENDS)
    market_mode: _one_of(MARKET_MODES)
    max_failures: Annotated[_Int, Field(ge=0), _Rule("an integer >= 0")]
    checkpoint_keep: Annotated[_Int, Field(ge=1), _Rule("an integer >= 1")]
    heartbeat_s: Annotated[_Real | None, Field(gt=0), _Rule("a number > 0 (wall seconds) or None")]
    missed_beats: Annotated[_Int, Field(ge=1), _Rule("an integer >= 1")]
    time_scale: Annotated[_Real, Field(gt=0), AfterValidator(_at_least_real_time),
                          _Rule("a number > 0 (simulated s per wall s)")]
    max_usd_per_hour: _USD
    budget_usd: _USD
    aws: Annotated[_AwsModel, _Rule("a mapping with keys among " + ", ".join(AWS_KEYS))]
    ray: Annotated[_RayModel, _Rule("a mapping with keys among " + ", ".join(RAY_KEYS))]
    predictor: _one_of(PREDICTORS)
    train_days: Annotated[_Real, Field(gt=0, le=MAX_TRAIN_DAYS),
                          _Rule(f"a number of days with 0 < train_days <= {MAX_TRAIN_DAYS:g}")]
    boot_s: Annotated[_Real, Field(ge=0, lt=MAX_BOOT_S),
                      _Rule(f"a number of seconds with 0 <= boot_s < {MAX_BOOT_S:g} (an instance is relaunched every "
                            "hour, so a longer boot never trains a step)")]
    objective: _one_of(OBJECTIVES)
    provisioning: _one_of(PROVISIONINGS)
    time_value_usd_per_hour: Annotated[_Real, Field(ge=0), _Rule("a finite number of USD per trial-hour >= 0")]
    job_time_value_usd_per_hour: Annotated[_Real, Field(ge=0), _Rule("a finite number of USD per job-hour >= 0")]
    speed_model: _one_of(SPEED_MODELS)
    stopper: _one_of(STOPPERS)
    predictive_options: Any
    stopper_curves: Annotated[_Name | None, _Rule("a curve file path, or None")]
    rungs: Any
    step_time_cov: Annotated[_Real, Field(ge=0, lt=1), _Rule("0 <= step_time_cov < 1")]
    billing: _one_of(BILLING)
    deadline_mode: _one_of(DEADLINE_MODES)
    resources: Any
    on_demand_prices: Annotated[_Name | None, _Rule("an on-demand price file path, or None")]
    max_concurrent_trials: Annotated[_Int | None, Field(ge=1), _Rule("an integer >= 1, or None (every trial at once)")]

    @field_validator("num_samples")
    @classmethod
    def _trial_count(cls, num_samples: int, info: ValidationInfo) -> int:
        if "search_space" not in info.data:
            return num_samples
        space = info.data["search_space"]
        n_trials = count_configs(space, num_samples)
        if n_trials > MAX_TRIALS:
            raise ConfigError(f"num_samples is {num_samples!r}, which makes {n_trials:,} trials, but an experiment "
                              f"may have at most {MAX_TRIALS:,} (num_samples x the grid size)")
        if n_trials > 1 and not has_domain(space):
            what = "is empty" if not space else "has no grid_search or random domain"
            raise ConfigError(f"search_space is {space_to_dict(space)!r}, but it {what}, so all {n_trials} trial(s) "
                              "would train the same configuration; give at least one grid_search, choice, uniform, "
                              "loguniform or randint")
        return num_samples

    @field_validator("trial_budget")
    @classmethod
    def _budget_of_candidates(cls, budget: int | None, info: ValidationInfo) -> int | None:
        search, n_trials = info.data.get("search"), _n_trials(info.data)
        if search is None or n_trials is None:
            return budget
        if search != "gp-ucb":
            if budget is not None:
                raise _Refused(f"None with search {search!r} (every configuration runs; a trial budget is a setting "
                               "of search 'gp-ucb')")
            return budget
        if budget is None:
            raise _Refused(f"an integer with 1 <= trial_budget <= {n_trials} with search 'gp-ucb' (how many of the "
                           f"{n_trials} candidate configurations run)")
        if budget > n_trials:
            raise _Refused()
        from spottune.scheduling import check_flat

        check_flat(generate_configs(info.data["search_space"], info.data["num_samples"], 0))  # nesting, not values
        return budget

    @field_validator("top_k")
    @classmethod
    def _top_k_of_trials(cls, top_k: int, info: ValidationInfo) -> int:
        n_trials = _n_trials(info.data)
        if n_trials is not None and top_k > n_trials:
            raise _Refused()
        return top_k

    @field_validator("backend")
    @classmethod
    def _shared_store(cls, backend: str, info: ValidationInfo) -> str:
        path = info.data.get("storage_path")
        if path is not None and backend != "sim" and _storage_scheme(path) == "memory":
            raise ConfigError(f"storage_path is {path!r}, but must be a folder or an s3:// URL with backend "
                              f"{backend!r} (a memory:// store lives in one process; the workers cannot share it)")
        return backend

    @field_validator("predictive_options")
    @classmethod
    def _predictive(cls, value: Any, info: ValidationInfo) -> Any:
        if not {"stopper", "theta", "max_steps"} <= set(info.data):
            return value
        options = parse_predictive_options(value, info.data["stopper"])
        check_predictive_rungs(options, info.data["theta"], info.data["max_steps"])
        return options

    @field_validator("stopper_curves")
    @classmethod
    def _curves_for_stopper(cls, curves: str | None, info: ValidationInfo) -> str | None:
        stopper = info.data.get("stopper")
        if curves is not None and stopper == "paper":
            raise _Refused(f"None with stopper {stopper!r} (the learned ranking is for stopper rank, predictive, "
                           "barrier or hparams)")
        if curves is None and stopper == "hparams":
            raise _Refused("a curve file of previous runs with their hyperparameters with stopper 'hparams' (its "
                           "ranking is learned from them)")
        return curves

    @field_validator("rungs")
    @classmethod
    def _barriers(cls, rungs: Any, info: ValidationInfo) -> Any:
        data = info.data
        if not {"theta", "top_k", "max_steps", "stopper"} <= set(data) or _n_trials(data) is None:
            return rungs
        rungs = check_rungs(rungs, data["theta"], data["top_k"], data["max_steps"])
        if rungs and rungs[0][1] >= _n_trials(data):
            f, keep = rungs[0]
            raise ConfigError(f"rungs keep {keep} trials at {f:g}, but the experiment has {_n_trials(data)}; a rung "
                              "must keep fewer than all the trials (else it stops nothing)")
        if rungs and data.get("search") == "gp-ucb":
            raise _Refused("empty with search 'gp-ucb' (its trials run one at a time, so there are no barriers to "
                           "wait at)", value=rungs)
        if rungs and data["stopper"] not in BARRIER_STOPPERS:
            raise _Refused(f"empty with stopper {data['stopper']!r} (rungs are barriers of stoppers 'barrier' and "
                           "'hparams'; 'rank' and 'predictive' have their own)", value=rungs)
        return rungs


def _n_trials(data: Mapping[str, Any]) -> int | None:
    """Trials of the validated ``search_space`` and ``num_samples`` in ``data``; None when either failed."""
    if "search_space" not in data or "num_samples" not in data:
        return None
    return count_configs(data["search_space"], data["num_samples"])


def _rule_of(model: type[BaseModel], name: str) -> str:
    return next(m.text for m in model.model_fields[name].metadata if isinstance(m, _Rule))


def _check_fields(values: Mapping[str, Any]) -> _SpecFields:
    """Validate an :class:`ExperimentSpec`'s field ``values`` (name -> value) with :class:`_SpecFields`.

    Returns
    -------
    _SpecFields
        The validated fields (``predictive_options`` parsed, ``rungs`` normalised).

    Raises
    ------
    ConfigError
        The first failure in field order, in one line: ``<name> is <value>, but must be <rule>`` (``aws.<key> is
        ...`` for a value of the ``aws`` or ``ray`` mapping), or a validator's own message.
    """
    data = {name: values[name] for name in _SpecFields.model_fields}
    for section in ("aws", "ray"):  # any mapping, as a dict; a model refuses its other keys and other types
        if isinstance(data[section], Mapping):
            data[section] = dict(data[section])
    try:
        return _SpecFields.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()
    name = errors[0]["loc"][0]
    mine = [e for e in errors if e["loc"][0] == name]
    options = {"aws": _AwsModel, "ray": _RayModel}.get(name)
    if options is not None:  # the shape and the keys of an aws or ray mapping before its values
        mine.sort(key=lambda e: len(e["loc"]) > 1 and e["type"] not in ("extra_forbidden", "invalid_key"))
    error = mine[0]
    cause = (error.get("ctx") or {}).get("error")
    if isinstance(cause, ConfigError):
        raise cause.with_traceback(None) from None
    rule = cause.rule if isinstance(cause, _Refused) else None
    value = cause.value if isinstance(cause, _Refused) and cause.value is not None else values[name]
    if options is not None and len(error["loc"]) > 1 and error["loc"][1] in options.model_fields:
        key = error["loc"][1]  # a value of the aws or ray mapping
        raise ConfigError(f"{name}.{key} is {value[key]!r}, but must be {rule or _rule_of(options, key)}") from None
    if rule is None:
        rule = _rule_of(_SpecFields, name)
        if "{n_trials}" in rule:
            rule = rule.format(n_trials=_n_trials(data))
    raise ConfigError(f"{name} is {value!r}, but must be {rule}") from None


@dataclass(frozen=True, slots=True, kw_only=True)
class ExperimentSpec:
    """A tuning experiment (SpotTune's Table I parameters plus where and how to run it).

    Parameters
    ----------
    workload : str, default "digits-mlp"
        Built-in workload name (:func:`spottune.workloads.list_workloads`) or ``"pkg.module:Class"``
        naming a Trainable subclass or a Workload. YAML also accepts the key ``trainable``.
    search_space : mapping, optional
        Search space in Python or YAML form (:mod:`spottune.search_space`); default: the workload's.
    num_samples : int, optional
        Repetitions of the grid (Ray semantics); default: the workload's (1 for the built-ins).
    search : {"random", "grid", "gp-ucb"}, default "random"
        ``random`` and ``grid`` (the same: Ray Tune's default search) run every configuration of the search space,
        ``num_samples`` x the grid size; ``gp-ucb`` takes those configurations as candidates and runs
        ``trial_budget`` of them one after another, each picked by cost-aware GP-UCB from the results so far
        (:data:`SEARCHES`; :func:`spottune.api.search_gp_ucb`; decisions SV6, SV13).
    trial_budget : int, optional
        ``search="gp-ucb"`` only (and then required): how many of the candidate configurations run,
        ``1 <= trial_budget <=`` the number of candidates.
    metric : str, optional
        Metric that ranks trials (a key of ``step()``'s dict); default: the workload's.
    mode : {"min", "max"}, optional
        Direction of ``metric``; default: the workload's.
    max_steps : int, optional
        ``S_max``, steps per trial; default: the workload's.
    theta : float, default 0.7
        Early-shutdown rate θ, ``0 < theta <= 1``; 1 disables EarlyCurve.
    top_k : int, default 3
        Trials continued after θ·S_max; ``1 <= top_k <=`` number of trials.
    instance_types, availability_zones : tuple of str, optional
        The instance pool is every market of the price data whose type and zone are in these lists;
        None means every type (zone) in the data. A comma-separated string is accepted.
    prices : str, default "us-east-1_2015.csv.gz"
        Price data: a file path or a dataset name resolved by the price loader.
    start_utc : pandas.Timestamp, optional
        Simulated start time (UTC). A string is parsed; a naive time is taken as UTC. None: the
        run's default :data:`DEFAULT_START_UTC` (2015-05-05 00:00 UTC; decision D10), see
        :attr:`start`. YAML key ``start`` works.
    storage_path : str, optional
        Checkpoint location: a folder, ``file://...``, ``s3://bucket/prefix`` or ``memory://...``.
        None: a ``checkpoints/`` folder in the run's output directory.
    storage_options : mapping, default {}
        fsspec options for ``storage_path``, e.g. ``{"endpoint_url": ..., "key": ..., "secret": ...}``.
    seed : int, default 0
        Seeds search-space sampling, trial RNGs (:func:`~spottune.trainable.trial_seed`) and the
        backend's random draws.
    backend : {"sim", "local", "aws", "ray"}, default "sim"
        ``ray``: every trial segment is an actor on a spot node of an existing Ray cluster (``ray``;
        docs/guide/ray.md).
    market_mode : {"legacy", "modern"}, default "legacy"
        2017 bid-based revocations (the paper) or today's interruption model (capacity interruptions
        with a two-minute notice, no bidding; ``docs/design/decisions.md``, "Market replay").
    max_failures : int, default 2
        Retries of a trial whose trainable raises, before it is FAILED (preemptions never count).
    checkpoint_keep : int, default 2
        Verified checkpoint versions kept per trial (>= 1); older ones are deleted only after a newer
        one is verified.
    heartbeat_s : float or None, default 2.0
        Local backend: wall seconds between two heartbeats of a worker process; a worker silent for
        ``missed_beats * heartbeat_s`` is lost, killed, and its (trial, segment) unit relaunched from the
        trial's latest checkpoint (decision SV4). None: no heartbeats.
    missed_beats : int, default 3
        Local backend: heartbeats a worker may miss before it is lost.
    time_scale : float, default 600.0
        Local and ray backends (and the aws backend replaying a trace against a test endpoint,
        ``aws.live_prices: false``): simulated seconds per wall-clock second (1 on a real Ray cluster) (600: one simulated hour = 6 s).
    predictor : {"auto", "revpred", "constant", "none", "calibrated", "online-hazard"}, default "auto"
        Revocation predictor of the provisioner (as ``spottune run --predictor``): ``auto`` is
        ``calibrated`` (trained on the provisioner's own max-price queries, monotone in the max price) in
        legacy mode and ``online-hazard`` (the same plus a per-market interruption rate learned during the
        run) in modern mode; see :func:`spottune.compose.make_predictor`.
    train_days : float, default 4.0
        Days of price history before ``start_utc`` the predictor is trained on.
    boot_s : float, default 120.0
        Launch-to-training latency (spot fulfilment, boot, container start), seconds, paid at every launch
        (decision D11, revised; design R3; :data:`spottune.speed.DEFAULT_BOOT_S` and its sources); 0 is the
        paper's faithful mode.
    objective : {"refund", "paper"}, default "refund"
        What the provisioner minimises: ``refund`` chooses the market and the max price (ladder
        :data:`provisioner.DELTA_LADDER_USD_PER_HOUR`) for the lowest expected USD per useful step over
        the decision horizon (refund only for a provider revocation before our own end; boot, restore and
        checkpoint counted); ``paper`` is SpotTune's Eq 2 with the D1 max price.
    provisioning : {"spottune", "refund-hop", "restart", "restart-failover"}, default "spottune"
        ``spottune``: with objective ``refund``, spot-restart's choice unless another market or max price beats it
        by a margin, no hourly hop (:class:`provisioner.GuardedProvisioner`, decision R12); ``refund-hop``: the
        objective's choice unguarded, re-chosen every hour (the paper's hop; the default before 2026-11-29);
        ``restart``: the cheapest market at each launch, max price = on-demand, no hop; ``restart-failover``:
        ``restart`` with SkyPilot's failover after a capacity refusal (:data:`PROVISIONINGS`).
    time_value_usd_per_hour : float, default 0.0
        ``refund`` objective: the value of an hour of a trial's wall-clock, USD per trial-hour; the
        provisioner minimises (expected USD + value · expected hours of the segment) per useful step, so a
        faster market wins when a refund saves less per step than the time costs (as ``spottune run
        --time-value-usd-per-hour``; :class:`provisioner.RefundStepCost`; docs/design/decisions.md, R7).
        0 = dollars only.
    job_time_value_usd_per_hour : float, default :data:`DEFAULT_JOB_TIME_VALUE_USD_PER_HOUR` (0.01)
        ``refund`` objective: the value of an hour of the job's wall-clock, USD per job-hour, shared by the trials
        still heading to the same stop (the θ barrier, a rung or the end): each pays V / n per hour, so the few
        trials left after the barrier and the last stragglers before it buy speed, the many fresh trials hardly
        (as ``spottune run --job-time-value-usd-per-hour``; :class:`provisioner.RefundStepCost`; docs/design/decisions.md,
        R11). 0 = off.
    speed_model : {"pooled", "cores"}, default "pooled"
        ``refund`` objective: how seconds per step on an instance type a trial has not run on are predicted:
        ``pooled`` learns the speed ratios between types jointly from every trial's measured segments (a log-linear
        model, prior = the ``cores`` rule; :class:`provisioner.PooledSpeedMatrix`, design R9), ``cores`` is the
        ``κ / cores`` rule per trial (the paper's T starts from the CPU cores, §III-A). The ``paper`` objective always
        uses ``cores``.
    stopper : {"paper", "rank", "predictive", "barrier", "hparams"}, default "barrier"
        Early stopping: ``hparams`` is ``barrier`` (with its rungs) ranked at every barrier by
        :class:`earlycurve.HyperparameterCurvePredictor` fitted on ``stopper_curves``, which must then hold the
        previous runs' hyperparameters (``docs/design/earlycurve.md`` §8.19); ``predictive`` is predictive ASHA (:class:`earlycurve.PredictiveStopping`, rungs at
        :data:`earlycurve.PREDICTIVE_DEFAULTS` fractions below θ, re-judged at every step, plus the
        optimistic bound) and the last value's top-k at θ (``docs/design/earlycurve.md`` §8); ``rank`` stops a trial at rungs (10, 20, 40 % of ``max_steps`` below θ) when it is
        unlikely to end in the top-k (:class:`earlycurve.RankConfidenceStopping`) and keeps the last
        value's top-k at θ; ``barrier`` has no rungs and keeps the last value's top-k at θ (Algorithm 1's own
        early stopping; choose θ and ``top_k`` on tuning studies, ``docs/design/earlycurve.md`` §8.10); ``paper`` is SpotTune's EarlyCurve at θ only (``docs/design/earlycurve.md`` §7).
        ``barrier`` is the default: at the same θ it costs what ``paper`` costs and ranks at least as well at
        θ 0.7 on every curve set measured (docs/design/decisions.md ES18, ``docs/design/earlycurve.md`` §8.11).
    predictive_options : mapping or str, optional
        ``stopper="predictive"`` only: the rule's settings instead of :data:`earlycurve.PREDICTIVE_DEFAULTS`, as a
        mapping or JSON object text (``spottune run --predictive-options '{"fractions": [0.1, 0.3, 0.5], "keep":
        0.25}'``), keys :data:`earlycurve.PREDICTIVE_KEYS` (``fractions``: rungs as fractions of ``max_steps``;
        ``keep_first``, ``keep``: shares that continue at the first and later rungs; ``slope``, ``bound_k``,
        ``bound_quantile``, ``guard``, ``retro``). The shipped defaults are one conservative setting for every family;
        a family's own setting, chosen on tuning studies as for ASHA, is much cheaper (``docs/design/earlycurve.md`` §8.3,
        §8.15). Default None: the shipped defaults.
    stopper_curves : str, optional
        A curve file of finished runs of the same workload (any layout ``spottune curves eval`` reads; values a
        loss). With ``stopper`` ``rank``, ``predictive`` or ``barrier``, the top-k at θ is ranked by
        :class:`earlycurve.ResidualCurvePredictor` fitted on these curves (the last value plus a residual learned
        from them, falling back to the last value where cross-validation shows no gain;
        ``docs/design/earlycurve.md`` §8.7) instead of by the last value. With ``stopper="hparams"`` (required there) the
        file must carry each run's hyperparameters (opda JSON lines, or extra columns of a long CSV), and every
        barrier is ranked by :class:`earlycurve.HyperparameterCurvePredictor` fitted on them. Default None: the last
        value.
    rungs : sequence of (float, int) or str, default ()
        ``stopper="barrier"`` or ``"hparams"`` only: synchronous barriers before θ, ``(fraction of max_steps, trials kept)`` pairs
        (``"0.06:6"`` or ``[[0.06, 6]]``; ``spottune run --rungs``): every trial trains to the first rung and waits
        there (checkpointed) for the others, the ``keep`` with the lowest last observed value continue to the next
        barrier, and θ, where ``top_k`` continue, is the last (:func:`spottune.orchestrator.check_rungs` says what
        is valid). Choose them on tuning studies of the family with ``spottune curves choose --two-rung``
        (``docs/design/earlycurve.md`` §8.12; design ES19). Default: θ's barrier alone.
    step_time_cov : float, default 0.05
        Coefficient of variation of simulated step times (the paper's §IV-A5: measured < 0.1).
    billing : {"second", "hour"}, default "second"
        Spot billing granularity (per second as in the paper, or the historical hourly rule).
    max_usd_per_hour, budget_usd : float, optional
        Spending caps checked before every launch (sum of the live instances' max prices, USD/hour; USD
        billed plus accrued); see :mod:`spottune.backends.aws._safety`.
    deadline : float or str, optional
        Seconds from the start by which the run must finish (``"6h"``, ``"90min"`` or a number of
        seconds; :func:`spottune.planning.parse_duration`). With ``budget_usd`` the run is planned first
        (SEER, :func:`spottune.planning.plan_run`) and an infeasible request is refused.
    deadline_mode : {"plan", "seer", "guard"}, default "plan"
        With both ``deadline`` and ``budget_usd``: ``plan`` executes the printed cost-lean plan (the cheapest of
        θ barrier + top-k, one round and SEER's plan, an instance class per round, that meets the deadline within
        the budget; hourly relaunches; the ``seer-lean`` policy of ``spottune simulate``, decision DB15; SEER's
        plan when no lean candidate fits); ``seer`` executes SEER's printed brackets (wall-clock rounds, the
        ``seer-predictive`` policy, DB14); both elimination by EarlyCurve's predicted final value, sim backend
        only. ``guard`` runs SpotTune's Algorithm 1 under the budget cap and the deadline guard and only prints
        the plan. Ignored without both.
    aws : mapping, default {}
        AWS backend settings (:data:`AWS_KEYS`, the fields of :class:`AwsOptions`: ``bucket``,
        ``image``, ``ami``, ``instance_profile``, ``region``, ``experiment``, ``subnets``, ``security_groups``,
        ``prefix``, ``endpoint_url``, the timings in engine seconds ``lease_s``, ``lease_save_s``, ``linger_s``,
        ``exclusion_s``, ``describe_every_s``, ``report_timeout_s`` (wall seconds), and ``live_prices``, a bool);
        each value of the field's type (a
        string may be given as an integer); docs/guide/aws.md.
    ray : mapping, default {}
        Ray backend settings (:data:`RAY_KEYS`, the fields of :class:`RayOptions`):
        ``address`` (``auto``, ``HOST:PORT``; ``spottune run --ray-address``), ``prices`` (a price table,
        USD per instance-hour keyed ``"<instance type>/<zone>"``, billed instead of the replayed history),
        ``imds_url`` (``http://169.254.169.254`` on EC2 nodes; default ``none``), ``poll_s``, ``watch_s``,
        ``notice_s``, ``lost_after_s``, ``num_cpus``, ``log_to_driver``, ``lease_s``, ``place_s``; each value
        of the field's type; docs/guide/ray.md.

    resources : mapping, optional
        What one trial needs: ``{"cpu": vCPUs, "gpu": GPUs, "memory_gib": GiB}``, each optional (Ray's
        ``resources_per_trial`` names; :func:`spottune.trainable.parse_resources`). The pool keeps the instance
        types that have at least that much; with ``gpu`` > 0 the speed prior counts GPUs (decisions.md IC2, IC3).
        Default: the trainable's ``resources``, else no requirement.
    on_demand_prices : str, optional
        A CSV of on-demand prices (``instance_type, region, os, on_demand_price_usd_per_hour``, USD per
        instance-hour) that wins over the bundled tables (``spottune run --on-demand-prices FILE``; decisions.md IC1).
    max_concurrent_trials : int, optional
        At most this many trials hold an instance or are launching at once (Ray Tune's name); the others wait in trial
        order and launch when a trial ends, is stopped or pauses at a barrier (design D14; ``spottune run
        --max-concurrent-trials``). None: every trial at once (Algorithm 1). Refused with search ``gp-ucb`` and with
        an executed plan (``deadline_mode`` ``plan`` or ``seer``), which set their own parallelism.

    Raises
    ------
    ConfigError
        On any invalid value, the first in field order; the message names the option, the value and the rule,
        e.g. ``theta is 1.5, but must be 0 < theta <= 1`` or ``aws.lease_s is '600', but must be a finite number``.
    """

    workload: str = "digits-mlp"
    search_space: Mapping[str, Any] | None = None
    num_samples: int | None = None
    search: str = "random"
    trial_budget: int | None = None
    metric: str | None = None
    mode: str | None = None
    max_steps: int | None = None
    theta: float = 0.7
    top_k: int = 3
    instance_types: tuple[str, ...] | None = None
    availability_zones: tuple[str, ...] | None = None
    prices: str = "us-east-1_2015.csv.gz"
    start_utc: pd.Timestamp | None = None
    storage_path: str | None = None
    storage_options: Mapping[str, Any] = field(default_factory=dict)
    seed: int = 0
    backend: str = "sim"
    market_mode: str = "legacy"
    max_failures: int = 2
    checkpoint_keep: int = 2
    heartbeat_s: float | None = 2.0
    missed_beats: int = 3
    time_scale: float = 600.0
    predictor: str = "auto"
    train_days: float = 4.0
    boot_s: float = DEFAULT_BOOT_S
    objective: str = "refund"
    provisioning: str = "spottune"
    time_value_usd_per_hour: float = 0.0
    job_time_value_usd_per_hour: float = DEFAULT_JOB_TIME_VALUE_USD_PER_HOUR
    speed_model: str = "pooled"
    stopper: str = DEFAULT_STOPPER
    predictive_options: Mapping[str, Any] | str | None = None
    stopper_curves: str | None = None
    rungs: tuple[tuple[float, int], ...] = ()
    step_time_cov: float = 0.05
    billing: str = "second"
    max_usd_per_hour: float | None = None
    budget_usd: float | None = None
    deadline: float | None = None
    deadline_mode: str = "plan"
    aws: Mapping[str, Any] = field(default_factory=dict)
    ray: Mapping[str, Any] = field(default_factory=dict)
    resources: Mapping[str, float] | None = None
    on_demand_prices: str | None = None
    max_concurrent_trials: int | None = None
    _derived: tuple[str, ...] = field(default=(), init=False, repr=False, compare=False)

    # -- construction -------------------------------------------------------------------------------
    def __post_init__(self) -> None:
        set_ = lambda name, value: object.__setattr__(self, name, value)  # noqa: E731
        wl = get_workload(self.workload)
        derived = []
        for name in _FROM_WORKLOAD:
            if getattr(self, name) is None:
                value = getattr(wl, name)
                if value is None:
                    raise ConfigError(f"{name} is None, but must be given: workload {self.workload!r} has no default")
                set_(name, value)
                derived.append(name)
        if self.resources is None and wl.resources:
            set_("resources", wl.resources)
            derived.append("resources")
        else:
            set_("resources", parse_resources(self.resources) or None)
        set_("_derived", tuple(derived))
        set_("search_space", parse_space(self.search_space))
        set_("instance_types", self._names("instance_types", self.instance_types))
        set_("availability_zones", self._names("availability_zones", self.availability_zones))
        set_("start_utc", self._timestamp(self.start_utc))
        if not isinstance(self.storage_options, Mapping):
            raise ConfigError(f"storage_options is {self.storage_options!r}, but must be a mapping")
        set_("storage_options", dict(self.storage_options))
        if isinstance(self.theta, int) and not isinstance(self.theta, bool):
            set_("theta", float(self.theta))
        for name in ("time_scale", "train_days", "boot_s", "step_time_cov", "time_value_usd_per_hour",
                     "job_time_value_usd_per_hour"):
            value = getattr(self, name)
            if isinstance(value, int) and not isinstance(value, bool):
                set_(name, float(value))
        if self.deadline is not None:
            from spottune.planning._plan import parse_duration

            set_("deadline", parse_duration(self.deadline))
        self._validate()

    @staticmethod
    def _names(name: str, value: object) -> tuple[str, ...] | None:
        if value is None:
            return None
        if isinstance(value, str):
            value = [v for v in (s.strip() for s in value.split(",")) if v]
        if not isinstance(value, Sequence) or not value or not all(isinstance(v, str) and v for v in value):
            raise ConfigError(f"{name} is {value!r}, but must be a non-empty list of names (or None for all)")
        return tuple(value)

    @staticmethod
    def _timestamp(value: object) -> pd.Timestamp | None:
        if value is None:
            return None
        try:
            ts = pd.Timestamp(value)
        except (ValueError, TypeError) as exc:
            raise ConfigError(f"start_utc is {value!r}, but must be a time such as '2015-05-05T00:00Z' ({exc})") from None
        if ts is pd.NaT:
            raise ConfigError(f"start_utc is {value!r}, but must be a time, not NaT")
        return ts.tz_localize("UTC") if ts.tzinfo is None else ts.tz_convert("UTC")

    def _validate(self) -> None:
        """Check every field (:class:`_SpecFields`); keep the parsed ``predictive_options`` and normalised ``rungs``.

        Raises
        ------
        ConfigError
            The first invalid field, in one line (:func:`_check_fields`).
        """
        checked = _check_fields({f.name: getattr(self, f.name) for f in dataclasses.fields(self)})
        if self.max_concurrent_trials is not None and (self.search == "gp-ucb" or self.executes_plan):
            raise ConfigError(f"max_concurrent_trials is {self.max_concurrent_trials!r}, but must be None with "
                              + ("search 'gp-ucb' (it runs the configurations one after another)"
                                 if self.search == "gp-ucb" else
                                 f"deadline_mode {self.deadline_mode!r} (a plan sets its own parallelism; use 'guard')"))
        if self.search == "gp-ucb" and self.executes_plan:
            raise ConfigError(f"deadline_mode is {self.deadline_mode!r}, but must be 'guard' with search 'gp-ucb' (a "
                              "plan schedules every configuration at once; gp-ucb runs them one after another)")
        object.__setattr__(self, "predictive_options", checked.predictive_options)
        object.__setattr__(self, "rungs", checked.rungs)

    # -- derived values -----------------------------------------------------------------------------
    def get_workload(self) -> Workload:
        """The :class:`~spottune.workloads.Workload` this experiment trains.

        Returns
        -------
        spottune.workloads.Workload
            The registered workload named by ``workload`` (or imported from its ``module:attr`` path).

        Raises
        ------
        ConfigError
            If the name is not registered and cannot be imported.
        """
        return get_workload(self.workload)

    @property
    def theta_steps(self) -> int:
        """Steps every trial runs before the θ barrier: ``ceil(theta * max_steps)`` (Algorithm 1's phase 1 target)."""
        return self.max_steps if self.theta >= 1 else steps_at(self.theta, self.max_steps)

    @property
    def planned_steps(self) -> int:
        """Steps the study trains when no trial plateaus or fails: every trial to the first barrier, each
        barrier's ``keep`` (``top_k`` at θ) on to the next barrier or ``max_steps``."""
        if self.theta >= 1:
            return self.n_trials * self.max_steps
        marks = [(steps_at(f, self.max_steps), k) for f, k in self.rungs] + [(self.theta_steps, self.top_k)]
        total, at, n = 0, 0, self.n_trials
        for step, keep in marks:
            total, at, n = total + n * (step - at), step, min(n, keep)
        return total + n * (self.max_steps - at)

    @property
    def start(self) -> pd.Timestamp:
        """The run's start time (UTC): ``start_utc``, or :data:`DEFAULT_START_UTC` when it is None."""
        return DEFAULT_START_UTC if self.start_utc is None else self.start_utc

    @property
    def executes_plan(self) -> bool:
        """Whether the run executes a plan: both ``deadline`` and ``budget_usd`` and ``deadline_mode`` ``plan`` (the
        lean plan) or ``seer`` (SEER's)."""
        return self.deadline is not None and self.budget_usd is not None and self.deadline_mode in ("plan", "seer")

    @property
    def n_trials(self) -> int:
        """Number of trials (``num_samples`` x grid size)."""
        return count_configs(self.search_space, self.num_samples)

    def trials(self) -> list[TrialSpec]:
        """The trials, in a deterministic order, each with its configuration and seed.

        Returns
        -------
        list of TrialSpec
            ``n_trials`` trials, ids ``t00``, ``t01``, ..., in
            :func:`~spottune.search_space.generate_configs` order.
        """
        configs = generate_configs(self.search_space, self.num_samples, self.seed)
        width = max(2, len(str(len(configs) - 1)))
        return [TrialSpec(trial_id=f"t{i:0{width}d}", index=i, config=c, seed=trial_seed(self.seed, i))
                for i, c in enumerate(configs)]

    def make_trainable(self, trial: TrialSpec) -> Trainable:
        """A fresh :class:`~spottune.trainable.Trainable` for ``trial`` (runs ``setup``).

        Parameters
        ----------
        trial : TrialSpec
            One of :meth:`trials`; its config and seed are passed to the workload.

        Returns
        -------
        spottune.trainable.Trainable
            A new trainable at step 0, set up for this experiment's ``max_steps``.
        """
        return self.get_workload().make(trial.config, seed=trial.seed, max_steps=self.max_steps)

    # -- dict / YAML --------------------------------------------------------------------------------
    def to_dict(self, *, include_derived: bool = True) -> dict[str, Any]:
        """Plain-data form (YAML/JSON-ready); ``ExperimentSpec.from_dict(spec.to_dict()) == spec``.

        Parameters
        ----------
        include_derived : bool, default True
            Also write the values filled from the workload.

        Returns
        -------
        dict
            Option name to plain value (lists for tuples, an ISO string for ``start_utc``, the search space's
            plain form).
        """
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            if f.name == "_derived" or (not include_derived and f.name in self._derived):
                continue
            v = getattr(self, f.name)
            if f.name == "search_space":
                v = space_to_dict(v)
            elif f.name == "rungs":
                v = [list(r) for r in v]
            elif isinstance(v, tuple):
                v = list(v)
            elif isinstance(v, pd.Timestamp):
                v = v.isoformat()
            out[f.name] = v
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "ExperimentSpec":
        """Build from plain data; keys may use ``-`` or ``_`` and the aliases ``trainable``, ``zones``.

        Parameters
        ----------
        data : Mapping
            Option name to value, as :meth:`to_dict` writes it or a YAML file holds it.

        Returns
        -------
        ExperimentSpec
            The validated spec; options not given take their defaults or the workload's values.

        Raises
        ------
        ConfigError
            On an unknown key (with a close match suggested) or an invalid value.
        """
        if not isinstance(data, Mapping):
            raise ConfigError(f"experiment spec is {type(data).__name__}, but must be a mapping of options")
        names = [f.name for f in dataclasses.fields(cls) if f.init]
        kwargs: dict[str, Any] = {}
        for key, value in data.items():
            k = _normalise_key(key)
            if k not in names:
                close = difflib.get_close_matches(k, names, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise ConfigError(f"option {key!r} is unknown{hint} (options: {', '.join(names)})")
            kwargs[k] = value
        return cls(**kwargs)

    @classmethod
    def from_yaml(cls, path: str | os.PathLike[str]) -> "ExperimentSpec":
        """Read a YAML file of options (see the module docstring).

        Parameters
        ----------
        path : str or os.PathLike
            A UTF-8 YAML file holding a mapping of options (e.g. ``examples/digits_mlp.yaml``).

        Returns
        -------
        ExperimentSpec
            The validated spec (as :meth:`from_dict`).

        Raises
        ------
        ConfigError
            If the file is missing or not valid YAML, or on any invalid option.
        """
        try:
            raw = Path(path).read_bytes()
        except OSError as exc:
            raise ConfigError(f"experiment file {str(path)!r} cannot be read: {exc.strerror or exc}") from None
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = raw[: exc.start].count(b"\n") + 1
            raise ConfigError(f"experiment file {str(path)!r} is not UTF-8 text: byte {raw[exc.start]:#04x} on "
                              f"line {line} (save it as UTF-8)") from None
        try:
            data = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader that refuses duplicate keys
        except (yaml.YAMLError, ValueError, RecursionError) as exc:
            raise ConfigError(f"experiment file {str(path)!r} is not valid YAML: {exc}".replace("\n", " ")) from None
        if data is None or data == {}:
            raise ConfigError(f"experiment file {str(path)!r} holds no options; give at least one (e.g. 'workload: "
                              "digits-mlp'), or leave out --config to run the default experiment")
        return cls.from_dict(data)

    def to_yaml(self, path: str | os.PathLike[str] | None = None) -> str:
        """YAML text of :meth:`to_dict`; also written to ``path`` if given.

        Parameters
        ----------
        path : str or os.PathLike, optional
            A file to write the text to (overwritten); None: only return it.

        Returns
        -------
        str
            The YAML text; :meth:`from_yaml` reads it back to an equal spec.
        """
        text = yaml.safe_dump(self.to_dict(), sort_keys=False, default_flow_style=None)
        if path is not None:
            Path(path).write_text(text)
        return text

    def with_overrides(self, **options: Any) -> "ExperimentSpec":
        """A copy with some options replaced (CLI flags over a file).

        Parameters
        ----------
        **options
            Option names (``-`` or ``_``, aliases allowed). None values are ignored, so unset click
            options can be passed straight through. If ``workload`` changes, options that were
            filled from the old workload are filled from the new one.

        Returns
        -------
        ExperimentSpec
            A new, validated spec; this one is unchanged.

        Raises
        ------
        ConfigError
            On an unknown option or an invalid value.
        """
        data = self.to_dict(include_derived=False)
        data.update({_normalise_key(k): v for k, v in options.items() if v is not None})
        return type(self).from_dict(data)
