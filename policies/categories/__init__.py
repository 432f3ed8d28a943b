"""The snapshot categories: one module each. The registry is derived from the family records
(`policies.families.FAMILIES`), in the order `routectl list` shows it."""
