"""Review of route snapshots: the snapshot files (`snapshot`), comparing them (`compare`,
`groups`, `patterns`), expected changes (`expected`), the check pipeline (`check`), the
baseline at another git ref (`baseline`), and the reports and matrix views that render a
comparison (`report`, `markdown`, `matrix`, `matrix_text`, `matrix_html`)."""
