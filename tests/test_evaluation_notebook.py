"""notebooks/evaluation.ipynb executes (nbclient, the venv's own python kernel) on a small simulate table."""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from spottune.evaluation import make_table
from spottune.evaluation._table import empty_row

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "evaluation.ipynb"


def _small_table(folder: Path) -> None:
    rows = []
    for start in range(2):
        for i, policy in enumerate(["spottune-0.7", "spottune-1.0", "spottune-0.3", "spottune-0.7-oracle",
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


def test_notebook_runs_on_a_small_table(tmp_path, kernel):
    run = tmp_path / "run"
    _small_table(run)
    figures = tmp_path / "figs"
    nb = nbformat.read(NOTEBOOK, as_version=4)
    idx = next(i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", []))
    nb.cells.insert(idx + 1, nbformat.v4.new_code_cell(f"RUNS = [{str(run)!r}]\nFIGURES = {str(figures)!r}"))
    NotebookClient(nb, timeout=120, kernel_name=kernel, resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()
    names = sorted(p.name for p in figures.glob("*.png"))
    assert names == ["fig10_run.png", "fig7_run.png", "fig8_run.png", "fig9_run.png"]
