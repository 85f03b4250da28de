"""difflow's runtime: catalog, plan compiler, ingest, step loop, subscriptions, loads."""
