"""Reach the host's tools from a program that maf-sandbox runs with host tools.

    import maf_host_tools

    hits = maf_host_tools.call("search", query="otters")
    hits = maf_host_tools.search(query="otters")   # the same call, spelled as a function

Each call claims the next free number in the calls directory, publishes a request there and
waits for the host's answer. The host checks every call itself (the cap, the budgets, the
arguments), so this module grants nothing: it only carries the call across.

A refusal raises HostToolError with the host's sentence as its message; a program can catch
it and carry on.
"""

import json
import os
import time

_CALLS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "host_tool_calls")
# The wait for an answer starts short and doubles to the cap: an answer often comes within
# milliseconds of the host's look, and a slow one costs no more than the cap's polling.
_POLL_FIRST_SECONDS = 0.005
_POLL_SECONDS = 0.05


def _patience():
    # How long one call waits for its answer. The host sets it to at least the run's own
    # bound, so the guest never gives up on a call the host is still serving.
    try:
        seconds = float(os.environ.get("MAF_HOST_TOOLS_CALL_TIMEOUT", "300"))
    except ValueError:
        return 300.0
    return seconds if seconds > 0 else 300.0


class HostToolError(RuntimeError):
    """The host refused the call, or never answered it; the message says which."""


def _take_number():
    # Exclusive create is the one step exactly one caller wins, across threads and forked
    # processes alike, so no two callers ever publish under one number.
    n = 1
    while True:
        ident = "%04d" % n
        try:
            fd = os.open(os.path.join(_CALLS, ident + ".claim"), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        except FileExistsError:
            n += 1
            continue
        os.close(fd)
        return ident


def _put(target, document):
    # Written beside the target and renamed over it, so the host never reads half a request.
    part = target + ".part"
    with open(part, "w", encoding="utf-8") as out:
        out.write(json.dumps(document))
    os.replace(part, target)


def call(name, **arguments):
    """Call the host tool `name` with keyword `arguments` and return what it returned."""
    os.makedirs(_CALLS, exist_ok=True)
    ident = _take_number()
    request = os.path.join(_CALLS, ident + ".request.json")
    try:
        _put(request, {"id": ident, "name": name, "arguments": arguments})
    except BaseException:
        # The host serves numbers strictly in order; a number taken and never published
        # would hold every later call behind it, so it is marked abandoned instead.
        try:
            _put(request, {"id": ident, "abandoned": True})
        except Exception:
            pass
        raise
    response = os.path.join(_CALLS, ident + ".response.json")
    give_up = time.monotonic() + _patience()
    pause = _POLL_FIRST_SECONDS
    while time.monotonic() < give_up:
        try:
            with open(response, encoding="utf-8") as answer:
                reply = json.load(answer)
        except (OSError, ValueError):
            # Not there yet, or still being written.
            time.sleep(pause)
            pause = min(_POLL_SECONDS, pause * 2)
            continue
        if isinstance(reply, dict) and "refusal" in reply:
            raise HostToolError(str(reply["refusal"]))
        if isinstance(reply, dict) and "value" in reply:
            return reply["value"]
        raise HostToolError("the host's answer to call %s is not one this module reads" % ident)
    raise HostToolError("the host did not answer call %s (%s) in time" % (ident, name))


def __getattr__(name):
    # maf_host_tools.search(...) is call("search", ...). The host decides what exists.
    if name.startswith("__"):
        raise AttributeError(name)

    def tool(**arguments):
        return call(name, **arguments)

    tool.__name__ = name
    return tool
