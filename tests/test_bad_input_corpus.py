"""Bad-input corpus: every case is refused before anything runs, in one line, and leaves every folder as it was.

Each case is one row of :data:`CASES`: ``(id, kind, arguments, words)``.

- ``kind`` ``spottune`` / ``revpred``: ``arguments`` is the command line (split like a shell); the case passes when
  the command exits with code 2, prints exactly one line on stderr (``error: ...``, containing ``words``) and no
  traceback.
- ``kind`` ``api``: ``arguments`` are the keyword arguments of :func:`spottune.tune` as Python source (``output``
  is the case's output folder unless given); the case passes when it raises :class:`spottune.ConfigError` whose
  message contains ``words``.

In both, ``{name}`` is replaced by a path in the case's own folder: ``{out}`` (an output folder that does not
exist), ``{keep}`` (a folder that exists and holds a file), ``{prices}`` (a small valid price file), ``{models}``
(revpred models trained on it), or ``{<file>}`` for any file of :data:`FILES` (written only when used; ``{<file>.dir}``
is its folder, ``{<file>.mod}`` its name as a module: the case's folder is on ``sys.path``). Every case then checks that nothing under its folder changed: no file created, changed or removed,
``{out}`` not created. Add a case for every new flag and file format: one line here.
"""

from __future__ import annotations

import gzip
import json
import re
import shlex
import shutil
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

# -- small valid inputs ---------------------------------------------------------------------------------------
_HOURS = pd.date_range("2015-05-01T00:00Z", "2015-05-08T00:00Z", freq="h")


def _price_csv() -> str:
    rng = np.random.default_rng(0)
    rows = ["timestamp,region,availability_zone,instance_type,product_description,price"]
    for zone, itype, base in (("us-east-1a", "r3.large", 0.03), ("us-east-1b", "c3.large", 0.02)):
        for t in _HOURS:
            rows.append(f"{t.strftime('%Y-%m-%dT%H:%M:%SZ')},us-east-1,{zone},{itype},Linux/UNIX,"
                        f"{base * (1 + rng.uniform(0, 0.5)):.4f}")
    return "\n".join(rows) + "\n"


PRICES = _price_csv()
P_HEAD = "timestamp,region,availability_zone,instance_type,product_description,price\n"
P_ROW = "2015-05-01T00:00:00Z,us-east-1,us-east-1a,r3.large,Linux/UNIX,"
LONG = "config_id,step,value,max_steps\n" + "".join(
    f"c{c},{s},{1.0 / (s + c + 1):.5f},10\n" for c in range(6) for s in range(1, 11))
DIGITS = "config_id,step,max_steps,val_loss\n" + "".join(
    f"{c},{s},10,{1.0 / (s + c + 1):.5f}\n" for c in range(6) for s in range(1, 11))
OPDA = {"iteration": 0, "epochs": 3, "nan_train_loss": False,
        "learning_curve": [{"epoch": e, "top_1": 0.3 + 0.1 * e} for e in range(3)]}
WORKLOAD_SETUP_RAISES = '''
from spottune.trainable import Trainable
from spottune.workloads import Workload


class Boom(Trainable):
    reference_seconds_per_step = 60.0

    def setup(self, config):
        raise ValueError("bad config")

    def step(self):
        return {"loss": 1.0}

    def save_checkpoint(self, checkpoint_dir):
        pass

    def load_checkpoint(self, checkpoint_dir):
        pass


WORKLOAD = Workload(name="boom", trainable=Boom, metric="loss", mode="min", max_steps=4,
                    search_space={"x": {"grid_search": [1, 2]}})
'''


def _spec_line(**changes) -> str:
    from spottune.experiment import ExperimentSpec
    from spottune.journal import JOURNAL_VERSION, _trials

    spec = ExperimentSpec(prices="prices.csv", predictor="none")
    record = {"n": 0, "k": "spec", "spec": spec.to_dict(), "trials": _trials(spec), "version": JOURNAL_VERSION}
    for key, value in changes.items():
        if key.startswith("spec_"):
            record["spec"][key[5:]] = value
        else:
            record[key] = value
    return json.dumps(record, default=str) + "\n"


