"""What the @a2a-js/sdk tests share: where the JS client lives, which SDKs ``npm ci``
installed, and the steps the client runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

JS = Path(__file__).resolve().parent / "js"
SDKS = {"03": "0.3.14", "13": "1.3.0"}


def _installed(key: str) -> str | None:
    manifest = JS / "node_modules" / f"a2a-js-{key}" / "package.json"
    try:
        version: str = json.loads(manifest.read_text())["version"]
    except (OSError, ValueError, KeyError):
        return None
    return version


def missing_sdks() -> list[str]:
    """The keys of the SDKs ``npm ci`` has not installed (at the version pinned)."""
    return [key for key, version in SDKS.items() if _installed(key) != version]


def send(label: str, skill: str | None, *parts: dict[str, Any], **step: Any) -> dict[str, Any]:
    """A ``message/send`` step: the parts, to ``skill`` (``token=`` sends another token).

    Arguments:
        label: the step's name in the outcome.
        skill: the skill asked for, or ``None`` for none.
        parts: the message's parts.
        step: more fields of the step.
    """
    return {"label": label, "call": "send", "skill": skill, "parts": list(parts), **step}
