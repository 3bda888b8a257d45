"""The one exception type that reaches the user as a one-line message instead of a traceback."""


class UserError(Exception):
    """Bad input or a state the user can fix; the message is one line that says what to do."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code
