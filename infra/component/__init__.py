"""inferry inside a user's own Pulumi program: the Deployment component (the public API is the `inferry` package)."""
