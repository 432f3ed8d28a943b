"""Bytes in and out: every JSON input read under limits (`jsonread`), canonical JSON written
(`jsonwrite`), the JSON Schemas of routectl's own file formats (`schemas`), and the
terminal's colour and `NO_COLOR` (`terminal`)."""
