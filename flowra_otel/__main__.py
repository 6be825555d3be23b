"""``python -m flowra_otel`` / ``flowra-otel``: the package's command line.

    flowra-otel audit FILE [--secret S ...] [--secrets-file F] [--no-builtin-patterns] [--json]
    flowra-otel audit --phoenix URL --project NAME [--since WHEN] [--secret S ...] [...]

See ``flowra_otel.audit`` for what the audit reads, checks and prints, and its exit status.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from . import __version__
from .core import audit


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="flowra-otel", description="Tools for traces of flowra agents made by flowra-otel."
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    audit_parser = commands.add_parser(
        "audit",
        help="list tool calls with their redaction ledger and report secrets found in exported traces",
        description=(
            "Read exported traces (OTLP JSON lines as the Collector's file exporter writes them, Jaeger "
            "JSON, Phoenix span JSON) or a running Phoenix (--phoenix), print every tool call with its "
            "redaction ledger, then every span value matching a secret pattern or a given string. "
            "Exit status: 0 clean, 1 leak found, 2 unreadable input or no span at all."
        ),
    )
    audit.add_arguments(audit_parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); returns the exit status.

    Usage errors exit with status 2 (argparse's convention, the audit's "bad input" status too).
    """
    args = _parser().parse_args(list(argv) if argv is not None else None)
    if args.command == "audit":
        return audit.run(args)
    return 2  # pragma: no cover - argparse rejects unknown commands first


if __name__ == "__main__":
    sys.exit(main())
