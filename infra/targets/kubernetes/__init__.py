"""Kubernetes target: the same engine, args and weights as the SSH target, on any cluster (pulumi-kubernetes)."""
