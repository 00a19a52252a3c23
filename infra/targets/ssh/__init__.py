"""SSH target: turn GPU VMs reachable over SSH into healthy, OpenAI-compatible replicas (see component.py, apply.py)."""
