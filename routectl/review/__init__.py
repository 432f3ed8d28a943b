"""Review of route snapshots: the snapshot files (`snapshot`) and the sources that read them
(`sources`), comparing them (`compare`, `groups`, `patterns`), expected changes (`expected`),
the check pipeline (`check`) and the retained folder after it (`retained`), the baseline at
another git ref (`baseline`, over the git plumbing in `git`), and the renderers: a verdict
(`report`: text, json, github; `markdown`), one row (`explain`), the categories (`listing`)
and the matrix views (`matrix`, `matrix_text`, `matrix_html`)."""