#: name -> (path inside the case's folder, content: str, bytes, or a callable returning one)
FILES = {
    # experiment specs (YAML)
    "y-empty": ("spec.yaml", ""),
    "y-null": ("spec.yaml", "null\n"),
    "y-tilde": ("spec.yaml", "~\n"),
    "y-braces": ("spec.yaml", "{}\n"),
    "y-comment": ("spec.yaml", "# nothing but a comment\n"),
    "y-dup": ("spec.yaml", "theta: 0.5\ntop_k: 2\ntheta: 0.6\n"),
    "y-dup-same": ("spec.yaml", "theta: 0.5\ntheta: 0.5\n"),
    "y-dup-flow": ("spec.yaml", "{theta: 0.5, theta: 0.6}\n"),
    "y-dup-nested": ("spec.yaml", "search_space:\n  lr: {grid_search: [1, 2]}\n  lr: {grid_search: [3]}\n"),
    "y-dup-alias": ("spec.yaml", "workload: logreg\nk: 2\ntop_k: 3\n"),
    "y-dup-deep": ("spec.yaml", "search_space:\n  lr: {uniform: [0, 1], uniform: [0, 2]}\n"),
    "y-list": ("spec.yaml", "- theta\n- 0.5\n"),
    "y-scalar": ("spec.yaml", "42\n"),
    "y-string": ("spec.yaml", "just some words\n"),
    "y-bad": ("spec.yaml", "theta: [0.5\n"),
    "y-tab": ("spec.yaml", "theta:\t0.5\n\ttop_k: 2\n"),
    "y-not-utf8": ("spec.yaml", b"theta: 0.5\nname: \xff\xfe\n"),
    "y-binary": ("spec.yaml", b"\x00\x01\x02\x03"),
    "y-unknown": ("spec.yaml", "tehta: 0.5\n"),
    "y-theta-nan": ("spec.yaml", "theta: .nan\n"),
    "y-theta-inf": ("spec.yaml", "theta: .inf\n"),
    "y-theta-str": ("spec.yaml", "theta: '0.5'\n"),
    "y-theta-bool": ("spec.yaml", "theta: true\n"),
    "y-topk-float": ("spec.yaml", "top_k: 2.5\n"),
    "y-topk-bool": ("spec.yaml", "top_k: true\n"),
    "y-steps-1e30": ("spec.yaml", "max_steps: 1e30\n"),
    "y-steps-huge": ("spec.yaml", "max_steps: 1000000000000\n"),
    "y-samples-1e9": ("spec.yaml", "num_samples: 1000000000\n"),
    "y-samples-float": ("spec.yaml", "num_samples: 2.0\n"),
    "y-space-list": ("spec.yaml", "search_space: [1, 2]\n"),
    "y-space-empty": ("spec.yaml", "search_space: {}\nnum_samples: 3\n"),
    "y-space-gauss": ("spec.yaml", "search_space:\n  lr: {gaussian: [0, 1]}\n"),
    "y-space-grid-empty": ("spec.yaml", "search_space:\n  lr: {grid_search: []}\n"),
    "y-space-same": ("spec.yaml", "search_space: {lr: 0.1}\nnum_samples: 4\n"),
    "y-space-grid-huge": ("spec.yaml", "search_space:\n  a: {grid_search: [" + ",".join(map(str, range(200)))
                          + "]}\n  b: {grid_search: [" + ",".join(map(str, range(200))) + "]}\n"),
    "y-storage-opts": ("spec.yaml", "storage_options: [1, 2]\n"),
    "y-aws-key": ("spec.yaml", "aws: {bucket: b, colour: blue}\n"),
    "y-aws-list": ("spec.yaml", "aws: [bucket]\n"),
    "y-ray-key": ("spec.yaml", "ray: {bogus: 1}\n"),
    "y-ray-address": ("spec.yaml", "ray: {address: ''}\n"),
    "y-ray-prices": ("spec.yaml", "ray: {prices: {r3.large: 0.1}}\n"),
    "y-ray-prices-neg": ("spec.yaml", "ray: {prices: {r3.large/us-east-1a: -1}}\n"),
    "y-types-empty": ("spec.yaml", "instance_types: []\n"),
    "y-types-int": ("spec.yaml", "instance_types: [1, 2]\n"),
    "y-start": ("spec.yaml", "start: not a time\n"),
    "y-rungs-nan": ("spec.yaml", "rungs: 'nan:3'\n"),
    "y-rungs-list": ("spec.yaml", "rungs: [[0.1]]\n"),
    "y-rungs-100": ("spec.yaml", "rungs: [[0.3, 100]]\n"),
    "y-pred-opts": ("spec.yaml", "stopper: predictive\npredictive_options: [1]\n"),
    "y-deadline": ("spec.yaml", "deadline: soon\n"),
    "y-boot": ("spec.yaml", "boot_s: 1.0e12\n"),
    "y-scale": ("spec.yaml", "time_scale: 1.0e-300\n"),
    "y-seed-float": ("spec.yaml", "seed: 1.5\n"),
    "y-mode": ("spec.yaml", "mode: sideways\n"),
    "y-metric": ("spec.yaml", "metric: ''\n"),
    "y-keep": ("spec.yaml", "checkpoint_keep: 0\n"),
    "y-prices-empty": ("spec.yaml", "prices: ''\n"),
    "y-workload-int": ("spec.yaml", "workload: 7\n"),
    "y-loguniform-0": ("spec.yaml", "search_space:\n  lr: {loguniform: [0, 1]}\n"),
    "y-uniform-rev": ("spec.yaml", "search_space:\n  lr: {uniform: [1, 0]}\n"),
    "y-choice-empty": ("spec.yaml", "search_space:\n  lr: {choice: []}\n"),
    "y-randint-empty": ("spec.yaml", "search_space:\n  n: {randint: [5, 5]}\n"),
    # price files
    "p-empty": ("p.csv", ""),
    "p-header": ("p.csv", P_HEAD),
    "p-layout": ("p.csv", "hello\nworld\n"),
    "p-negative": ("p.csv", P_HEAD + P_ROW + "-1\n"),
    "p-huge": ("p.csv", P_HEAD + P_ROW + "1e300\n"),
    "p-nan": ("p.csv", P_HEAD + P_ROW + "nan\n"),
    "p-inf": ("p.csv", P_HEAD + P_ROW + "inf\n"),
    "p-word": ("p.csv", P_HEAD + P_ROW + "cheap\n"),
    "p-time": ("p.csv", P_HEAD + "yesterday,us-east-1,us-east-1a,r3.large,Linux/UNIX,0.02\n"),
    "p-no-price": ("p.csv", P_HEAD.replace(",price", "") + P_ROW[:-1] + "\n"),
    "p-not-utf8": ("p.csv", b"\xff\xfe\x00bad\x80\x81\n"),
    "p-gz-corrupt": ("p.csv.gz", b"\x1f\x8b\x08\x00garbage!"),
    "p-gz-cut": ("p.csv.gz", lambda: gzip.compress(PRICES.encode())[:60]),
    "p-binary": ("p.csv", bytes(range(256))),
    "p-dir": ("pdir/x.txt", "a folder, not a price file\n"),
    # curve files
    "c-dup": ("c.csv", LONG + "c0,5,0.3,10\n"),
    "c-dup-first": ("c.csv", LONG.replace("c1,1,", "c0,1,", 1)),
    "c-past": ("c.csv", LONG + "c0,11,0.05,10\n"),
    "c-past-big": ("c.csv", LONG + "c3,1000000,0.05,10\n"),
    "c-digits-dup": ("digits_curves.csv", DIGITS + "0,5,10,0.3\n"),
    "c-digits-past": ("digits_curves.csv", DIGITS + "0,12,10,0.3\n"),
    "c-empty": ("c.csv", ""),
    "c-header": ("c.csv", "config_id,step,value,max_steps\n"),
    "c-renamed": ("c.csv", LONG.replace("value", "val_loss_x")),
    "c-step-word": ("c.csv", LONG + "c0,eleven,0.1,10\n"),
    "c-step-missing": ("c.csv", LONG + "c0,,0.1,10\n"),
    "c-truncated": ("c.csv", LONG[: LONG.index("c1,5,") + 4]),
    "c-extra-field": ("c.csv", LONG + "c0,3,0.1,10,oops\n"),
    "c-layout": ("c.txt", "hello world\n"),
    "c-gz-corrupt": ("c.csv.gz", b"\x1f\x8b\x08\x00junk"),
    "c-opda-no-curve": ("o.jsonl", json.dumps({"iteration": 0, "epochs": 3}) + "\n"),
    "c-opda-no-top1": ("o.jsonl", json.dumps({**OPDA, "learning_curve": [{"epoch": 0}, {"epoch": 1}]}) + "\n"),
    "c-opda-not-json": ("o.jsonl", '{"iteration": 0, "epochs": 3\n'),
    "c-opda-gz-cut": ("o.jsonl.gz", lambda: gzip.compress((json.dumps(OPDA) + "\n").encode() * 9)[:40]),
    "c-ok": ("c.csv", LONG),
    "c-other-smax": ("c.csv", LONG.replace(",10\n", ",20\n").replace("config_id,step,value,20", "config_id,step,value,max_steps")),
    # journals (spottune resume)
    "j-empty": ("run/journal.jsonl", ""),
    "j-text": ("run/journal.jsonl", "hello\n"),
    "j-binary": ("run/journal.jsonl", b"\x00\xff\x00\xff\n"),
    "j-list": ("run/journal.jsonl", "[1, 2, 3]\n"),
    "j-torn": ("run/journal.jsonl", '{"n": 0, "k": "spec", "spe'),
    "j-not-spec": ("run/journal.jsonl", '{"n": 0, "k": "event", "e": {}}\n'),
    "j-bad-n": ("run/journal.jsonl", lambda: _spec_line(n=3)),
    "j-version": ("run/journal.jsonl", lambda: _spec_line(version=99)),
    "j-no-version": ("run/journal.jsonl", lambda: _spec_line(version=None)),
    "j-spec-theta": ("run/journal.jsonl", lambda: _spec_line(spec_theta=7)),
    "j-spec-unknown": ("run/journal.jsonl", lambda: _spec_line(spec_tehta=0.5)),
    "j-spec-list": ("run/journal.jsonl", lambda: _spec_line(spec=[1, 2])),
    "j-trials": ("run/journal.jsonl", lambda: _spec_line(trials=[["t00", {}, 1]])),
    "j-gap": ("run/journal.jsonl", lambda: _spec_line() + '{"n": 5, "k": "event", "e": {}}\n'),
    "j-garbage-line": ("run/journal.jsonl", lambda: _spec_line() + "not json at all\n"),
    "j-spec-torn-tail": ("run/journal.jsonl", lambda: _spec_line(spec_theta=7) + '{"n": 1, "k": "ev'),
    "j-missing": ("run/notes.txt", "no journal here\n"),
    "j-dir": ("run/journal.jsonl/x", "a folder named like the journal\n"),
    "j-spec-bad-workload": ("run/journal.jsonl", lambda: _spec_line(spec_workload="no_such_module_xyz:X")),
    # results folders (spottune report)
    "r-empty-trials": ("res/trials.csv", ""),
    "r-notes": ("res/notes.txt", "not results\n"),
    # workloads
    "w-setup-raises": ("wl_setup_raises.py", WORKLOAD_SETUP_RAISES),
    "w-import-raises": ("wl_import_raises.py", "raise RuntimeError('no GPU here')\n"),
    "w-syntax": ("wl_syntax.py", "def (:\n"),
    "w-not-trainable": ("wl_plain.py", "X = 42\n"),
}

RUN = "run --no-progress --predictor none --prices {prices} --start 2015-05-05 --train-days 1 --output {out}"
SIM = "simulate --no-progress --starts 1 --output {out}"
CURVES = "curves eval --studies 1 --study-size 4 --no-sweep --top-k 1"
TRAIN = "train --prices {prices} --market us-east-1a/r3.large --out {out}"
EVAL = "eval --prices {prices} --models {models}"
API = "prices='{prices}', start_utc='2015-05-05', train_days=1, predictor='none'"

