"""Fitting the modern interruption model to the SkyPilot traces: Weibull MLE, Kaplan–Meier, correlation.

What is estimated, from which files, and why: see :mod:`spotmarket._calibration`. Entry point:
:func:`calibrate_from_traces`.
"""

from __future__ import annotations

import glob
import gzip
import json
import math
import os
from os import PathLike

import numpy as np
import pandas as pd

from spotmarket.errors import MarketError
from spotmarket._calibration import ANY, HazardCalibration, WeibullLifetime
from spotmarket._units import HOUR_S

def fit_weibull(durations_s: np.ndarray, censored: np.ndarray, shape: float | None = None) -> WeibullLifetime:
    """Maximum-likelihood Weibull with right-censoring.

    Parameters
    ----------
    durations_s : ndarray of shape (n,)
        Lifetimes in seconds (> 0).
    censored : ndarray of bool, shape (n,)
        True where the lifetime is only a lower bound.
    shape : float, optional
        Hold k fixed and fit the scale only (closed form ``scale^k = sum(t^k) / n_events``).

    Returns
    -------
    WeibullLifetime
        Shape k, scale (seconds), event and censoring counts, and the Kaplan–Meier P(T <= 3600 s).

    Raises
    ------
    MarketError
        If there is no uncensored lifetime or a duration is not > 0.
    """
    from scipy import optimize  # lazy: keeps `import spotmarket` light

    t = np.asarray(durations_s, dtype=float)
    c = np.asarray(censored, dtype=bool)
    d = int(np.count_nonzero(~c))
    if d == 0 or np.any(t <= 0):
        raise MarketError(f"cannot fit a Weibull to {t.size} lifetimes with {d} events (need >= 1 event, all > 0)")
    log_t = np.log(t)
    sum_log_events = float(log_t[~c].sum())
    scale_of = lambda k: (np.sum(t ** k) / d) ** (1.0 / k)  # noqa: E731

    if shape is None:
        def neg_profile(log_k: float) -> float:
            k = math.exp(log_k)
            return -(d * math.log(k) - d * k * math.log(scale_of(k)) + (k - 1.0) * sum_log_events - d)

        res = optimize.minimize_scalar(neg_profile, bounds=(math.log(0.05), math.log(5.0)), method="bounded",
                                       options={"xatol": 1e-10})
        shape = math.exp(res.x)
    return WeibullLifetime(shape=float(shape), scale_s=float(scale_of(shape)), n_events=d,
                           n_censored=int(c.size - d), p_le_1h_observed=kaplan_meier_cdf(t, c, HOUR_S))


def kaplan_meier_cdf(durations_s: np.ndarray, censored: np.ndarray, at_s: float) -> float:
    """Kaplan–Meier estimate of P(T <= at_s) from right-censored durations (seconds).

    Parameters
    ----------
    durations_s : ndarray of shape (n,)
        Lifetimes, seconds.
    censored : ndarray of bool, shape (n,)
        True where the lifetime is only a lower bound.
    at_s : float
        Horizon, seconds.

    Returns
    -------
    float
        The estimated CDF at ``at_s``, in [0, 1].
    """
    t = np.asarray(durations_s, dtype=float)
    c = np.asarray(censored, dtype=bool)
    surv = 1.0
    for time in np.unique(t[~c]):
        if time > at_s:
            break
        at_risk = np.count_nonzero(t >= time)
        deaths = np.count_nonzero((t == time) & ~c)
        surv *= 1.0 - deaths / at_risk
    return float(1.0 - surv)


def co_interruption_share(counts: np.ndarray, window_ticks: int) -> tuple[int, int]:
    """Instance losses in one multi-node trace, and how many had another loss within ``window_ticks``.

    Parameters
    ----------
    counts : ndarray of int, shape (n_ticks,)
        Instances up at each tick (SkyPilot ``data``).
    window_ticks : int
        A loss is co-interrupted if another loss happened at most this many ticks away (a drop of
        two or more at one tick counts for all of its losses).

    Returns
    -------
    (losses, co_interrupted) : tuple of int
    """
    drop = -np.diff(np.asarray(counts, dtype=np.int64))
    ticks = np.flatnonzero(drop > 0)
    sizes = drop[ticks]
    co = 0
    for tick, size in zip(ticks, sizes):
        near = sizes[np.abs(ticks - tick) <= window_ticks].sum() - size
        co += size if size >= 2 else int(near > 0)
    return int(sizes.sum()), int(co)


