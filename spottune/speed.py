"""Instance-speed and checkpoint-bandwidth models of the simulator (one place, documented).

A leaf module (it imports nothing of spottune): the experiment spec, planning, the backends, the composition root,
the evaluation and the CLI all read it.

**Seconds per step** ([I]; the paper's performance matrix T of Eq 2, §III-A). A workload declares
``reference_seconds_per_step`` on a 2-vCPU general-purpose reference instance with 6.5 ECU (m4.large / r3.large
class, ``spottune.trainable``).
On another instance the simulator uses::

    T_true(i) = T_ref · (c_ref / c_i) · A(n_ref) / A(n_i)
    A(n) = 1 / ((1 − f) + f / n)                      # Amdahl speed-up on n vCPUs, f = 0.8
    c = ECU / vCPUs                                   # per-core speed (c_ref = 3.25); c_i = c_ref if no ECU

So doubling the vCPUs never halves the step time: 2 → 16 vCPUs gives A(16) / A(2) = 4 / 1.67 = 2.4× (not 8×), the
"not in a linear manner" of the paper's Figure 6. The provisioner's prior ``κ / cores`` is linear, so
it is optimistic about large instances until its online update (Algorithm 1, line 36) measures them.
f = 0.8 is an assumption (typical for small-batch SGD on CPU threads), not a measurement.

**GPU trainables** (decisions.md IC3, [I]). A trainable that declares ``resources = {"gpu": n}`` runs its steps on
the GPUs, so vCPUs and ECU say little about its speed; its ``reference_seconds_per_step`` is then on a **1-GPU**
reference instance (:data:`REFERENCE_GPUS`; g4dn.xlarge class) and ``T(i) = T_ref · A(1) / A(g_i)`` with g the
type's GPUs (same Amdahl form and f; ``seconds_per_step(..., gpus=g)``). The GPU model (T4, A10G, L4, V100, A100,
H100) is not priced in: the provisioner's online update measures it. The backends' step pacing does not pass
``gpus`` yet (it paces by vCPUs and ECU). Post-2017 types have no ECU (AWS stopped
publishing it), so on CPUs they run at the reference per-core speed.

**Checkpoint bandwidth** (the paper's §IV-F). Measured [T]: m4.4xlarge (16 cores) 134.22 MB/s, t2.micro
(1 core) 62.83 MB/s; "checkpointing is a CPU-bound process", so [I] interpolate linearly in the
number of vCPUs between those two points and clamp outside [1, 16]. Restore uses the same bandwidth.
Sizes are MB (10**6 bytes) as in ``Trainable.checkpoint_size_mb``; the paper's MB are taken as the same
unit (its own check, speed × 120 s / 1024 = max GB, reads them as binary, a 5 % difference we ignore).

**Launch-to-training latency** (decision D11, revised; design R3). :data:`DEFAULT_BOOT_S` = 120 s from the spot
request to the first training step, paid by every policy (baselines included) at every launch; 0 only
in the explicitly faithful mode (``boot_s: 0`` / ``--boot-s 0``). Sources: a Linux EC2 instance takes
"one to two minutes" to first availability (ADMIN 65/2021, "Comparing startup times of Linux distros
in the cloud", https://www.admin-magazine.com/index.php/Archive/2021/65/Comparing-startup-times-of-Linux-distros-in-the-cloud);
the OS part alone is about 29 s on c5.xlarge, RunInstances 1.5 s + pending to running 4.9 s + running to
SSH open 22.8 s (C. Percival, "EC2 boot time benchmarking", 2021,
http://www.daemonology.net/blog/2021-08-12-EC2-boot-time-benchmarking.html); and spot requests wait
longer, with more variance, than on-demand launches (Mao & Humphrey, "A Performance Study on the VM
Startup Time in the Cloud", IEEE CLOUD 2012, http://martyhumphrey.info/publication/2012Cloud/). [I] We
take the upper end of the two minutes, which leaves ~90 s for spot fulfilment and the container /
worker start (image pull, imports) on top of the measured OS boot.
"""

from __future__ import annotations

import math

#: Default launch-to-training latency (spot fulfilment + boot + container start), seconds (D11; sources above).
DEFAULT_BOOT_S = 120.0