# (id, kind, arguments, words in the one line)
CASES = [
    # -- spottune run: flags ----------------------------------------------------------------------------------
    ("run-theta-0", "spottune", f"{RUN} --theta 0", "theta is 0.0"),
    ("run-theta-negative", "spottune", f"{RUN} --theta -1", "theta is -1.0"),
    ("run-theta-1.5", "spottune", f"{RUN} --theta 1.5", "0 < theta <= 1"),
    ("run-theta-nan", "spottune", f"{RUN} --theta nan", "theta is nan"),
    ("run-theta-inf", "spottune", f"{RUN} --theta inf", "theta is inf"),
    ("run-theta-minus-inf", "spottune", f"{RUN} --theta -inf", "theta is -inf"),
    ("run-theta-word", "spottune", f"{RUN} --theta half", "'half' is not a valid float"),
    ("run-top-k-0", "spottune", f"{RUN} --top-k 0", "top_k is 0"),
    ("run-top-k-negative", "spottune", f"{RUN} --top-k -3", "top_k is -3"),
    ("run-top-k-17", "spottune", f"{RUN} --top-k 17", "top_k <= 16"),
    ("run-top-k-word", "spottune", f"{RUN} --top-k three", "'three' is not a valid integer"),
    ("run-max-steps-0", "spottune", f"{RUN} --max-steps 0", "max_steps is 0"),
    ("run-max-steps-negative", "spottune", f"{RUN} --max-steps -5", "max_steps is -5"),
    ("run-max-steps-huge", "spottune", f"{RUN} --max-steps 1000001", "max_steps is 1000001"),
    ("run-max-steps-float", "spottune", f"{RUN} --max-steps 2.5", "not a valid integer"),
    ("run-num-samples-0", "spottune", f"{RUN} --num-samples 0", "num_samples is 0"),
    ("run-num-samples-negative", "spottune", f"{RUN} --num-samples -1", "num_samples is -1"),
    ("run-num-samples-1e9", "spottune", f"{RUN} --num-samples 1000000000", "at most 10,000"),
    ("run-num-samples-1e5", "spottune", f"{RUN} --num-samples 100000", "1,600,000 trials"),
    ("run-num-samples-huge-int", "spottune", f"{RUN} --num-samples 99999999999999999999", "at most 10,000"),
    ("run-seed-negative", "spottune", f"{RUN} --seed -1", "seed is -1"),
    ("run-seed-word", "spottune", f"{RUN} --seed lucky", "not a valid integer"),
    ("run-max-failures-negative", "spottune", f"{RUN} --max-failures -1", "max_failures is -1"),
    ("run-train-days-0", "spottune", f"{RUN} --train-days 0", "train_days is 0.0"),
    ("run-train-days-negative", "spottune", f"{RUN} --train-days -2", "train_days is -2.0"),
    ("run-train-days-nan", "spottune", f"{RUN} --train-days nan", "train_days is nan"),
    ("run-train-days-inf", "spottune", f"{RUN} --train-days inf", "train_days is inf"),
    ("run-train-days-1e9", "spottune", f"{RUN} --train-days 1e9", "train_days <= 3650"),
    ("run-train-days-longer-than-data", "spottune", f"{RUN} --train-days 30", "prices only from"),
    ("run-boot-negative", "spottune", f"{RUN} --boot-s -1", "boot_s is -1.0"),
    ("run-boot-nan", "spottune", f"{RUN} --boot-s nan", "boot_s is nan"),
    ("run-boot-inf", "spottune", f"{RUN} --boot-s inf", "boot_s is inf"),
    ("run-boot-1e12", "spottune", f"{RUN} --boot-s 1e12", "boot_s < 3600"),
    ("run-boot-an-hour", "spottune", f"{RUN} --boot-s 3600", "never trains a step"),
    ("run-step-cov-negative", "spottune", f"{RUN} --step-time-cov -0.1", "step_time_cov"),
    ("run-step-cov-1", "spottune", f"{RUN} --step-time-cov 1", "0 <= step_time_cov < 1"),
    ("run-step-cov-nan", "spottune", f"{RUN} --step-time-cov nan", "step_time_cov is nan"),
    ("run-time-scale-0", "spottune", f"{RUN} --time-scale 0", "time_scale is 0.0"),
    ("run-time-scale-negative", "spottune", f"{RUN} --time-scale -600", "time_scale is -600.0"),
    ("run-time-scale-tiny", "spottune", f"{RUN} --time-scale 1e-300", "time_scale is 1e-300"),
    ("run-local-time-scale-tiny", "spottune", f"{RUN} --backend local --time-scale 1e-300", ">= 1"),
    ("run-time-scale-half", "spottune", f"{RUN} --time-scale 0.5", "1 is real time"),
    ("run-time-scale-nan", "spottune", f"{RUN} --time-scale nan", "time_scale is nan"),
    ("run-time-scale-inf", "spottune", f"{RUN} --time-scale inf", "time_scale is inf"),
    ("run-time-value-negative", "spottune", f"{RUN} --time-value-usd-per-hour -1", "time_value_usd_per_hour"),
    ("run-time-value-nan", "spottune", f"{RUN} --time-value-usd-per-hour nan", "time_value_usd_per_hour"),
    ("run-time-value-inf", "spottune", f"{RUN} --time-value-usd-per-hour inf", "time_value_usd_per_hour"),
    ("run-job-value-negative", "spottune", f"{RUN} --job-time-value-usd-per-hour -1", "job_time_value"),
    ("run-job-value-nan", "spottune", f"{RUN} --job-time-value-usd-per-hour nan", "job_time_value"),
    ("run-job-value-inf", "spottune", f"{RUN} --job-time-value-usd-per-hour inf", "job_time_value"),
    ("run-budget-0", "spottune", f"{RUN} --budget-usd 0", "budget_usd is 0.0"),
    ("run-budget-negative", "spottune", f"{RUN} --budget-usd -5", "budget_usd is -5.0"),
    ("run-budget-nan", "spottune", f"{RUN} --budget-usd nan", "budget_usd is nan"),
    ("run-budget-inf", "spottune", f"{RUN} --budget-usd inf", "budget_usd is inf"),
    ("run-max-usd-0", "spottune", f"{RUN} --max-usd-per-hour 0", "max_usd_per_hour is 0.0"),
    ("run-max-usd-negative", "spottune", f"{RUN} --max-usd-per-hour -1", "max_usd_per_hour"),
    ("run-max-usd-nan", "spottune", f"{RUN} --max-usd-per-hour nan", "max_usd_per_hour is nan"),
    ("run-deadline-0", "spottune", f"{RUN} --deadline 0h", "deadline"),
    ("run-deadline-negative", "spottune", f"{RUN} --deadline -1h", "deadline"),
    ("run-deadline-word", "spottune", f"{RUN} --deadline soon", "soon"),
    ("run-deadline-nan", "spottune", f"{RUN} --deadline nan", "deadline"),
    ("run-deadline-mode", "spottune", f"{RUN} --deadline 6h --budget-usd 40 --deadline-mode fast", "deadline_mode"),
    ("run-plan-on-local", "spottune", f"{RUN} --deadline 6h --budget-usd 40 --backend local", "--deadline-mode guard"),
    ("run-start-word", "spottune", f"{RUN} --start 'next tuesday'", "next tuesday"),
    ("run-start-month-13", "spottune", f"{RUN} --start 2015-13-01", "2015-13-01"),
    ("run-start-nat", "spottune", f"{RUN} --start NaT", "NaT"),
    ("run-start-before-data", "spottune", f"{RUN} --start 2015-04-01", "must lie in"),
    ("run-start-after-data", "spottune", f"{RUN} --start 2016-01-01", "must lie in"),
    ("run-start-at-data-start", "spottune", f"{RUN} --start 2015-05-01", "must lie in"),
    ("run-types-empty", "spottune", f"{RUN} --instance-types ,", "instance_types"),
    ("run-types-unknown", "spottune", f"{RUN} --instance-types zz.large", "zz.large"),
    ("run-zones-empty", "spottune", f"{RUN} --zones ' , '", "availability_zones"),
    ("run-zones-unknown", "spottune", f"{RUN} --zones mars-1a", "mars-1a"),
    ("run-types-zones-disjoint", "spottune", f"{RUN} --instance-types c3.large --zones us-east-1a", "c3.large"),
    ("run-workload-unknown", "spottune", f"{RUN} --workload nope", "nope"),
    ("run-workload-module-missing", "spottune", f"{RUN} --workload no_such_module_xyz:X", "no_such_module_xyz"),
    ("run-workload-import-raises", "spottune", f"{RUN} --workload {{w-import-raises.mod}}:X",
     "no GPU here"),
    ("run-workload-syntax", "spottune", f"{RUN} --workload {{w-syntax.mod}}:X", "SyntaxError"),
    ("run-workload-not-trainable", "spottune", f"{RUN} --workload {{w-not-trainable.mod}}:X", "wl_plain:X"),
    ("run-workload-setup-raises", "spottune", f"{RUN} --top-k 1 --workload {{w-setup-raises.mod}}:WORKLOAD",
     "setup raised ValueError: bad config"),
    ("run-workload-colon", "spottune", f"{RUN} --workload :", "':'"),
    ("run-rungs-nan", "spottune", f"{RUN} --rungs nan:3", "rungs is 'nan:3'"),
    ("run-rungs-inf", "spottune", f"{RUN} --rungs inf:3", "rungs is 'inf:3'"),
    ("run-rungs-keep-inf", "spottune", f"{RUN} --rungs 0.1:inf", "rungs is '0.1:inf'"),
    ("run-rungs-keep-nan", "spottune", f"{RUN} --rungs 0.1:nan", "rungs is '0.1:nan'"),
    ("run-rungs-keep-100", "spottune", f"{RUN} --rungs 0.3:100", "rungs keep 100 trials at 0.3"),
    ("run-rungs-keep-all", "spottune", f"{RUN} --rungs 0.3:16", "the experiment has 16"),
    ("run-rungs-after-theta", "spottune", f"{RUN} --rungs 0.8:6", "fractions in (0, theta = 0.7)"),
    ("run-rungs-zero", "spottune", f"{RUN} --rungs 0:6", "fractions in (0"),
    ("run-rungs-negative", "spottune", f"{RUN} --rungs -0.1:6", "fractions in (0"),
    ("run-rungs-keep-below-top-k", "spottune", f"{RUN} --rungs 0.1:2", "keeps that fall and exceed top_k"),
    ("run-rungs-not-rising", "spottune", f"{RUN} --rungs 0.2:8,0.1:6", "rise"),
    ("run-rungs-no-keep", "spottune", f"{RUN} --rungs 0.1", "fraction:keep pairs"),
    ("run-rungs-word", "spottune", f"{RUN} --rungs abc", "fraction:keep pairs"),
    ("run-rungs-half-keep", "spottune", f"{RUN} --rungs 0.1:6.5", "whole keeps"),
    ("run-rungs-theta-1", "spottune", f"{RUN} --theta 1 --rungs 0.1:6", "empty when theta is 1"),
    ("run-rungs-with-rank", "spottune", f"{RUN} --stopper rank --rungs 0.1:6", "rungs"),
    ("run-pred-opts-not-json", "spottune", f"{RUN} --stopper predictive --predictive-options '{{'", "not JSON"),
    ("run-pred-opts-list", "spottune", f"{RUN} --stopper predictive --predictive-options '[1]'", "predictive_options"),
    ("run-pred-opts-late", "spottune",
     f"{RUN} --stopper predictive --predictive-options '{{\"fractions\": [0.9]}}'", "must lie before theta"),
    ("run-pred-opts-unknown", "spottune", f"{RUN} --stopper predictive --predictive-options '{{\"kep\": 1}}'", "kep"),
    ("run-pred-opts-barrier", "spottune", f"{RUN} --predictive-options '{{\"keep\": 0.25}}'", "not 'barrier'"),
    ("run-stopper-unknown", "spottune", f"{RUN} --stopper hope", "'hope' is not one of"),
    ("run-hparams-without-curves", "spottune", f"{RUN} --stopper hparams", "previous runs"),
    ("run-curves-with-paper", "spottune", f"{RUN} --stopper paper --stopper-curves {{c-ok}}", "stopper 'paper'"),
    ("run-curves-missing", "spottune", f"{RUN} --stopper-curves {{out}}/none.csv", "does not exist"),
    ("run-curves-dup", "spottune", f"{RUN} --max-steps 10 --stopper-curves {{c-dup}}", "has step 5 twice"),
    ("run-curves-dup-first", "spottune", f"{RUN} --max-steps 10 --stopper-curves {{c-dup-first}}", "twice"),
    ("run-curves-past", "spottune", f"{RUN} --max-steps 10 --stopper-curves {{c-past}}", "past its max_steps 10"),
    ("run-curves-past-big", "spottune", f"{RUN} --max-steps 10 --stopper-curves {{c-past-big}}", "past its max_steps"),
    ("run-curves-digits-dup", "spottune", f"{RUN} --max-steps 10 --stopper-curves {{c-digits-dup}}", "twice"),
    ("run-curves-digits-past", "spottune", f"{RUN} --max-steps 10 --stopper-curves {{c-digits-past}}", "past its"),
    ("run-curves-empty", "spottune", f"{RUN} --max-steps 10 --stopper-curves {{c-empty}}", "empty"),
    ("run-curves-layout", "spottune", f"{RUN} --max-steps 10 --stopper-curves {{c-layout}}", "known layout"),
    ("run-curves-gz", "spottune", f"{RUN} --max-steps 10 --stopper-curves {{c-gz-corrupt}}", "damaged"),
    ("run-curves-incomplete", "spottune", f"{RUN} --max-steps 10 --stopper-curves {{c-other-smax}}", "usable"),
    ("run-curves-hparams-no-columns", "spottune", f"{RUN} --max-steps 10 --stopper hparams --stopper-curves {{c-ok}}",
     "hyperparameters"),
    ("run-storage-gopher", "spottune", f"{RUN} --storage-path gopher://x/y", "gopher"),
    ("run-storage-memory-local", "spottune", f"{RUN} --backend local --storage-path memory://x", "memory://"),
    ("run-storage-memory-ray", "spottune", f"{RUN} --backend ray --storage-path memory://x", "backend 'ray'"),
    ("run-storage-memory-aws", "spottune", f"{RUN} --backend aws --storage-path memory://x", "backend 'aws'"),
    ("run-storage-userinfo", "spottune", f"{RUN} --storage-path s3://me:pw@host/b", "s3://***@host/b"),
    ("run-aws-without-bucket", "spottune", f"{RUN} --backend aws", "aws.bucket"),
    ("run-backend-unknown", "spottune", f"{RUN} --backend gpu", "'gpu' is not one of"),
    ("run-market-mode-unknown", "spottune", f"{RUN} --market-mode future", "'future' is not one of"),
    ("run-predictor-unknown", "spottune", f"{RUN} --predictor oracle", "'oracle' is not one of"),
    ("run-objective-unknown", "spottune", f"{RUN} --objective speed", "'speed' is not one of"),
    ("run-speed-model-unknown", "spottune", f"{RUN} --speed-model magic", "'magic' is not one of"),
    ("run-billing-unknown", "spottune", f"{RUN} --billing minute", "'minute' is not one of"),
    ("run-ray-address-empty", "spottune", f"{RUN} --backend ray --ray-address ''", "ray.address"),
    # a cluster address nothing listens at fails at once (Ray's own client would retry it for minutes)
    ("run-ray-address-dead", "spottune", f"{RUN} --backend ray --ray-address 127.0.0.1:9", "nothing answers at"),
    ("run-unknown-flag", "spottune", f"{RUN} --tehta 0.5", "No such option"),
    ("run-extra-argument", "spottune", f"{RUN} surplus", "unexpected extra argument"),
    ("run-config-missing", "spottune", f"{RUN} --config {{out}}/none.yaml", "does not exist"),
    ("run-config-folder", "spottune", f"{RUN} --config {{keep}}", "is a directory"),
    ("run-output-is-a-file", "spottune", f"{RUN.replace('{out}', '{c-ok}')}", "is a file"),
    ("run-output-under-a-file", "spottune", f"{RUN.replace('{out}', '{c-ok}/sub')}", "is a file"),
    ("run-output-proc", "spottune", f"{RUN.replace('{out}', '/proc/1/nope')}", "/proc/1/nope"),
    ("run-output-holds-a-run", "spottune", f"{RUN.replace('{out}', '{j-spec-theta.dir}')}", "already holds a run"),
    ("run-prices-missing", "spottune", f"{RUN.replace('{prices}', '{out}/none.csv')}", "none.csv"),
    ("run-prices-folder", "spottune", f"{RUN.replace('{prices}', '{p-dir.dir}')}", "directory"),
    ("run-prices-empty", "spottune", f"{RUN.replace('{prices}', '{p-empty}')}", "empty"),
    ("run-prices-header-only", "spottune", f"{RUN.replace('{prices}', '{p-header}')}", "p.csv"),
    ("run-prices-layout", "spottune", f"{RUN.replace('{prices}', '{p-layout}')}", "layout"),
    ("run-prices-negative", "spottune", f"{RUN.replace('{prices}', '{p-negative}')}", "line 2"),
    ("run-prices-huge", "spottune", f"{RUN.replace('{prices}', '{p-huge}')}", "1e+300"),
    ("run-prices-nan", "spottune", f"{RUN.replace('{prices}', '{p-nan}')}", "p.csv"),
    ("run-prices-inf", "spottune", f"{RUN.replace('{prices}', '{p-inf}')}", "p.csv"),
    ("run-prices-word", "spottune", f"{RUN.replace('{prices}', '{p-word}')}", "cheap"),
    ("run-prices-time", "spottune", f"{RUN.replace('{prices}', '{p-time}')}", "yesterday"),
    ("run-prices-no-column", "spottune", f"{RUN.replace('{prices}', '{p-no-price}')}", "p.csv"),
    ("run-prices-not-utf8", "spottune", f"{RUN.replace('{prices}', '{p-not-utf8}')}", "p.csv"),
    ("run-prices-gz-corrupt", "spottune", f"{RUN.replace('{prices}', '{p-gz-corrupt}')}", "damaged"),
    ("run-prices-gz-cut", "spottune", f"{RUN.replace('{prices}', '{p-gz-cut}')}", "damaged"),
    ("run-prices-binary", "spottune", f"{RUN.replace('{prices}', '{p-binary}')}", "p.csv"),
    ("run-prices-dataset-unknown", "spottune", f"{RUN.replace('{prices}', 'no_such_dataset_2099')}",
     "no_such_dataset_2099"),
    ("run-keep-start-before-data", "spottune", f"{RUN.replace('{out}', '{keep}')} --start 2015-04-01", "must lie in"),
    ("run-keep-prices-corrupt", "spottune", f"{RUN.replace('{out}', '{keep}').replace('{prices}', '{p-gz-corrupt}')}",
     "damaged"),
    ("run-keep-types-unknown", "spottune", f"{RUN.replace('{out}', '{keep}')} --instance-types zz.large", "zz.large"),
    ("run-keep-curves-dup", "spottune", f"{RUN.replace('{out}', '{keep}')} --max-steps 10 --stopper-curves {{c-dup}}",
     "twice"),
    ("run-keep-setup-raises", "spottune",
     f"{RUN.replace('{out}', '{keep}')} --top-k 1 --workload {{w-setup-raises.mod}}:WORKLOAD", "setup raised"),
    ("run-keep-rungs-nan", "spottune", f"{RUN.replace('{out}', '{keep}')} --rungs nan:3", "rungs is 'nan:3'"),
    ("run-nested-new-start-after-data", "spottune", f"{RUN.replace('{out}', '{out}/a/b')} --start 2016-01-01",
     "must lie in"),
    # -- spottune run --config: YAML spec files -----------------------------------------------------------------
    ("yaml-empty", "spottune", f"{RUN} --config {{y-empty}}", "holds no options"),
    ("yaml-null", "spottune", f"{RUN} --config {{y-null}}", "holds no options"),
    ("yaml-tilde", "spottune", f"{RUN} --config {{y-tilde}}", "holds no options"),
    ("yaml-braces", "spottune", f"{RUN} --config {{y-braces}}", "holds no options"),
    ("yaml-comment-only", "spottune", f"{RUN} --config {{y-comment}}", "holds no options"),
    ("yaml-duplicate-key", "spottune", f"{RUN} --config {{y-dup}}", "key 'theta' appears twice"),
    ("yaml-duplicate-same-value", "spottune", f"{RUN} --config {{y-dup-same}}", "appears twice"),
    ("yaml-duplicate-flow", "spottune", f"{RUN} --config {{y-dup-flow}}", "appears twice"),
    ("yaml-duplicate-nested", "spottune", f"{RUN} --config {{y-dup-nested}}", "key 'lr' appears twice"),
    ("yaml-duplicate-deep", "spottune", f"{RUN} --config {{y-dup-deep}}", "key 'uniform' appears twice"),
    ("yaml-a-list", "spottune", f"{RUN} --config {{y-list}}", "mapping"),
    ("yaml-a-number", "spottune", f"{RUN} --config {{y-scalar}}", "mapping"),
    ("yaml-a-string", "spottune", f"{RUN} --config {{y-string}}", "mapping"),
    ("yaml-invalid", "spottune", f"{RUN} --config {{y-bad}}", "not valid YAML"),
    ("yaml-tabs", "spottune", f"{RUN} --config {{y-tab}}", "not valid YAML"),
    ("yaml-not-utf8", "spottune", f"{RUN} --config {{y-not-utf8}}", "UTF-8"),
    ("yaml-binary", "spottune", f"{RUN} --config {{y-binary}}", "spec.yaml"),
    ("yaml-unknown-key", "spottune", f"{RUN} --config {{y-unknown}}", "did you mean 'theta'"),
    ("yaml-theta-nan", "spottune", f"{RUN} --config {{y-theta-nan}}", "theta is nan"),
    ("yaml-theta-inf", "spottune", f"{RUN} --config {{y-theta-inf}}", "theta is inf"),
    ("yaml-theta-string", "spottune", f"{RUN} --config {{y-theta-str}}", "theta is '0.5'"),
    ("yaml-theta-bool", "spottune", f"{RUN} --config {{y-theta-bool}}", "theta is True"),
    ("yaml-top-k-float", "spottune", f"{RUN} --config {{y-topk-float}}", "top_k is 2.5"),
    ("yaml-top-k-bool", "spottune", f"{RUN} --config {{y-topk-bool}}", "top_k is True"),
    ("yaml-max-steps-1e30", "spottune", f"{RUN} --config {{y-steps-1e30}}", "max_steps"),
    ("yaml-max-steps-huge", "spottune", f"{RUN} --config {{y-steps-huge}}", "max_steps"),
    ("yaml-num-samples-1e9", "spottune", f"{RUN} --config {{y-samples-1e9}}", "at most 10,000"),
    ("yaml-num-samples-float", "spottune", f"{RUN} --config {{y-samples-float}}", "num_samples is 2.0"),
    ("yaml-space-list", "spottune", f"{RUN} --config {{y-space-list}}", "search space is [1, 2]"),
    ("yaml-space-empty", "spottune", f"{RUN} --config {{y-space-empty}}", "empty"),
    ("yaml-space-gaussian", "spottune", f"{RUN} --config {{y-space-gauss}}", "gaussian"),
    ("yaml-space-grid-empty", "spottune", f"{RUN} --config {{y-space-grid-empty}}", "grid_search"),
    ("yaml-space-identical", "spottune", f"{RUN} --config {{y-space-same}}", "same configuration"),
    ("yaml-space-grid-40000", "spottune", f"{RUN} --config {{y-space-grid-huge}}", "40,000 trials"),
    ("yaml-loguniform-0", "spottune", f"{RUN} --config {{y-loguniform-0}}", "loguniform"),
    ("yaml-uniform-reversed", "spottune", f"{RUN} --config {{y-uniform-rev}}", "uniform"),
    ("yaml-choice-empty", "spottune", f"{RUN} --config {{y-choice-empty}}", "choice"),
    ("yaml-randint-empty", "spottune", f"{RUN} --config {{y-randint-empty}}", "randint"),
    ("yaml-storage-options-list", "spottune", f"{RUN} --config {{y-storage-opts}}", "storage_options"),
    ("yaml-aws-unknown-key", "spottune", f"{RUN} --config {{y-aws-key}}", "aws is"),
    ("yaml-aws-list", "spottune", f"{RUN} --config {{y-aws-list}}", "aws is"),
    ("yaml-ray-unknown-key", "spottune", f"{RUN} --config {{y-ray-key}}", "ray is"),
    ("yaml-ray-address-empty", "spottune", f"{RUN} --config {{y-ray-address}}", "ray.address"),
    ("yaml-ray-prices-key", "spottune", f"{RUN} --config {{y-ray-prices}}", "ray.prices"),
    ("yaml-ray-prices-negative", "spottune", f"{RUN} --config {{y-ray-prices-neg}}", "ray.prices"),
    ("yaml-types-empty", "spottune", f"{RUN} --config {{y-types-empty}}", "instance_types"),
    ("yaml-types-numbers", "spottune", f"{RUN} --config {{y-types-int}}", "instance_types"),
    ("yaml-start-word", "spottune", f"{RUN} --config {{y-start}}", "not a time"),
    ("yaml-rungs-nan", "spottune", f"{RUN} --config {{y-rungs-nan}}", "rungs is 'nan:3'"),
    ("yaml-rungs-no-keep", "spottune", f"{RUN} --config {{y-rungs-list}}", "fraction:keep pairs"),
    ("yaml-rungs-keep-100", "spottune", f"{RUN} --config {{y-rungs-100}}", "rungs keep 100"),
    ("yaml-predictive-options-list", "spottune", f"{RUN} --config {{y-pred-opts}}", "predictive_options"),
    ("yaml-deadline-word", "spottune", f"{RUN} --config {{y-deadline}}", "soon"),
    ("yaml-boot-1e12", "spottune", f"{RUN} --config {{y-boot}}", "boot_s"),
    ("yaml-time-scale-tiny", "spottune", f"{RUN} --config {{y-scale}}", "time_scale"),
    ("yaml-seed-float", "spottune", f"{RUN} --config {{y-seed-float}}", "seed is 1.5"),
    ("yaml-mode", "spottune", f"{RUN} --config {{y-mode}}", "mode is 'sideways'"),
    ("yaml-metric-empty", "spottune", f"{RUN} --config {{y-metric}}", "metric is ''"),
    ("yaml-checkpoint-keep-0", "spottune", f"{RUN} --config {{y-keep}}", "checkpoint_keep is 0"),
    ("yaml-workload-number", "spottune", f"{RUN} --config {{y-workload-int}}", "7"),
    # -- spottune resume: journal files -----------------------------------------------------------------------
    ("resume-journal-empty", "spottune", "resume --no-progress {j-empty.dir}", "holds no run to resume"),
    ("resume-journal-text", "spottune", "resume --no-progress {j-text.dir}", "line 1 is not JSON"),
    ("resume-journal-binary", "spottune", "resume --no-progress {j-binary.dir}", "not JSON"),
    ("resume-journal-list", "spottune", "resume --no-progress {j-list.dir}", "line 1 is not a journal record"),
    ("resume-journal-torn-spec", "spottune", "resume --no-progress {j-torn.dir}", "holds no run to resume"),
    ("resume-journal-not-spec", "spottune", "resume --no-progress {j-not-spec.dir}", "not a spottune journal"),
    ("resume-journal-bad-position", "spottune", "resume --no-progress {j-bad-n.dir}", "position 3, expected 0"),
    ("resume-journal-version", "spottune", "resume --no-progress {j-version.dir}", "version 99"),
    ("resume-journal-no-version", "spottune", "resume --no-progress {j-no-version.dir}", "version None"),
    ("resume-journal-spec-invalid", "spottune", "resume --no-progress {j-spec-theta.dir}", "theta is 7.0"),
    ("resume-journal-spec-unknown", "spottune", "resume --no-progress {j-spec-unknown.dir}", "tehta"),
    ("resume-journal-spec-list", "spottune", "resume --no-progress {j-spec-list.dir}", "holds no experiment spec"),
    ("resume-journal-trials-differ", "spottune", "resume --no-progress {j-trials.dir}", "journal record 0 differs"),
    ("resume-journal-gap", "spottune", "resume --no-progress {j-gap.dir}", "line 2 has position 5"),
    ("resume-journal-garbage-line", "spottune", "resume --no-progress {j-garbage-line.dir}", "line 2 is not JSON"),
    ("resume-journal-torn-tail", "spottune", "resume --no-progress {j-spec-torn-tail.dir}", "theta is 7.0"),
    ("resume-no-journal", "spottune", "resume --no-progress {j-missing.dir}", "holds no journal"),
    ("resume-journal-a-folder", "spottune", "resume --no-progress {j-dir.dir}/..", "holds no journal"),
    ("resume-journal-bad-workload", "spottune", "resume --no-progress {j-spec-bad-workload.dir}", "no_such_module_xyz"),
    ("resume-missing-folder", "spottune", "resume --no-progress {out}", "does not exist"),
    ("resume-a-file", "spottune", "resume --no-progress {c-ok}", "is a file"),
    ("resume-empty-folder", "spottune", "resume --no-progress {keep}", "holds no journal"),
    # -- spottune report: results folders ------------------------------------------------------------------------
    ("report-not-results", "spottune", "report --no-plots {r-notes.dir}", "not a spottune results folder"),
    ("report-empty-trials", "spottune", "report --no-plots {r-empty-trials.dir}", "res"),
    ("report-missing", "spottune", "report {out}", "does not exist"),
    ("report-a-file", "spottune", "report {c-ok}", "is a file"),
    ("report-journal-only", "spottune", "report --no-plots {j-spec-theta.dir}", "run"),
    # -- spottune prices: price files ---------------------------------------------------------------------------
    ("prices-empty", "spottune", "prices info {p-empty}", "empty"),
    ("prices-header-only", "spottune", "prices info {p-header}", "p.csv"),
    ("prices-layout", "spottune", "prices info {p-layout}", "layout"),
    ("prices-negative", "spottune", "prices info {p-negative}", "line 2"),
    ("prices-huge", "spottune", "prices info {p-huge}", "1e+300"),
    ("prices-nan", "spottune", "prices info {p-nan}", "p.csv"),
    ("prices-inf", "spottune", "prices info {p-inf}", "p.csv"),
    ("prices-word", "spottune", "prices info {p-word}", "cheap"),
    ("prices-time", "spottune", "prices info {p-time}", "yesterday"),
    ("prices-no-column", "spottune", "prices info {p-no-price}", "p.csv"),
    ("prices-not-utf8", "spottune", "prices info {p-not-utf8}", "p.csv"),
    ("prices-gz-corrupt", "spottune", "prices info {p-gz-corrupt}", "damaged"),
    ("prices-gz-cut", "spottune", "prices info {p-gz-cut}", "damaged"),
    ("prices-binary", "spottune", "prices info {p-binary}", "p.csv"),
    ("prices-folder", "spottune", "prices info {p-dir.dir}", "directory"),
    ("prices-dev-null", "spottune", "prices info /dev/null", "not a regular file"),
    ("prices-missing", "spottune", "prices info {out}/none.csv", "none.csv"),
    ("prices-fetch-days-0", "spottune",
     "prices fetch --region us-east-1 --instance-types r4.large --days 0 --out {out}/x.csv", "days"),
    ("prices-fetch-bad-region", "spottune",
     "prices fetch --region 'no such region!' --instance-types r4.large --days 1 --out {out}/x.csv", "no such region!"),
    # -- spottune curves: curve files ------------------------------------------------------------------------
    ("curves-dup", "spottune", f"{CURVES} {{c-dup}}", "config_id 'c0' has step 5 twice"),
    ("curves-dup-first", "spottune", f"{CURVES} {{c-dup-first}}", "has step 1 twice"),
    ("curves-past", "spottune", f"{CURVES} {{c-past}}", "has step 11, past its max_steps 10"),
    ("curves-past-big", "spottune", f"{CURVES} {{c-past-big}}", "past its max_steps 10"),
    ("curves-digits-dup", "spottune", f"{CURVES} {{c-digits-dup}}", "twice"),
    ("curves-digits-past", "spottune", f"{CURVES} {{c-digits-past}}", "past its max_steps"),
    ("curves-empty", "spottune", f"{CURVES} {{c-empty}}", "empty"),
    ("curves-header-only", "spottune", f"{CURVES} {{c-header}}", "no rows"),
    ("curves-renamed-column", "spottune", f"{CURVES} {{c-renamed}}", "c.csv"),
    ("curves-step-word", "spottune", f"{CURVES} {{c-step-word}}", "'eleven' is not a number"),
    ("curves-step-missing", "spottune", f"{CURVES} {{c-step-missing}}", "step is missing"),
    ("curves-truncated", "spottune", f"{CURVES} {{c-truncated}}", "line"),
    ("curves-extra-field", "spottune", f"{CURVES} {{c-extra-field}}", "field(s)"),
    ("curves-layout", "spottune", f"{CURVES} {{c-layout}}", "c.txt"),
    ("curves-gz-corrupt", "spottune", f"{CURVES} {{c-gz-corrupt}}", "damaged"),
    ("curves-opda-no-curve", "spottune", f"{CURVES} {{c-opda-no-curve}}", "learning_curve"),
    ("curves-opda-no-top1", "spottune", f"{CURVES} {{c-opda-no-top1}}", "top_1"),
    ("curves-opda-not-json", "spottune", f"{CURVES} {{c-opda-not-json}}", "line 1"),
    ("curves-opda-gz-cut", "spottune", f"{CURVES} {{c-opda-gz-cut}}", "damaged"),
    ("curves-missing", "spottune", f"{CURVES} {{out}}/none.csv", "none.csv"),
    ("curves-empty-folder", "spottune", f"{CURVES} {{keep}}", "curve"),
    ("curves-top-k-0", "spottune", "curves eval {c-ok} --top-k 0", "top_k"),
    ("curves-top-k-too-many", "spottune", "curves eval {c-ok} --top-k 6", "top-k"),
    ("curves-choose-dup", "spottune", "curves choose {c-dup}", "twice"),
    ("curves-choose-past", "spottune", "curves choose {c-past}", "past its max_steps"),
    # -- spottune simulate ------------------------------------------------------------------------------------
    ("simulate-max-steps-0", "spottune", f"{SIM} --max-steps 0", "max-steps"),
    ("simulate-max-steps-negative", "spottune", f"{SIM} --max-steps -5", "max-steps"),
    ("simulate-workload-unknown", "spottune", f"{SIM} --workload nope", "nope"),
    ("simulate-time-value-negative", "spottune", f"{SIM} --time-value-usd-per-hour -0.5", "time-value-usd-per-hour"),
    ("simulate-job-value-negative", "spottune", f"{SIM} --job-time-value-usd-per-hour -1", "job-time-value"),
    ("simulate-jobs-0", "spottune", f"{SIM} --jobs 0", "jobs"),
    ("simulate-seer-without-budget", "spottune", f"{SIM} --policies seer --deadline 6h", "--budget-usd"),
    ("simulate-deadline-0", "spottune", f"{SIM} --deadline 0h", "deadline"),
    ("simulate-budget-negative", "spottune", f"{SIM} --budget-usd -1", "budget"),
    ("simulate-types-unknown", "spottune", f"{SIM} --instance-types zz.large", "zz.large"),
    ("simulate-prices-corrupt", "spottune", f"{SIM} --prices {{p-gz-corrupt}}", "damaged"),
    ("simulate-prices-empty", "spottune", f"{SIM} --prices {{p-empty}}", "empty"),
    ("simulate-unknown-flag", "spottune", f"{SIM} --tehta 0.5", "No such option"),
    ("simulate-output-is-a-file", "spottune", f"{SIM.replace('{out}', '{c-ok}')}", "c.csv"),
    ("simulate-boot-1e12", "spottune", f"{SIM} --boot-s 1e12", "boot_s < 3600"),
    ("simulate-boot-inf", "spottune", f"{SIM} --boot-s inf", "--boot-s is inf"),
    ("simulate-boot-nan", "spottune", f"{SIM} --boot-s nan", "--boot-s is nan"),
    ("simulate-rungs-nan", "spottune", f"{SIM} --rungs nan:3", "rungs is 'nan:3'"),
    ("simulate-rungs-inf", "spottune", f"{SIM} --rungs inf:3", "rungs is 'inf:3'"),
    ("simulate-hparams-without-runs", "spottune",
     f"{SIM} --workload cakelab-resnet32 --policies spottune-0.2 --stopper hparams", "has none"),
    ("simulate-seeded-peer-without-runs", "spottune",
     f"{SIM} --workload cakelab-resnet32 --policies optuna-sha-r1-rf3-seeded", "has none"),
    # -- revpred train / eval --------------------------------------------------------------------------------
    ("revpred-train-start-word", "revpred", f"{TRAIN} --train-start soon --train-end 2015-05-02", "soon"),
    ("revpred-train-end-word", "revpred", f"{TRAIN} --train-start 2015-05-01 --train-end later", "later"),
    ("revpred-train-reversed", "revpred", f"{TRAIN} --train-start 2015-05-03 --train-end 2015-05-02", "not after"),
    ("revpred-train-epochs-0", "revpred", f"{TRAIN} --train-start 2015-05-01 --train-end 2015-05-02 --epochs 0",
     "epochs"),
    ("revpred-train-kinds", "revpred",
     f"{TRAIN} --train-start 2015-05-01 --train-end 2015-05-02 --kinds revpred,oracle", "unknown"),
    ("revpred-train-market-unknown", "revpred",
     "train --prices {prices} --market us-east-1a/x9.huge --train-start 2015-05-01 --train-end 2015-05-02 "
     "--out {out}", "not in the price data"),
    ("revpred-train-market-bogus", "revpred",
     "train --prices {prices} --market bogus --train-start 2015-05-01 --train-end 2015-05-02 --out {out}", "AZ/TYPE"),
    ("revpred-train-both-markets", "revpred",
     "train --prices {prices} --all-markets --market us-east-1a/r3.large --train-start 2015-05-01 "
     "--train-end 2015-05-02 --out {out}", "not both"),
    ("revpred-train-no-market", "revpred",
     "train --prices {prices} --train-start 2015-05-01 --train-end 2015-05-02 --out {out}", "no market given"),
    ("revpred-train-prices-missing", "revpred",
     "train --prices {out}/none.csv --market us-east-1a/r3.large --train-start 2015-05-01 --train-end 2015-05-02 "
     "--out {out}", "none.csv"),
    ("revpred-eval-after-data", "revpred", f"{EVAL} --test-start 2016-01-01 --test-end 2016-01-02",
     "holds no test query"),
    ("revpred-eval-far-future", "revpred", f"{EVAL} --test-start 2030-01-01 --test-end 2031-01-01",
     "holds no test query"),
    ("revpred-eval-too-short", "revpred", f"{EVAL} --test-start 2015-05-03T00:00Z --test-end 2015-05-03T00:30Z",
     "holds no test query"),
    ("revpred-eval-reversed", "revpred", f"{EVAL} --test-start 2015-05-04 --test-end 2015-05-03", "ends before"),
    ("revpred-eval-inside-training", "revpred", f"{EVAL} --test-start 2015-05-01T12:00Z --test-end 2015-05-03",
     "inside the training window"),
    ("revpred-eval-start-word", "revpred", f"{EVAL} --test-start soon --test-end 2015-05-03", "soon"),
    ("revpred-eval-no-models", "revpred",
     "eval --prices {prices} --models {out} --test-start 2015-05-03 --test-end 2015-05-04", "does not exist"),
    ("revpred-eval-stride-0", "revpred", f"{EVAL} --test-start 2015-05-03 --test-end 2015-05-04 --stride 0",
     "stride"),
    ("revpred-info-empty-folder", "revpred", "info {keep}", "revpred.json"),
    # -- spottune.tune ------------------------------------------------------------------------------------------
    ("api-storage-userinfo", "api", f"{API}, storage_path='gopher://me:pw@host/b'", "gopher://***@host/b"),
    ("api-output-int", "api", f"{API}, output=123", "output is 123"),
    ("api-output-list", "api", f"{API}, output=['a']", "output is ['a']"),
    ("api-output-empty", "api", f"{API}, output=''", "output is ''"),
    ("api-output-a-file", "api", f"{API}, output='{{c-ok}}'", "is a file"),
    ("api-output-holds-a-run", "api", f"{API}, output='{{j-spec-theta.dir}}'", "already holds a run"),
    ("api-resume-int", "api", "resume=123", "resume is 123"),
    ("api-resume-with-options", "api", "resume='{keep}', theta=0.5", "give no spec"),
    ("api-resume-no-journal", "api", "resume='{keep}'", "holds no journal"),
    ("api-resume-bad-journal", "api", "resume='{j-version.dir}'", "version 99"),
    ("api-progress-string", "api", f"{API}, progress='yes'", "progress is 'yes'"),
    ("api-storage-memory-local", "api", f"{API}, backend='local', storage_path='memory://x'", "memory://"),
    ("api-storage-gopher", "api", f"{API}, storage_path='gopher://x'", "storage_path"),
    ("api-unknown-option", "api", f"{API}, tehta=0.5", "did you mean 'theta'"),
    ("api-spec-a-number", "api", "spec=42", "spec is a int"),
    ("api-theta-nan", "api", f"{API}, theta=float('nan')", "theta is nan"),
    ("api-theta-string", "api", f"{API}, theta='0.7'", "theta is '0.7'"),
    ("api-top-k-big", "api", f"{API}, top_k=99", "top_k"),
    ("api-rungs-nan", "api", f"{API}, rungs='nan:3'", "rungs is 'nan:3'"),
    ("api-rungs-inf", "api", f"{API}, rungs='inf:3'", "rungs is 'inf:3'"),
    ("api-rungs-inf-pair", "api", f"{API}, rungs=[(float('inf'), 3)]", "fraction:keep pairs"),
    ("api-rungs-keep-inf-pair", "api", f"{API}, rungs=[(0.1, float('inf'))]", "fraction:keep pairs"),
    ("api-rungs-keep-100", "api", f"{API}, rungs='0.3:100'", "rungs keep 100"),
    ("api-num-samples-1e9", "api", f"{API}, num_samples=10**9", "at most 10,000"),
    ("api-boot-1e12", "api", f"{API}, boot_s=1e12", "boot_s"),
    ("api-time-scale-tiny", "api", f"{API}, backend='local', time_scale=1e-300", "time_scale"),
    ("api-search-space-list", "api", f"{API}, search_space=[1, 2]", "search space is [1, 2]"),
    ("api-start-word", "api", "prices='{prices}', predictor='none', start_utc='whenever'", "whenever"),
    ("api-start-before-data", "api", "prices='{prices}', predictor='none', start_utc='2015-04-01', train_days=1",
     "must lie in"),
    ("api-train-days-longer-than-data", "api", "prices='{prices}', predictor='none', start_utc='2015-05-05', "
     "train_days=30", "prices only from"),
    ("api-prices-missing", "api", "prices='{out}/none.csv', predictor='none'", "none.csv"),
    ("api-prices-corrupt", "api", "prices='{p-gz-corrupt}', predictor='none'", "damaged"),
    ("api-types-unknown", "api", f"{API}, instance_types='zz.large'", "zz.large"),
    ("api-workload-unknown", "api", f"{API}, workload='nope'", "nope"),
    ("api-workload-setup-raises", "api", f"{API}, top_k=1, workload='{{w-setup-raises.mod}}:WORKLOAD'", "setup raised ValueError"),
    ("api-curves-dup", "api", f"{API}, max_steps=10, stopper_curves='{{c-dup}}'", "twice"),
    ("api-curves-past", "api", f"{API}, max_steps=10, stopper_curves='{{c-past}}'", "past its max_steps"),
    ("api-keep-start-before-data", "api", "prices='{prices}', predictor='none', start_utc='2015-04-01', "
     "train_days=1, output='{keep}'", "must lie in"),
    ("api-keep-prices-corrupt", "api", "prices='{p-gz-corrupt}', predictor='none', output='{keep}'", "damaged"),
    ("api-nested-new-curves-past", "api", f"{API}, max_steps=10, stopper_curves='{{c-past}}', output='{{out}}/a/b'",
     "past its max_steps"),
    ("api-aws-without-bucket", "api", f"{API}, backend='aws'", "aws.bucket"),
    ("api-storage-options-list", "api", f"{API}, storage_options=[1]", "storage_options"),
    ("api-max-failures-negative", "api", f"{API}, max_failures=-1", "max_failures"),
    ("api-seed-float", "api", f"{API}, seed=1.5", "seed is 1.5"),
]

