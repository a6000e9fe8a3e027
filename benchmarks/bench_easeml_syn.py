"""ease.ml's team pick on its synthetic SYN(0.5, 1.0) data: HYBRID against round robin and random user picking
(decision SV5) -> ``benchmarks/results/easeml_syn.json``.

Data (ease.ml, Section 5 and Appendix B [T]): 100 users and 100 models; user i's quality on model j is
``x_ij = b_i + alpha * m_ij`` clipped to [0, 1], with ``b_i ~ N(mu_b, sigma_b^2)`` for half of the users
``mu_b = 0.75`` and for the other half 0.25 (Appendix B's two baseline groups; ``sigma_b = 0.1`` [I], the paper
gives no value), ``m_i. ~ N(0, Sigma_M)`` per user with ``Sigma_M[j, j'] = exp(-(f_j - f_j')^2 / sigma_M^2)``,
``f_j ~ U(0, 1)``; SYN(sigma_M, alpha) = SYN(0.5, 1.0). 90 users are the "training" users: a model's feature
vector is its quality on them (ease.ml's protocol); 10 random others are the test users. Each (user, model) run
costs ``U(0, 1)``.

Each test user runs cost-aware GP-UCB (``mu + sqrt(beta_t / c) sigma``, :func:`spottune.scheduling.beta_t` with
its own round count) on a GP with prior mean 0 and a fixed RBF kernel on the feature vectors (length scale the
median pairwise distance, variance the features' variance, noise 1e-3) [I]: ease.ml fits the GP's
hyperparameters by maximum likelihood, which would take most of the run here; a user's picks depend only on its
own results, so every policy sees the same sequence per user. Each round a policy picks a user, who runs its next
model and pays its cost: HYBRID (:class:`spottune.scheduling.HybridTeamPicker`, the user's bound is its largest
``mu + sqrt(beta_t) sigma`` over untried models and its best value so far), round robin, or uniformly random.
Measured per seed: the area under the average accuracy loss ``(1/n) sum_i (a*_i - best_i)`` (0 before a user's
first run counts as a loss of ``a*_i``) against cumulative cost, up to the smallest final cost of the three
policies, over ``--rounds`` rounds. Target (ease.ml's claim as a test): HYBRID <= round robin <= random in >= 80 %
of the seeds.

Single user (ease.ml's cost-aware bound on its own, decision SV6): each test user alone runs its models by cost-aware
GP-UCB and by the same GP-UCB with ``c = 1`` (paying the real costs either way), until its accuracy loss
``a*_i - best_i`` is at most ``--loss`` (0.02); measured per seed: the test users' mean cumulative cost to get there
(every user gets there: at worst it runs all 100 models). Target (ease.ml's claim): cost-aware needs less, as a ratio
of the means over the seeds with a 95 % paired bootstrap interval below 1.

Run: ``.venv/bin/python benchmarks/bench_easeml_syn.py [--seeds 50 --rounds 100]`` (about a minute);
``--markdown`` prints the table from the JSON.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, bootstrap_interval, run_or_print  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "easeml_syn.json"
POLICIES = ("hybrid", "round-robin", "random")


def syn(rng, n_users: int = 100, n_models: int = 100, sigma_m: float = 0.5, alpha: float = 1.0,
        sigma_b: float = 0.1):
    """Quality matrix (n_users, n_models) of SYN(sigma_m, alpha)."""
    import numpy as np

    f = rng.uniform(0, 1, n_models)
    cov = np.exp(-((f[:, None] - f[None, :]) ** 2) / sigma_m ** 2) + 1e-9 * np.eye(n_models)
    mu_b = np.where(np.arange(n_users) < n_users // 2, 0.75, 0.25)
    b = rng.normal(mu_b, sigma_b)
    m = rng.multivariate_normal(np.zeros(n_models), cov, size=n_users)
    return np.clip(b[:, None] + alpha * m, 0.0, 1.0)


class _User:
    """One test user's cost-aware GP-UCB, computed lazily and shared by the policies."""

    def __init__(self, kernel, x, cost, aware: bool = True):
        import numpy as np

        self.k, self.x, self.cost, self.aware = kernel, x, cost, aware
        self.pick_cost = cost if aware else np.ones_like(cost)  # c = 1: the bound ignores the cost, the user pays it
        self.steps: list[tuple[int, float, float, float]] = []  # (model, value, cost, ucb of the state before)

    def step(self, i: int) -> tuple[int, float, float, float]:
        import numpy as np

        from spottune.scheduling import beta_t

        while len(self.steps) <= i:
            tried = [s[0] for s in self.steps]
            n = len(self.x)
            beta = beta_t(len(tried) + 1, n, float(self.pick_cost.max()))
            if tried:
                y = np.asarray([s[1] for s in self.steps])
                kss = self.k[np.ix_(tried, tried)] + 1e-3 * np.eye(len(tried))
                ks = self.k[:, tried]
                sol = np.linalg.solve(kss, np.column_stack([y, ks.T]))
                mu = ks @ sol[:, 0]
                var = np.clip(np.diag(self.k) - np.einsum("ij,ji->i", ks, sol[:, 1:]), 1e-12, None)
            else:
                mu, var = np.zeros(n), np.diag(self.k).copy()
            sigma = np.sqrt(var)
            left = np.setdiff1d(np.arange(n), tried)
            ucb = float((mu + np.sqrt(beta) * sigma)[left].max())
            pick = int(left[np.argmax((mu + np.sqrt(beta / self.pick_cost) * sigma)[left])])
            self.steps.append((pick, float(self.x[pick]), float(self.cost[pick]), ucb))
        return self.steps[i]


