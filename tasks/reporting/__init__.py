"""What a run prints while it runs: progress lines and the run summary (below the Luigi adapter)."""