#: What :func:`spottune.tune` raises on bad input: ConfigError, or the specific error of the package that read the
#: input (a price file: spotmarket's PriceDataError; a pool: the provisioner's ProvisionerConfigError); never another
#: spottune error (a BackendError is not a refusal of bad input).
def _api_errors() -> tuple[type[BaseException], ...]:
    from earlycurve.errors import EarlyCurveError
    from provisioner.errors import ProvisionerError
    from revpred.errors import RevPredError
    from spotmarket.errors import SpotMarketError
    from spottune.errors import ConfigError

    return ConfigError, SpotMarketError, RevPredError, EarlyCurveError, ProvisionerError


API_ERRORS = _api_errors()
_TOKEN = re.compile(r"\{([A-Za-z0-9_.-]+)\}")


def _materialise(template: str, root: Path, prices: Path, models: Path | None) -> str:
    """``template`` with every ``{name}`` replaced by a path under ``root`` (files of FILES written as used)."""

    def path(match: re.Match) -> str:
        name = match.group(1)
        if name == "out":
            return str(root / "out")
        if name == "keep":
            return str(root / "keep")
        if name == "prices":
            return str(prices)
        if name == "models":
            return str(models)
        key, _, attr = name.partition(".")
        rel, content = FILES[key]
        target = root / rel
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            data = content() if callable(content) else content
            if isinstance(data, bytes):
                target.write_bytes(data)
            else:
                target.write_text(data)
        return target.stem if attr == "mod" else str(target.parent if attr == "dir" else target)

    return _TOKEN.sub(path, template)


