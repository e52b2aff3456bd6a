"""The portal's side of sites' agents: the jobs an agent takes, beats for and reports (runs.jobs offers them)."""
