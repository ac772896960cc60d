"""Errors a user can act on."""
import reprlib


class ConfigError(ValueError):
    """A config value is wrong; the message names the key and the value on one line."""


_SHOWN = reprlib.Repr()
_SHOWN.maxstring = 120
_SHOWN.maxother = 120
_SHOWN.maxlist = _SHOWN.maxtuple = _SHOWN.maxdict = _SHOWN.maxset = 6
_SHOWN.maxlevel = 2


def shown(value) -> str:
    """repr(value) cut to a readable length (reprlib): a message names a value without printing a list of
    millions (a YAML alias bomb) or a string of a megabyte."""
    return _SHOWN.repr(value)
