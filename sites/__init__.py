"""Who and where: experiments, sites, storage endpoints, network hosts, capacities, roles."""
