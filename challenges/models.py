"""Models of the challenges app (filled by the issues that build it)."""
