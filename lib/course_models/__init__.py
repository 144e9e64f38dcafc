"""Small example models shared by the notebooks and the grader's cases: ``chNN_models`` for chapter NN."""
