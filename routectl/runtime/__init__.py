"""Process machinery: Ctrl-C handling installed before the package's other imports
(`interrupt`), the test-only checkpoints that stop a run at a named place (`checkpoints`), and
the forked worker processes that replay rows in parallel (`workers`)."""
