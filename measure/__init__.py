"""Plain-Python drivers of gfal2, iperf3 and the cache: no Django imports, testable alone."""
