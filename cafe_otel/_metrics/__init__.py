"""GenAI client metrics: the listener, in-process aggregation and the reader."""