def calibrate_from_traces(path: str | PathLike[str], *, family: str = "preemption", nodes: int = 1,
                          cloud: str = "aws", co_window_s: float = 300.0) -> HazardCalibration:
    """Fit :class:`HazardCalibration` from the SkyPilot interruption traces.

    Parameters
    ----------
    path : path-like
        The ``interruption_traces`` folder (or its ``skypilot`` subfolder), holding
        ``skypilot/periods.csv.gz``, ``skypilot/summary_per_trace.csv`` and
        ``skypilot/preemption/4-node/*/*.json.gz`` (see that folder's README, §1.6 for definitions).
    family : {"preemption", "availability"}, default "preemption"
        Which traces give lifetimes. ``preemption`` = real preemptions of running instances (README §3
        recommends it); ``availability`` = capacity-loss runs of launch probes (longer, more zones).
    nodes : int, default 1
        Trace cluster size; for N > 1 a lifetime is "time until the cluster is no longer full".
    cloud : str, default "aws"
    co_window_s : float, default 300
        Window for :func:`co_interruption_share` on the 4-node preemption traces (one 300 s tick).

    Returns
    -------
    HazardCalibration

    Raises
    ------
    MarketError
        If the files are missing or no trace matches.
    """
    root = os.fspath(path)
    if os.path.isdir(os.path.join(root, "skypilot")):
        root = os.path.join(root, "skypilot")
    periods_path = os.path.join(root, "periods.csv.gz")
    summary_path = os.path.join(root, "summary_per_trace.csv")
    for p in (periods_path, summary_path):
        if not os.path.exists(p):
            raise MarketError(f"interruption traces not found: {p} is missing")
    periods = pd.read_csv(periods_path)
    summary = pd.read_csv(summary_path, usecols=["trace", "instance_type"])
    periods = periods.merge(summary, on="trace", how="left")
    sel = periods[(periods["family"] == family) & (periods["nodes"] == nodes) & (periods["cloud"] == cloud)]
    up = sel[(sel["state"] == "up") & (sel["censored"].fillna("") != "left")]
    if up.empty:
        raise MarketError(f"no {cloud} {family} {nodes}-node up periods in {periods_path}")
    t = up["seconds"].to_numpy(dtype=float)
    cens = (up["censored"].fillna("") == "right").to_numpy()
    types = up["instance_type"].astype(str).to_numpy()
    zones = up["zone"].astype(str).to_numpy()

    lifetimes: dict[tuple[str, str], WeibullLifetime] = {}
    pooled = fit_weibull(t, cens)
    lifetimes[(ANY, ANY)] = pooled
    for zone in np.unique(zones):
        m = zones == zone
        if np.any(~cens[m]):
            lifetimes[(ANY, str(zone))] = fit_weibull(t[m], cens[m], shape=pooled.shape)
    for it in np.unique(types):
        m = types == it
        fit = fit_weibull(t[m], cens[m])
        lifetimes[(str(it), ANY)] = fit
        for zone in np.unique(zones[m]):
            mz = m & (zones == zone)
            if np.any(~cens[mz]):
                lifetimes[(str(it), str(zone))] = fit_weibull(t[mz], cens[mz], shape=fit.shape)

    losses = co = 0
    multi = sorted(glob.glob(os.path.join(root, "preemption", "4-node", "*", "*.json.gz")))
    for f in multi:
        with gzip.open(f, "rt") as fh:
            doc = json.load(fh)
        gap = float(doc["metadata"]["gap_seconds"])
        n, k = co_interruption_share(np.asarray(doc["data"]), int(round(co_window_s / gap)))
        losses, co = losses + n, co + k
    if losses == 0:
        raise MarketError(f"no multi-node preemption traces under {root}/preemption/4-node to estimate correlation")

    down = sel[(sel["state"] == "down") & sel["censored"].isna() & (sel["start_tick"] > 0)]
    log_down = np.log(down["seconds"].to_numpy(dtype=float))
    if log_down.size < 2:
        raise MarketError(f"too few interior down periods ({log_down.size}) to fit outages")
    type_outages = {}
    for it, g in down.groupby("instance_type"):
        if len(g) >= 10:
            x = np.log(g["seconds"].to_numpy(dtype=float))
            type_outages[str(it)] = (float(x.mean()), float(x.std(ddof=1)))
    return HazardCalibration(
        lifetimes=lifetimes, correlated_share=co / losses, outage_log_mean=float(log_down.mean()),
        outage_log_sd=float(log_down.std(ddof=1)), type_outages=type_outages,
        source=(f"{periods_path}: {cloud} {family} {nodes}-node up periods; correlation: {len(multi)} 4-node "
                f"preemption traces, {co}/{losses} losses within {co_window_s:g} s of another"),
    )
