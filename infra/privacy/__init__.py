"""Privacy a review can check: the sub-processors a stack reaches, and the record of processing read back."""
