"""The command line's exit codes, and how an error becomes one line on stderr and a code."""

from __future__ import annotations

import argparse
import enum
import errno
import os
import re

from magisterium_async._errors import (
    APIConnectionError,
    APITimeoutError,
    AuthenticationError,
    CacheError,
    CredentialsError,
    LoginRequiredError,
    MagisteriumError,
    OAuthError,
    OutputFileError,
    PlanRequiredError,
    RateLimitError,
    ResponseTooLargeError,
    SharedQuotaError,
    StateError,
    TaskNotFoundError,
    is_transient,
)
from magisterium_async._files import kind_of
from magisterium_async._harvest import why_not_written

__all__ = [
    "EXIT_CODES_HELP",
    "CliError",
    "ExitCode",
    "UsageError",
    "cli_words",
    "describe",
    "exit_code_for",
    "unwritable",
]


class ExitCode(enum.IntEnum):
    """What ``magisterium-async`` exits with; listed in ``--help``."""

    OK = 0
    ERROR = 1
    USAGE = 2
    AUTH = 3
    RATE_LIMITED = 4
    CONNECTION = 5
    NOT_FOUND = 6
    PARTIAL = 7
    INTERRUPTED = 130
    TERMINATED = 143


EXIT_CODES_HELP = """\
exit codes (the code says whose move it is):
  0    success
  1    any other error of the service or of the library
  2    usage: bad arguments or input, a file or URL that cannot be used as named (a
       Redis that refuses included), an output that cannot be written
  3    authentication: no token, a token refused, a sign-in that cannot be renewed, no plan
  4    rate limit still exceeded after the client's waits (429)
  5    network failure or timeout
  6    not found: a document, a task, or readings / martyrology for that date
  7    partial: a harvest ran to its end, some searches or fetches failed (--resume)
  130  interrupted (Ctrl-C)
  143  terminated (SIGTERM: timeout, systemd, Kubernetes, CI); stops as Ctrl-C does"""


class CliError(Exception):
    """An error to report as one line on stderr, exiting with ``code``: by default 2,
    the command line's move (an argument, a file named, a flag that cannot be used)."""

    def __init__(self, message: str, code: ExitCode = ExitCode.USAGE) -> None:
        super().__init__(message)
        self.code = code


class UsageError(SystemExit):
    """Bad arguments: what ``parser`` (the command's) found wrong, exiting 2.

    A :class:`SystemExit`, as argparse's own, so whoever parses and does not catch it
    still exits 2; :func:`~._app.main` catches it to print it, as JSON under ``--json``.
    """

    def __init__(self, parser: argparse.ArgumentParser, message: str) -> None:
        super().__init__(ExitCode.USAGE)
        self.parser = parser
        self.message = message


_CODES: tuple[tuple[type[BaseException] | tuple[type[BaseException], ...], ExitCode], ...] = (
    ((AuthenticationError, PlanRequiredError, CredentialsError, OAuthError), ExitCode.AUTH),
    (RateLimitError, ExitCode.RATE_LIMITED),
    (APIConnectionError, ExitCode.CONNECTION),
    (TaskNotFoundError, ExitCode.NOT_FOUND),
    # What the user named that cannot be used as named: an argument the client refused
    # before sending, a --cache or --redis, a harvest's state or output, stdout.
    (
        (ValueError, CacheError, SharedQuotaError, StateError, OutputFileError, OSError),
        ExitCode.USAGE,
    ),
)


def unwritable(error: OSError, option: str = "", path: str | None = None) -> CliError:
    """The one refusal of an output ``error`` says cannot be written (a full disk, a
    reader gone): ``option``'s ``path``, else stdout, the one file not named."""
    parent = os.path.dirname(os.path.abspath(path or "."))
    if path is not None and error.errno == errno.ENOENT and kind_of(parent) == "missing":
        why = f"the directory {parent} does not exist"
    elif path is not None and error.errno == errno.ENOTDIR:
        why = f"a part of {parent} is not a directory"
    else:
        why = why_not_written(error)
    return CliError(f"cannot write {'stdout' if path is None else f'{option} {path}'}: {why}")