def _tree(root: Path) -> dict[str, bytes | None]:
    """Every file (its bytes) and folder (None) under ``root``."""
    return {str(p.relative_to(root)): (None if p.is_dir() else p.read_bytes()) for p in sorted(root.rglob("*"))}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """A small valid price file and revpred models trained on it (one epoch, the constant baseline)."""
    from click.testing import CliRunner

    from revpred.cli import cli

    root = tmp_path_factory.mktemp("corpus-inputs")
    prices = root / "prices.csv"
    prices.write_text(PRICES)
    models = root / "models"
    res = CliRunner().invoke(cli, ["train", "--prices", str(prices), "--market", "us-east-1a/r3.large",
                                   "--train-start", "2015-05-01T00:00Z", "--train-end", "2015-05-02T00:00Z",
                                   "--out", str(models), "--epochs", "1", "--stride", "30", "--kinds", "constant"])
    assert res.exit_code == 0, res.output
    return prices, models


def _run_cli(program: str, argv: list[str], monkeypatch, capsys) -> tuple[int, str]:
    if program == "spottune":
        from spottune.cli import main
    else:
        from revpred.cli import main
    monkeypatch.setattr(sys, "argv", [program, *argv])
    code: object = 0
    try:
        main()
    except SystemExit as exc:
        code = exc.code
    return (0 if code is None else code), capsys.readouterr().err


