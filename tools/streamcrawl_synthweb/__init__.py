"""streamcrawl_synthweb: a deterministic synthetic web (HTTP + DNS on 127.0.0.0/8 only) for tests and
the demo crawl, with a ground-truth oracle and a request log to judge politeness from."""

from streamcrawl_synthweb.generator import generate
from streamcrawl_synthweb.log import LogEntry, RequestLog, Violation, load_log, politeness_violations
from streamcrawl_synthweb.model import PROFILES, Host, Page, Profile, SynthWeb
from streamcrawl_synthweb.truth import GroundTruth, TrapInfo, normalize_url

__all__ = [
    "PROFILES",
    "GroundTruth",
    "Host",
    "LogEntry",
    "Page",
    "Profile",
    "RequestLog",
    "SynthWeb",
    "TrapInfo",
    "Violation",
    "generate",
    "load_log",
    "normalize_url",
    "politeness_violations",
]
