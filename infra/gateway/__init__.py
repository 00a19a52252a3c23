"""The deployment's front door: one Caddy config computed in typed Python, used by every target."""
