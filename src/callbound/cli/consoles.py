"""The consoles every command prints through, and what they do with output that cannot be written.

- A reader that closes early (``callbound run ... | head -4``): rich's ``Console.on_broken_pipe``
  raises ``SystemExit(1)``. Printed from a runner's ``on_transition`` observer, that unwound a drive
  between a write handler's return and the commit that records it, leaving the write STARTED, the
  operation EXECUTING, and exit 1 (review round 16, r2 F1). ``CliConsole`` goes quiet instead: what
  is still printed is dropped, the drive goes on to its commit, and the command exits with the code
  its outcome gives (cli/errors.py says which codes those are).
- Text with no form in the output's encoding (a lone surrogate a model's JSON text may carry,
  ``"\\ud800"``): rich raised ``UnicodeEncodeError`` after the operation COMPLETED, a traceback and
  exit 1 from ``run``, ``resume`` and ``ops show --json`` (r2 F2). It is written as its backslash
  escape, as ``callbound parse`` does; inside a JSON string that escape loads back equal.
- Help and usage errors are printed by typer through consoles of its own (``callbound --help | head``):
  rich's ``SystemExit(1)`` made ``--help`` exit 1, the code of tampering, and a usage error too
  (review round 20, e). ``adopt_typer_consoles`` makes them ``CliConsole`` s: help exits 0, a usage
  error 2, as when the whole text is read.
- Output that cannot be written for another reason (``> /dev/full``, a full disk, an I/O error): rich let
  the ``OSError`` out, a traceback and exit 1, the code of tampering, from ``audit verify > report``
  (review round 20, e). The console goes quiet as at a closed pipe, the command finishes what it was
  doing, and ``write_failure`` names the error: the process then says so on stderr and exits 2 where the
  command would have exited 0 (an empty or cut report is no success), keeping any other code.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from typing import IO, Any

from rich.console import Console
from rich.segment import Segment

# The first error met writing each stream ("stdout", "stderr") other than a closed pipe.
_write_errors: dict[str, OSError] = {}


def note_write_error(stream: str, exc: OSError) -> None:
    """Record that ``stream`` could not be written (see ``write_failure``)."""
    _write_errors.setdefault(stream, exc)


def write_failure() -> str | None:
    """Why standard output could not be written (not a closed pipe), or None."""
    exc = _write_errors.get("stdout")
    if exc is None:
        return None
    return (
        f"the output could not be written to standard output ({exc.strerror or exc}): what was printed "
        "is incomplete; check the file or device it goes to (a full disk?)"
    )


def discard(stream: IO[str] | Any) -> None:
    """Point ``stream``'s file descriptor at ``os.devnull``: its reader is gone. What is still
    buffered, or written later, goes nowhere instead of raising ``BrokenPipeError`` again (at
    interpreter exit Python would print "Exception ignored ... BrokenPipeError" and exit 120)."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):  # a test runner's in-memory stream
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


def encodable(text: str, encoding: str | None) -> str:
    """``text`` with each character ``encoding`` cannot write shown as its backslash escape."""
    codec = encoding or "utf-8"
    try:
        text.encode(codec)
    except UnicodeEncodeError:
        return text.encode(codec, "backslashreplace").decode(codec)
    except LookupError:  # a stream that names no codec Python knows: left to the stream
        pass
    return text


class CliConsole(Console):
    """A rich console that goes quiet when its reader closes the pipe, and escapes what its stream's
    encoding cannot write (see the module docstring)."""

    broken_pipe = False

    def on_broken_pipe(self) -> None:
        # rich's own: quiet, stdout to devnull, then SystemExit(1), which no observer guard catching
        # Exception stops. Quiet only, and the stream this console writes (stderr too) to devnull.
        self.quiet = True
        self.broken_pipe = True
        discard(self.file)

    def on_write_error(self, exc: OSError) -> None:
        """Quiet, as at a closed pipe, and the error recorded for the exit (``write_failure``)."""
        self.quiet = True
        note_write_error("stderr" if self.stderr else "stdout", exc)
        discard(self.file)  # what is still buffered goes nowhere, instead of failing again at exit

    def _check_buffer(self) -> None:
        try:
            super()._check_buffer()
        except BrokenPipeError:  # a rich without on_broken_pipe lets it out
            self.on_broken_pipe()
        except OSError as exc:  # a full disk, an I/O error
            self.on_write_error(exc)

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        return encodable(super()._render_buffer(buffer), getattr(self.file, "encoding", None))


def adopt_typer_consoles() -> None:
    """Make the consoles typer prints help and usage errors through behave as ``CliConsole`` (see the
    module docstring). typer builds one per message (``rich_utils._get_rich_console``); a typer without
    that function is left as it is."""
    try:
        from typer import rich_utils
    except ImportError:  # pragma: no cover - typer's rich output is optional
        return
    make = getattr(rich_utils, "_get_rich_console", None)
    if make is None or getattr(make, "callbound_adopted", False):
        return

    def cli_console(*args: Any, **kwargs: Any) -> Any:
        console = make(*args, **kwargs)
        if type(console) is Console:  # a plain rich console: same settings, CliConsole's behaviour
            console.__class__ = CliConsole
        return console

    cli_console.callbound_adopted = True  # type: ignore[attr-defined]
    rich_utils._get_rich_console = cli_console


def finish_output() -> None:
    """Flush stdout and stderr before the process exits, a closed pipe discarded as above."""
    for stream in (sys.stdout, sys.stderr):
        if stream is None:
            continue
        try:
            stream.flush()
        except BrokenPipeError:
            discard(stream)
        except OSError as exc:  # a full disk, an I/O error: what was buffered is lost
            note_write_error("stdout" if stream is sys.stdout else "stderr", exc)
            discard(stream)
        except ValueError:  # closed: nothing more to write there
            pass
