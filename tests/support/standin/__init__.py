"""Stand-ins for what a GPU host has and this machine lacks: nvidia-smi and the engine process."""
