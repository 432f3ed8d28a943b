"""Bytes in and out: every JSON input read under limits (`jsonread`), canonical JSON written
(`jsonwrite`), and the terminal's colour, `NO_COLOR` and width (`terminal`)."""
