"""Services shared by the admin, the command line and the jobs: functions over a SQLAlchemy session or plain
values, no Flask, no Click. The caller commits.

- :mod:`services.accounts`: the admin's accounts (:mod:`~services.accounts.users`) and API tokens
  (:mod:`~services.accounts.tokens`);
- :mod:`services.review`: review decisions on matches;
- :mod:`services.evidence`: a match's passages as shown (:mod:`~services.evidence.passages`) and its signed
  bundle (:mod:`~services.evidence.bundle`);
- :mod:`services.queries`: the query models, one listing of matches and one of works (filters, order, pages),
  and the dashboard's counts;
- :mod:`services.exports`: match lists and roll-ups as CSV;
- :mod:`services.pdf`: HTML to PDF for takedown notices.
"""
