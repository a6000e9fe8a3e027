"""Evaluation of final-metric predictors on recorded learning curves (does file I/O).

Not imported by :mod:`earlycurve`, which stays pure computation; used by ``spottune curves eval``
and ``benchmarks/bench_earlycurve.py``.
"""

from earlycurve.evaluation._calibrate import calibrate_stage_rule, median_rel_err
from earlycurve.evaluation._datasets import (
    DATASET_FILES,
    LAYOUTS,
    CurveSet,
    RecordedCurve,
    csv_dataset_name,
    dataset_name,
    detect_layout,
    find_datasets,
    load_cakelab,
    load_curves,
    load_digits_csv,
    load_long_csv,
    load_opda,
)
from earlycurve.evaluation._evaluate import (
    THETAS,
    PredictionTable,
    default_predictors,
    error_rows,
    evaluate_set,
    predict_table,
    selection_rows,
    subsample,
)

__all__ = [
    "DATASET_FILES",
    "CurveSet",
    "RecordedCurve",
    "find_datasets",
    "csv_dataset_name",
    "dataset_name",
    "detect_layout",
    "LAYOUTS",
    "load_curves",
    "load_long_csv",
    "load_opda",
    "load_cakelab",
    "load_digits_csv",
    "THETAS",
    "PredictionTable",
    "default_predictors",
    "predict_table",
    "error_rows",
    "selection_rows",
    "evaluate_set",
    "subsample",
    "calibrate_stage_rule",
    "median_rel_err",
]
