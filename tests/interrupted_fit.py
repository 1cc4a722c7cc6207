"""Run ``fit()`` of one of the tests' estimators in a child process, for the tests that
interrupt (SIGINT) or kill its client (``job_processes.fit_in_child``).

    python interrupted_fit.py KEYWORDS_JSON JOB_NAME

KEYWORDS_JSON: the keywords of ``factories.estimator``. Exits 42 after ``fit()`` raised
KeyboardInterrupt, printing the job's status; 1 when ``fit()`` returned.
"""

import json
import sys

from factories import estimator

keywords, name = json.loads(sys.argv[1]), sys.argv[2]
est = estimator(**keywords)
try:
    est.fit(job_name=name, wait=True, logs=True)
except KeyboardInterrupt:
    status = est.latest_training_job.describe()["TrainingJobStatus"]
    print(f"driver: KeyboardInterrupt; job status {status}", flush=True)
    sys.exit(42)
print("fit() returned without an interrupt", flush=True)
sys.exit(1)
