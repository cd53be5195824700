"""The `lm` assignment's probes (a CS336 repository's components) and their measurements (`diag/`)."""
