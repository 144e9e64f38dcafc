"""The instructor's pipeline on top of grading: release, batch autograde, nbgrader, reports.

- :mod:`.course`: build an nbgrader course directory, release, autograde a class;
- :mod:`.batch`: grade many submissions in parallel, idempotently;
- :mod:`.nbgrader_bridge`: nbgrader's autograde with the isolated harness's points;
- :mod:`.exchange`: nbgrader collect that refuses submissions filed under another's name;
- :mod:`.reports`: JUnit XML and Gradescope ``results.json``;
- :mod:`.seed`: the secret seed of the hidden cases;
- :mod:`.warm_cache`: the Inductor cache of the references' run, copied into every sandbox;
- :mod:`.gradescope`: a Gradescope autograder zip for one chapter, and what it runs there;
- :mod:`.lint`: the chapter notebooks checked against the declarations, derived cells written.

The top layer: imports :mod:`grader.grading` and below; nothing imports it but the CLI.
"""
