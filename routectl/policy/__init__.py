"""Policy and selection: the variable table's fields (`fields`), the pydantic config model
(`configmodel`), resolving a policy once against an environment (`resolve`), the selector
that walks a priority list of kernels (`selection`), what a loaded layer decided (`loaded`),
the per-family layer loaders (`loaders`), and a resolved policy's JSON document and text
forms (`text`)."""
