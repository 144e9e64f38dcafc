"""Errors the command line reports as one clear line instead of a traceback."""


class GraderError(Exception):
    """A problem with the grader's input (file, notebook, exercise id): English, for tools."""


class UnknownExercise(GraderError, KeyError):
    def __init__(self, exercise_id: str, known):
        close = sorted(k for k in known if k.split(".")[0] == str(exercise_id).split(".")[0])
        super().__init__(f"unknown exercise id {exercise_id!r}"
                         + (f"; this chapter has: {', '.join(close)}" if close else ""))

    def __str__(self) -> str:  # KeyError would add quotes
        return self.args[0]
