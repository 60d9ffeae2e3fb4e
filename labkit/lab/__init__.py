"""The notebooks' harness, the top floor: nothing below imports it.

Imports core, claims, predict, instruments, workloads. Its modules (this part is written by tools/render_docs.py):

answers: The answer key of every checked exercise, computed from the question's own numbers (the back of the book).
commands: The course's commands on any platform, make or not: ``python -m labkit lab | test | nb | book``.
doctor: ``python -m labkit doctor``: the pre-flight check for a learner's or an attendee's machine.
doctor_checks: The doctor's checks that need Jupyter or start processes: a kernel, the widgets' extension, a process
    group.
exercises: Exercise checkers: every exercise cell runs, solved or not.
manifest: The notebooks, in teaching order: one entry each, the one place that knows their order (every notebook).
notebook_sizes: Every notebook's experiment sizes: one frozen dataclass per notebook, with its quick and full
    instances.
plot_rules: The suite's plotting rules, and the audit that enforces them under ``LABKIT_AUDIT_PLOTS``.
plots: One plotting style for the whole suite, the helpers that keep plots readable, and the progress bar.
records: Records: the hardware + software card stamped on every result, and results saved as JSON.
report: ``make report``: execute every notebook headless with papermill and write one HTML report.
session: One visible set-up call per notebook: ``lab = labkit.start("batch_size", PROFILE, DEVICE)``.
sizes: Experiment sizes: the quick and full sizes of every notebook, in one place (the profile picks which).
source: Showing a mechanism's code in a lesson, checked against what the lesson's text says about it.
widgets: Interactive controls that also run headless (notebooks `start_here`, `inference_vs_training`, `memory`).
"""
