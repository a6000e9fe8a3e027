"""earlycurve: staged learning-curve prediction (SpotTune §1.8)."""
