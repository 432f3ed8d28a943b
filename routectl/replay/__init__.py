"""Replay of rows on meta tensors: the harness that replays a category's rows through a
recording namespace (`harness`), the torch dispatch observer that checks replay against real
execution (`observe`), and the probe of a built native namespace (`probe`)."""
