"""Error classes shared by the run loop and the adapters.

The run loop retries a TransientError (a dead or overloaded engine) without committing, and sends
anything else that a handler raises to the dead-letter topic after a few attempts: a poison message
must never crash a consumer loop, and an outage must never turn good messages into dead letters.
"""

from __future__ import annotations


class TransientError(RuntimeError):
    """A dependency is unavailable or timed out; the same input may succeed later."""


class PoisonMessage(ValueError):
    """The input itself is bad (undecodable, violates the contract); retrying cannot help."""


_TRANSIENT_NAMES = {
    "NoHostAvailable", "OperationTimedOut", "Unavailable", "WriteTimeout", "ReadTimeout", "ConnectionException",
    "CoordinationFailure", "OverloadedErrorMessage", "MaxRetryError", "ProtocolError", "NewConnectionError",
    "ConnectTimeoutError", "ReadTimeoutError", "ConnectionError", "ConnectionRefusedError", "TimeoutError",
    "ServerError",
}


def is_transient(exc: BaseException) -> bool:
    """True for errors that mean 'a service is down or slow', judged by class name so that this module
    needs no driver imports (the Cassandra driver, urllib3 and minio all raise their own classes)."""
    if isinstance(exc, TransientError):
        return True
    if isinstance(exc, PoisonMessage):
        return False
    return any(cls.__name__ in _TRANSIENT_NAMES for cls in type(exc).__mro__)
