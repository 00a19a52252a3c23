"""Will it fit (weights + KV cache against GPU memory) and what a million tokens cost."""
