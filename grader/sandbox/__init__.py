"""The untrusted side: a separate process that runs a submission's cells and calls its
functions. It imports nothing that holds references, hidden seeds or verdicts."""
