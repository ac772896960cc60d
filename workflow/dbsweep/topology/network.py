"""Network namespaces for a topology: one per host (each node, the client), joined by veth pairs."""
from __future__ import annotations


def enter_argv(netns: str | None, user: str | None = None) -> list[str]:
    """The argv prefix that runs a program inside namespace netns (none: this one), as user when given
    (setns needs root, so the switch to user comes after it)."""
    prefix = ["ip", "netns", "exec", netns] if netns else []
    if user is not None and prefix:
        prefix += ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups", "--"]
    return prefix
