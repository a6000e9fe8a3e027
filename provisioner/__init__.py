"""provisioner: instance catalog, expected cost per step (Eq 1-2) and market choice (SpotTune §1.3-1.5)."""
