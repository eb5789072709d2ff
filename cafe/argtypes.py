"""Argument types the `cafe` commands (and plugins' commands) share."""

from __future__ import annotations

import argparse


def file_to_read(text: str) -> str:
    """A path given on the command line; an empty one is a usage error (exit 2), not `.`,
    which `Path("")` is and which every command then called a directory."""
    if not text.strip():
        raise argparse.ArgumentTypeError("needs a file path (an empty path names no file)")
    return text
