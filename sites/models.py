"""Models of the sites app (filled by the issues that build it)."""
