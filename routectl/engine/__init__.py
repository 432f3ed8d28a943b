"""What an inference engine imports at start-up: resolve the policy once and load each layer
(`startup`), and the startup report of what was chosen and why (`startup_report`)."""
