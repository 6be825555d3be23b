"""Public home of the leak checks for your own tests (``from flowra_otel.testing import
assert_no_leak``); the implementation lives in ``flowra_otel.core.testing``."""

from .core.testing import Leak, assert_no_leak, assert_no_log_leak, find_leaks, find_log_leaks, secret_forms

__all__ = ["Leak", "assert_no_leak", "assert_no_log_leak", "find_leaks", "find_log_leaks", "secret_forms"]
