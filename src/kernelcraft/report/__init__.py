"""Reports: what a result or a run found, as terminal tables (and later HTML)."""