REFERENCE_VCPUS = 2
#: GPUs of the reference instance of a GPU trainable (decisions.md IC3).
REFERENCE_GPUS = 1
REFERENCE_ECU = 6.5
PARALLEL_FRACTION = 0.8
CKPT_POINTS = ((1.0, 62.83), (16.0, 134.22))  # (vCPUs, MB/s), the paper's §IV-F [T]


def amdahl(vcpus: float, parallel_fraction: float = PARALLEL_FRACTION) -> float:
    """Amdahl speed-up on ``vcpus`` cores relative to one core (dimensionless)."""
    return 1.0 / ((1.0 - parallel_fraction) + parallel_fraction / float(vcpus))


def seconds_per_step(reference_seconds_per_step: float, vcpus: int, ecu: float | None = None,
                     parallel_fraction: float = PARALLEL_FRACTION, *, gpus: int | None = None) -> float:
    """True seconds per step of a workload on an instance with ``vcpus`` vCPUs and ``ecu`` ECU.

    Parameters
    ----------
    reference_seconds_per_step : float
        Seconds per step on the reference instance (2 vCPUs, 6.5 ECU), > 0.
    vcpus : int
        vCPUs of the instance, >= 1.
    ecu : float or None
        EC2 Compute Units; None (burstable and post-2017 types) = the reference per-core speed.
    parallel_fraction : float
        Amdahl's parallel fraction f.
    gpus : int, optional
        For a GPU trainable: the instance's GPUs (>= 1); then ``reference_seconds_per_step`` is on one GPU and
        vCPUs and ECU are not used.

    Returns
    -------
    float
        Seconds per step.

    Raises
    ------
    ValueError
        If ``reference_seconds_per_step`` <= 0, ``vcpus`` < 1 or ``gpus`` < 1.

    Examples
    --------
    >>> round(seconds_per_step(60.0, 2, 6.5), 6)
    60.0
    >>> round(seconds_per_step(60.0, 16, 52.0), 2)   # 8x the cores, 2.4x the speed
    25.0
    >>> round(seconds_per_step(60.0, 4, None, gpus=4), 2)   # a GPU trainable on 4 GPUs: A(4) = 2.5
    24.0
    """
    if gpus is not None:
        if not (reference_seconds_per_step > 0 and gpus >= 1):
            raise ValueError(f"need reference_seconds_per_step > 0 and gpus >= 1, got {reference_seconds_per_step}, {gpus}")
        return (reference_seconds_per_step * amdahl(REFERENCE_GPUS, parallel_fraction)
                / amdahl(gpus, parallel_fraction))
    if not (reference_seconds_per_step > 0 and vcpus >= 1):
        raise ValueError(f"need reference_seconds_per_step > 0 and vcpus >= 1, got {reference_seconds_per_step}, {vcpus}")
    per_core_ref = REFERENCE_ECU / REFERENCE_VCPUS
    per_core = per_core_ref if ecu is None or not math.isfinite(ecu) or ecu <= 0 else ecu / vcpus
    return (reference_seconds_per_step * (per_core_ref / per_core)
            * amdahl(REFERENCE_VCPUS, parallel_fraction) / amdahl(vcpus, parallel_fraction))


def checkpoint_bandwidth_mb_per_s(vcpus: float) -> float:
    """Checkpoint (and restore) bandwidth to object storage, MB/s, interpolated by vCPUs (the paper's §IV-F).

    >>> checkpoint_bandwidth_mb_per_s(1), checkpoint_bandwidth_mb_per_s(16), checkpoint_bandwidth_mb_per_s(64)
    (62.83, 134.22, 134.22)
    """
    (c0, b0), (c1, b1) = CKPT_POINTS
    c = min(max(float(vcpus), c0), c1)
    return b0 + (b1 - b0) * (c - c0) / (c1 - c0)


def transfer_seconds(size_mb: float, vcpus: float, overhead_s: float = 0.0) -> float:
    """Seconds to write (or read) a checkpoint of ``size_mb`` MB: ``overhead_s + size / bandwidth``."""
    return float(overhead_s) + float(size_mb) / checkpoint_bandwidth_mb_per_s(vcpus)
