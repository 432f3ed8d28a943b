"""Policy and selection: the variable table's fields (`fields`), the pydantic config model
(`configmodel`), resolving a policy once against an environment (`resolve`), the selector
that walks a priority list of kernels (`selection`), what a loaded layer decided (`loaded`)
and the per-family layer loaders (`loaders`)."""
