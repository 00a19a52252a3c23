"""Stack lifecycle: deploy, migrate between providers, observe and benchmark endpoints."""
