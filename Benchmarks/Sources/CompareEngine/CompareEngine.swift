// Engine-level comparison: owned by the compare-engine work.
