"""The way out: the fail-soft boundary, the bounded batch processor, the account of what was delivered."""
