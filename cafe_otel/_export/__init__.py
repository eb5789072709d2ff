"""The way out: one OTLP exporter builder, the fail-soft boundary every exporter call goes
through, the one settle step, the bounded batch processor, the account of what was delivered."""