def _area(costs, losses, horizon: float) -> float:
    """Area under the step curve loss(cost): ``losses[0]`` from 0 to ``costs[0]``, and so on, up to ``horizon``."""
    area, prev = 0.0, 0.0
    for c, loss in zip(costs, losses):
        c = min(c, horizon)
        area += (c - prev) * loss
        prev = c
    return area


def one_seed(seed: int, rounds: int, n_test: int = 10, loss_target: float = 0.02) -> dict:
    import numpy as np

    from spottune.scheduling import HybridTeamPicker, TeamBound

    rng = np.random.default_rng(seed)
    q = syn(rng)
    users = rng.permutation(len(q))
    test, train = users[:n_test], users[n_test:]
    feats = q[train].T  # (models, training users)
    d2 = ((feats[:, None, :] - feats[None, :, :]) ** 2).sum(-1)
    ls2 = float(np.median(d2[d2 > 0]))
    kernel = float(q.var()) * np.exp(-d2 / (2 * ls2))
    cost = rng.uniform(0, 1, (n_test, q.shape[1])) + 1e-3
    learners = [_User(kernel, q[u], cost[i]) for i, u in enumerate(test)]
    best_all = q[test].max(axis=1)
    out = {}
    for policy in POLICIES:
        picker, prng = HybridTeamPicker(), np.random.default_rng(seed + 10_000)
        done = [0] * n_test
        best = np.zeros(n_test)
        spent, costs, losses = 0.0, [], [float((best_all - best).mean())]
        for r in range(rounds):
            if policy == "round-robin":
                i = r % n_test
            elif policy == "random":
                i = int(prng.integers(n_test))
            else:
                bounds = {f"u{i:02d}": TeamBound(ucb=learners[i].step(done[i])[3],
                                                 best=float(best[i]) if done[i] else None) for i in range(n_test)}
                i = int(picker.pick(bounds).team[1:])
            _, value, c, _ = learners[i].step(done[i])
            done[i] += 1
            best[i] = max(best[i], value)
            spent += c
            costs.append(spent)
            losses.append(float((best_all - best).mean()))
        out[policy] = (costs, losses)
    horizon = min(v[0][-1] for v in out.values())
    single = {}
    for aware in (True, False):
        spent_to = []
        for i, u in enumerate(test):
            user = _User(kernel, q[u], cost[i], aware=aware)
            spent, best_i = 0.0, -np.inf
            for r in range(q.shape[1]):
                _, value, c, _ = user.step(r)
                spent, best_i = spent + c, max(best_i, value)
                if best_all[i] - best_i <= loss_target + 1e-12:
                    break
            spent_to.append(spent)
        single["cost-aware" if aware else "c=1"] = float(np.mean(spent_to))
    return {p: _area(c, l, horizon) for p, (c, l) in out.items()} | {"horizon": horizon, "single_user": single}


def run(args: argparse.Namespace) -> dict:
    import numpy as np

    seeds = [one_seed(s, args.rounds, loss_target=args.loss) for s in range(args.seeds)]
    single = np.array([[s["single_user"]["cost-aware"], s["single_user"]["c=1"]] for s in seeds])
    ordered = [s["hybrid"] <= s["round-robin"] <= s["random"] for s in seeds]
    hybrid_rr = [s["hybrid"] <= s["round-robin"] for s in seeds]
    rr_random = [s["round-robin"] <= s["random"] for s in seeds]
    mean = {p: sum(s[p] for s in seeds) / len(seeds) for p in POLICIES}
    return {"dataset": "SYN(0.5, 1.0)", "seeds": args.seeds, "rounds": args.rounds, "test_users": 10, "models": 100,
            "share_ordered": sum(ordered) / len(seeds), "share_hybrid_le_rr": sum(hybrid_rr) / len(seeds),
            "share_rr_le_random": sum(rr_random) / len(seeds), "mean_area": mean,
            "single_user": {"loss_target": args.loss, "mean_cost": {"cost-aware": float(single[:, 0].mean()),
                                                                    "c=1": float(single[:, 1].mean())},
                            "ratio": float(single[:, 0].mean() / single[:, 1].mean()),
                            "ci95": list(bootstrap_interval(single, lambda m: m[:, 0] / m[:, 1])),
                            "share_cost_aware_lower": float((single[:, 0] < single[:, 1]).mean())},
            "per_seed": seeds}


def markdown(r: dict) -> str:
    lines = ["| measure | value |", "| --- | ---: |"]
    lines += [f"| mean area, {p} | {r['mean_area'][p]:.4f} |" for p in POLICIES]
    lines += [f"| seeds with HYBRID <= round robin <= random (target >= 80 %) | {100 * r['share_ordered']:.0f} % |",
              f"| seeds with HYBRID <= round robin | {100 * r['share_hybrid_le_rr']:.0f} % |",
              f"| seeds with round robin <= random | {100 * r['share_rr_le_random']:.0f} % |"]
    su = r.get("single_user")
    if su:
        lo, hi = su["ci95"]
        lines += [f"| single user: mean cost to loss <= {su['loss_target']:g}, cost-aware GP-UCB | "
                  f"{su['mean_cost']['cost-aware']:.3f} |",
                  f"| single user: mean cost to loss <= {su['loss_target']:g}, GP-UCB with c = 1 | "
                  f"{su['mean_cost']['c=1']:.3f} |",
                  f"| single user: cost-aware / (c = 1), 95 % paired bootstrap interval | {su['ratio']:.2f} "
                  f"[{lo:.2f}, {hi:.2f}] |",
                  f"| single user: seeds where cost-aware costs less | {100 * su['share_cost_aware_lower']:.0f} % |"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--loss", type=float, default=0.02, help="single user: the accuracy loss to reach")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--markdown", action="store_true", help="print the table of the stored JSON")
    return run_or_print(ap.parse_args(argv), run, markdown)


if __name__ == "__main__":
    sys.exit(main())
