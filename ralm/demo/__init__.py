"""`ralm demo`: the whole pipeline on real offline assets (see ``ralm.demo.command``)."""

from ralm.demo.command import build_parser, demo, main

__all__ = ["build_parser", "demo", "main"]