def exit_code_for(error: BaseException) -> ExitCode:
    """The exit code for ``error`` (a :class:`MagisteriumError`, a ``ValueError``...)."""
    if isinstance(error, CliError):
        return error.code
    return next((code for kinds, code in _CODES if isinstance(error, kinds)), ExitCode.ERROR)


# The library's words for its arguments, and the command line's for the same thing.
_CLI_WORDS = (
    (re.compile(r"\bpass token= instead"), "give the token by --token-file or $MAGISTERIUM_TOKEN"),
    (re.compile(r"\bpass token=,? ?"), "pass --token-file PATH, "),
    (re.compile(r"^base_url\b"), "--base-url (or $MAGISTERIUM_BASE_URL)"),
    (re.compile(r"^proxy\b"), "--proxy"),
    (re.compile(r"\bmax_retries\b"), "--max-retries"),
    (re.compile(r"^timeout\b"), "--timeout"),
    (re.compile(r"\(credentials=\)"), "(--credentials)"),
    (re.compile(r"^document_id\b"), "the document id"),
    (re.compile(r"^task_id\b"), "the task id"),
    (re.compile(r"^context_id\b"), "--context-id"),
    # The emulator's config (the emulator command's flags set its fields).
    (re.compile(r"^default\b"), "--default-limit"),
    (re.compile(r"^expensive\b"), "--expensive-limit"),
    (
        re.compile(r"^fault rates\b"),
        "--error-rate, --drop-rate and --rate-limit-rate, shares of the requests,",
    ),
)


def cli_words(text: str) -> str:
    """A library message in the command line's words: flags and environment variables,
    never a constructor's argument (``pass token=`` becomes ``--token-file``)."""
    for pattern, words in _CLI_WORDS:
        text = pattern.sub(words, text)
    return text


def describe(error: BaseException, attempts: int = 1) -> str:
    """``error`` as one line in the command line's words, with a hint where one helps;
    ``attempts``: the requests the call sent (said when it retried)."""
    text = cli_words(" ".join(str(error).split()) or type(error).__name__)
    if isinstance(error, OutputFileError) and isinstance(error.__cause__, OSError):
        return str(unwritable(error.__cause__, "--out", error.path))  # a full disk
    if isinstance(error, MagisteriumError) and attempts > 1 and is_transient(error):
        text += f" (after {attempts} attempts)"
    if isinstance(error, LoginRequiredError):
        offline = text.startswith("no API token")
        return text + ("; --emulator tries every command offline, with no token" if offline else "")
    if isinstance(error, AuthenticationError):
        return (
            f"{text}: the token was refused; check MAGISTERIUM_TOKEN or --token-file, "
            "or sign in again with `magisterium-async login`"
        )
    if isinstance(error, PlanRequiredError):
        return f"{text}: the A2A API needs a Pro, Organization or Enterprise plan"
    if isinstance(error, RateLimitError):
        wait = f"; the service asks to wait {error.retry_after:g} s" if error.retry_after else ""
        return f"rate limit still exceeded after waiting{wait} ({text})"
    if isinstance(error, ResponseTooLargeError):
        return (
            f"{text.partition(':')[0]}: the answer is larger than {error.limit / 2**20:g} MiB, "
            "more than the service ever sends; reading stopped there (is a proxy or another "
            "server answering?)"
        )
    if isinstance(error, APITimeoutError):
        return f"timed out: {text}; raise the timeout with --timeout SECONDS"
    if isinstance(error, APIConnectionError):
        return f"could not reach the service: {text}"
    if isinstance(error, TaskNotFoundError):
        return f"task not found; tasks are kept 24 hours ({text})"
    if isinstance(error, OSError) and error.strerror:
        if error.filename is not None:
            return f"{error.filename}: {error.strerror}"
        return str(unwritable(error))  # a write to stdout: the one file not named
    if isinstance(error, MagisteriumError | ValueError | CliError):
        return text
    return f"{type(error).__name__}: {text}"
