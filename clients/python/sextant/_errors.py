"""The client's exceptions: every failure a caller can act on carries the server's message."""


class SextantError(Exception):
    """A call the run refused or could not answer.

    code: the gRPC status code's name ("NOT_FOUND", "INVALID_ARGUMENT", "UNAVAILABLE", ...), or
    "COMMAND" when an offline `sextant ask`/`sextant tell` command failed.
    message: the server's (or the command's) own words.
    """

    def __init__(self, what, code, message):
        self.what = what
        self.code = code
        self.message = message
        super().__init__(f"{what}: {message} ({code})")


class NotInTrialError(RuntimeError):
    """sextant.report() or sextant.params() outside a trial that a Sextant worker launched."""
