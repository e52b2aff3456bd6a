"""A target's figures, defined once: what its flow moved (rates.py: volume, average, max and stable from the
rollups), where it is heading while its window runs (projection.py), what its iperf3 runs measured for a network
target (network.py), and the one row every surface reads (figures.py: the results table and its exports, the
target's page, the rates API, the now board and its API, the link panel, alert texts)."""
