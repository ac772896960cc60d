"""Errors a user can act on."""


class ConfigError(ValueError):
    """A config value is wrong; the message names the key and the value on one line."""