def test_the_corpus_has_at_least_250_cases_with_unique_ids():
    ids = [c[0] for c in CASES]
    assert len(ids) == len(set(ids))
    assert len(CASES) >= 250
    assert {c[1] for c in CASES} == {"spottune", "revpred", "api"}


@pytest.mark.parametrize(("kind", "arguments", "words"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_refused_in_one_line_and_touches_nothing(kind, arguments, words, inputs, tmp_path, monkeypatch,
                                                              capsys):
    prices, models = inputs
    root = tmp_path / "case"
    (root / "keep").mkdir(parents=True)
    (root / "keep" / "notes.txt").write_text("the user's own file\n")
    monkeypatch.chdir(root)
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    filled = _materialise(arguments, root, prices, models)
    before = _tree(root)
    if kind == "api":
        import spottune

        kwargs = eval(f"dict({filled})")  # noqa: S307 - the corpus's own Python literals
        spec = kwargs.pop("spec", None)
        if "output" not in kwargs and "resume" not in kwargs:
            kwargs["output"] = str(root / "out")
        with pytest.raises(API_ERRORS) as info:
            spottune.tune(spec, **kwargs)
        message = str(info.value)
        assert words in message, message
        assert "\n" not in message.strip(), message
    else:
        argv = shlex.split(filled)
        code, err = _run_cli(kind, argv, monkeypatch, capsys)
        lines = err.strip().splitlines()
        assert "Traceback" not in err, err
        assert code == 2, err
        assert len(lines) == 1 and lines[0].startswith("error: "), err
        assert words in lines[0], err
    assert _tree(root) == before, "the refused input changed a folder"
    assert not (root / "out").exists()
    assert not (root / "results").exists()
