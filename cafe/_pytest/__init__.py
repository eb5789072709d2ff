"""The pytest plugin's inside (`cafe.pytest_plugin` is its face, the hooks): how a test's
recording is found and checked (`options`), the network refused while it replays (`network`),
how it fails (`failures`), and the marker's own recording and replay on the wire (`marked`)."""
