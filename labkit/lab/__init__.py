"""The notebooks' harness, the top floor: nothing below imports it.

manifest (the notebooks in teaching order), sizes (each notebook's quick and full sizes), session (labkit.start),
records (the result log and machine card), plots, widgets, exercises (the checkers) and answers (the key), report,
doctor.
"""
