"""The local grid testbed: XRootD sites, a tape site with a Tape REST API, a plain WebDAV site, iperf3."""
