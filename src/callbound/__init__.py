"""callbound: run LLM tool-calling loops safely, for any provider.

Importing this package loads the core and pydantic only: no provider SDK, CLI or database driver
(D30). The runtime (asyncio, threads) loads on first use of a name it defines: ``Runner``,
``Outcome``, ``Policy``, ``Price``, ``ToolError`` and ``ApproverNotAllowed``. docs/reference.md
documents every name of ``__all__`` with the errors it raises.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .core.approvals import Decision, PendingApproval
from .core.errors import (
    ApprovalAlreadyDecided,
    ApprovalChanged,
    BindingMismatch,
    CallboundError,
    CanonicalizationError,
    CorrelationError,
    EventTooLarge,
    IllegalTransition,
    IntentTaken,
    LedgerChanged,
    NotApplied,
    OperationBusy,
    OperationExists,
    ProtocolViolation,
    SchemaVersionError,
    ScriptExhausted,
    SettleRefused,
    StaleLease,
    StoreError,
    UnknownApproval,
    UnknownLedgerEntry,
    UnsupportedSchema,
    UsageError,
)
from .core.guards import Budgets
from .core.registry import CallContext, Registry, ToolSpec
from .core.states import State
from .core.types import (
    ArgumentsProgress,
    CallReady,
    CallStarted,
    Finish,
    ModelTurn,
    ResultEnvelope,
    ToolCall,
    Usage,
)

if TYPE_CHECKING:
    from .runtime.outcome import ApproverNotAllowed, Outcome, Policy, Price
    from .runtime.runner import Runner
    from .runtime.tools import ToolError

# The runtime (asyncio, threads, logging) loads on first use of one of these names, so that
# `import callbound` costs little more than pydantic itself (issue: benchmarks, import time).
_LAZY = {
    "ApproverNotAllowed": "callbound.runtime.outcome",
    "Outcome": "callbound.runtime.outcome",
    "Policy": "callbound.runtime.outcome",
    "Price": "callbound.runtime.outcome",
    "Runner": "callbound.runtime.runner",
    "ToolError": "callbound.runtime.tools",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'callbound' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__version__ = "0.1.0"

__all__ = [
    "ApprovalAlreadyDecided",
    "ApprovalChanged",
    "ApproverNotAllowed",
    "ArgumentsProgress",
    "BindingMismatch",
    "Budgets",
    "CallContext",
    "CallReady",
    "CallStarted",
    "CallboundError",
    "CanonicalizationError",
    "CorrelationError",
    "Decision",
    "EventTooLarge",
    "Finish",
    "IllegalTransition",
    "IntentTaken",
    "LedgerChanged",
    "ModelTurn",
    "NotApplied",
    "OperationBusy",
    "OperationExists",
    "Outcome",
    "PendingApproval",
    "Policy",
    "Price",
    "ProtocolViolation",
    "Registry",
    "ResultEnvelope",
    "Runner",
    "SchemaVersionError",
    "ScriptExhausted",
    "SettleRefused",
    "StaleLease",
    "State",
    "StoreError",
    "ToolCall",
    "ToolError",
    "ToolSpec",
    "UnknownApproval",
    "UnknownLedgerEntry",
    "UnsupportedSchema",
    "Usage",
    "UsageError",
    "__version__",
]
