"""The `inferry` command line: thin typer commands over infra/."""
