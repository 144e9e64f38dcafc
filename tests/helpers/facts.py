"""Facts about torch that the course's prose relies on, each pinned by one test.

A fact test carries ``@backs(PLACE, PHRASE)``: the file whose sentence relies on the fact
(a notebook, or a library module whose docstring states it) and a phrase of that
sentence, as written there. When torch changes and the test fails, its message names the
sentence to update; ``tests/facts/test_phrases.py`` checks that every phrase is still
where its test says, so a sentence cannot change without its test noticing.
"""
import contextlib
import functools
import logging


def backs(place: str, phrase: str):
    def decorate(test):
        @functools.wraps(test)
        def checked(*args, **kwargs):
            try:
                return test(*args, **kwargs)
            except AssertionError as error:
                raise AssertionError(f"torch changed: update the sentence with 「{phrase}」 in {place} ({error})") from error
        return checked
    return decorate


@contextlib.contextmanager
def logged(logger_name: str):
    """The records ``logger_name`` emits inside the block (the facts tests read torch's log texts)."""
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logger = logging.getLogger(logger_name)
    logger.addHandler(handler)
    try:
        yield records
    finally:
        logger.removeHandler(handler)
