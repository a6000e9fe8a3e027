"""notebooks/evaluation.ipynb executes (nbclient, the venv's own python kernel) on a small simulate table, and
its numbers and figures are those of the table."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib.image
import nbformat
import numpy as np
import pytest
from nbclient import NotebookClient

from spottune.evaluation import make_table
from spottune.evaluation._table import empty_row

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "evaluation.ipynb"


def _small_table(folder: Path) -> None:
    rows = []
    for start in range(2):
        for i, policy in enumerate(["spottune-0.7", "spottune-1.0", "spottune-0.3", "spottune-0.7-hindsight",
                                    "single-cheapest", "on-demand"]):
            cost, jct = 1.0 + i + start, 2.0 + 0.5 * i
            theta = 0.3 if policy == "spottune-0.3" else 1.0 if policy == "spottune-1.0" else 0.7
            rows.append(empty_row(policy=policy, workload="w", market_mode="legacy", start_index=start,
                                  start=f"s{start}", seed=0, theta=theta, cost_usd=cost, jct_h=jct,
                                  pcr=1 / (cost * jct), top1=1.0, top3=1.0, regret=0.0, refunded_share=0.1 * i,
                                  revocations=i, hops=0, lost_steps=0, ckpt_overhead_share=0.01))
    folder.mkdir(parents=True)
    make_table(rows).to_csv(folder / "table.csv", index=False)


@pytest.fixture()
def kernel(tmp_path, monkeypatch):
    """A kernelspec named python3 that runs this interpreter (the venv's), in a private Jupyter path."""
    from ipykernel.kernelspec import install

    prefix = tmp_path / "jupyter"
    install(user=False, prefix=str(prefix), kernel_name="python3")
    spec = next(prefix.glob("share/jupyter/kernels/python3/kernel.json"))
    import json

    data = json.loads(spec.read_text())
    data["argv"][0] = sys.executable
    spec.write_text(json.dumps(data))
    monkeypatch.setenv("JUPYTER_PATH", str(prefix / "share" / "jupyter"))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    return "python3"


# Appended to the notebook: what it computed and drew, as one JSON line.
PROBE = """
import json
import numpy as np
print(json.dumps({
    "rows": {k: len(t) for k, t in tables.items()},
    "summary": {k: s.set_index("policy")[["cost_usd_mean", "jct_h_mean", "pcr_norm_mean", "refunded_share_mean", "n"]]
                .round(6).to_dict("index") for k, s in summaries.items()},
    "figures": [{"size": [round(float(v), 2) for v in f.get_size_inches()],
                 "axes": [{"xlabel": a.get_xlabel(), "ylabel": a.get_ylabel(),
                           "ticks": [t.get_text() for t in a.get_xticklabels()],
                           "bars": [round(float(p.get_height()), 6) for p in a.patches],
                           "lines": [np.round(line.get_xydata(), 6).tolist() for line in a.lines]}
                          for a in f.axes]} for f in written],
}))
"""

# The small table: policy i at start s costs 1 + i + s USD in 2 + 0.5 i hours, refunded share 0.1 i.
POLICIES = ["spottune-0.7", "spottune-1.0", "spottune-0.7-hindsight", "single-cheapest", "on-demand"]  # figure order
COST = {"spottune-0.7": 1.5, "spottune-1.0": 2.5, "spottune-0.3": 3.5, "spottune-0.7-hindsight": 4.5,
        "single-cheapest": 5.5, "on-demand": 6.5}
JCT = {"spottune-0.7": 2.0, "spottune-1.0": 2.5, "spottune-0.3": 3.0, "spottune-0.7-hindsight": 3.5,
       "single-cheapest": 4.0, "on-demand": 4.5}
REFUNDED = {"spottune-0.7": 0.0, "spottune-1.0": 0.1, "spottune-0.3": 0.2, "spottune-0.7-hindsight": 0.3,
            "single-cheapest": 0.4, "on-demand": 0.5}
# PCR / PCR(spottune-0.7) at start s = 2 (1 + s) / ((1 + i + s)(2 + 0.5 i)); mean over s = 0, 1
PCR_NORM = {"spottune-0.7": 1.0, "spottune-1.0": (2 / 5 + 4 / 7.5) / 2, "spottune-0.3": (2 / 9 + 4 / 12) / 2,
            "spottune-0.7-hindsight": (2 / 14 + 4 / 17.5) / 2, "single-cheapest": (2 / 20 + 4 / 24) / 2,
            "on-demand": (2 / 27 + 4 / 31.5) / 2}


def _axis(ylabel, policies, values, xlabel=""):
    return {"xlabel": xlabel, "ylabel": ylabel, "ticks": policies, "bars": [pytest.approx(v, abs=1e-6) for v in values]}


def _bar_figure(fig):
    """A bar figure without its error-bar lines (checked through the bar heights)."""
    return {"size": fig["size"], "axes": [{k: v for k, v in a.items() if k != "lines"} for a in fig["axes"]]}


def test_notebook_runs_on_a_small_table(tmp_path, kernel):
    run = tmp_path / "run"
    _small_table(run)
    figures = tmp_path / "figs"
    nb = nbformat.read(NOTEBOOK, as_version=4)
    idx = next(i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", []))
    nb.cells.insert(idx + 1, nbformat.v4.new_code_cell(f"RUNS = [{str(run)!r}]\nFIGURES = {str(figures)!r}"))
    nb.cells.append(nbformat.v4.new_code_cell(PROBE))
    NotebookClient(nb, timeout=120, kernel_name=kernel, resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()
    names = sorted(p.name for p in figures.glob("*.png"))
    assert names == ["fig10_run.png", "fig7_run.png", "fig8_run.png", "fig9_run.png"]
    got = json.loads(nb.cells[-1].outputs[0]["text"])

    # the numbers the notebook computes are the table's
    assert got["rows"] == {"run": 12}
    assert got["summary"]["run"] == {
        p: {"cost_usd_mean": COST[p], "jct_h_mean": JCT[p], "pcr_norm_mean": pytest.approx(PCR_NORM[p], abs=1e-6),
            "refunded_share_mean": pytest.approx(REFUNDED[p]), "n": 2} for p in COST}

    # the figures draw those numbers (fig 7, 9, 10, 8, in the order the notebook writes them)
    fig7, fig9, fig10, fig8 = got["figures"]
    assert _bar_figure(fig7) == {"size": [14.0, 4.0], "axes": [
        _axis("cost (USD)", POLICIES, [COST[p] for p in POLICIES]),
        _axis("JCT (hours)", POLICIES, [JCT[p] for p in POLICIES]),
        _axis("PCR / PCR(spottune-0.7)", POLICIES, [PCR_NORM[p] for p in POLICIES])]}
    assert _bar_figure(fig9) == {"size": [7.0, 3.8], "axes": [
        _axis("share of steps on refunded time", POLICIES, [REFUNDED[p] for p in POLICIES])]}
    two = ["spottune-0.7", "spottune-0.7-hindsight"]
    assert _bar_figure(fig10) == {"size": [12.0, 3.6], "axes": [
        _axis("cost (USD)", two, [COST[p] for p in two]),
        _axis("PCR / PCR(spottune-0.7)", two, [PCR_NORM[p] for p in two]),
        _axis("share of steps refunded", two, [REFUNDED[p] for p in two])]}
    assert fig8["size"] == [13.0, 3.6]
    assert [(a["xlabel"], a["ylabel"]) for a in fig8["axes"]] == [
        ("θ", "cost (USD)"), ("θ", "JCT (hours)"), ("θ", "top-3 accuracy")]
    # θ = 0.3, 0.7, 1.0 are spottune-0.3, spottune-0.7, spottune-1.0; top-3 is 1 everywhere
    assert fig8["axes"][0]["lines"][0] == [[0.3, 3.5], [0.7, 1.5], [1.0, 2.5]]
    assert fig8["axes"][1]["lines"][0] == [[0.3, 3.0], [0.7, 2.0], [1.0, 2.5]]
    assert fig8["axes"][2]["lines"][0] == [[0.3, 1.0], [0.7, 1.0], [1.0, 1.0]]

    # the PNG files hold drawn pictures, not blank canvases
    for name, (w_in, h_in) in {"fig7_run.png": (14.0, 4.0), "fig9_run.png": (7.0, 3.8), "fig10_run.png": (12.0, 3.6),
                               "fig8_run.png": (13.0, 3.6)}.items():
        img = matplotlib.image.imread(figures / name)[..., :3]
        h, w = img.shape[:2]
        assert 0.8 * w_in * 110 <= w <= 1.1 * w_in * 110 and 0.8 * h_in * 110 <= h <= 1.1 * h_in * 110, (name, w, h)
        ink = (img < 0.9).any(axis=2).mean()  # share of pixels that are not (near) white
        assert 0.01 < ink < 0.5, (name, ink)
        assert len(np.unique(img.reshape(-1, 3), axis=0)) > 20, name
