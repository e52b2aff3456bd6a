"""Models of the results app (filled by the issues that build it)."""
