"""`tf.logging` of TensorFlow 1.x over Python's logging, on the logger named "tensorflow" (so
handlers a TF1 program configures for TensorFlow's logger keep working)."""

from __future__ import annotations

import logging as _logging
import sys

__all__ = [
    "DEBUG", "INFO", "WARN", "ERROR", "FATAL", "debug", "info", "warn", "warning", "error",
    "fatal", "log", "log_every_n", "log_first_n", "log_if", "vlog", "set_verbosity",
    "get_verbosity", "flush",
]  # fmt: skip

DEBUG = _logging.DEBUG
INFO = _logging.INFO
WARN = _logging.WARN
ERROR = _logging.ERROR
FATAL = _logging.FATAL

_logger = _logging.getLogger("tensorflow")
if not _logger.handlers:
    _handler = _logging.StreamHandler(sys.stderr)
    _handler.setFormatter(_logging.Formatter("%(levelname)s:%(name)s:%(message)s"))
    _logger.addHandler(_handler)
    _logger.setLevel(WARN)
    _logger.propagate = False

_counts: dict = {}


def get_logger() -> _logging.Logger:
    return _logger


def log(level: int, msg, *args, **kwargs) -> None:
    _logger.log(level, msg, *args, **kwargs)


def debug(msg, *args, **kwargs) -> None:
    _logger.debug(msg, *args, **kwargs)


def info(msg, *args, **kwargs) -> None:
    _logger.info(msg, *args, **kwargs)


def warning(msg, *args, **kwargs) -> None:
    _logger.warning(msg, *args, **kwargs)


warn = warning


def error(msg, *args, **kwargs) -> None:
    _logger.error(msg, *args, **kwargs)


def fatal(msg, *args, **kwargs) -> None:
    _logger.critical(msg, *args, **kwargs)


def vlog(level: int, msg, *args, **kwargs) -> None:
    _logger.log(level, msg, *args, **kwargs)


def _caller_key():
    frame = sys._getframe(2)
    return frame.f_code.co_filename, frame.f_lineno


def log_every_n(level: int, msg, n: int, *args) -> None:
    """Logs on the 1st, (n+1)th, (2n+1)th, ... call from the same line."""
    key = _caller_key()
    count = _counts.get(key, 0)
    _counts[key] = count + 1
    if count % max(1, n) == 0:
        _logger.log(level, msg, *args)


def log_first_n(level: int, msg, n: int, *args) -> None:
    """Logs the first n calls from the same line."""
    key = _caller_key()
    count = _counts.get(key, 0)
    _counts[key] = count + 1
    if count < n:
        _logger.log(level, msg, *args)


def log_if(level: int, msg, condition, *args) -> None:
    if condition:
        _logger.log(level, msg, *args)


def set_verbosity(v: int) -> None:
    _logger.setLevel(v)


def get_verbosity() -> int:
    return _logger.getEffectiveLevel()


def flush() -> None:
    for h in _logger.handlers:
        h.flush()
