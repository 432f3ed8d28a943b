"""The seam to the native ops: the namespace protocol and its engine, in-memory and torch
implementations (`native_ns`), a namespace stacked over others (`composite_ns`), and the op
specs of a catalogue with the argument binding and plan keys every recorder shares (`ops`)."""
