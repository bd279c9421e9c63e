"""docs/reproduction.md: its example runs and prints the verdict the page says it prints."""

import os
import re
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_the_docs_example_runs_and_prints_what_the_page_says():
  text = open(os.path.join(REPO, "docs", "reproduction.md"), encoding="utf-8").read()
  code = re.search(r"```python\n(.*?)```", text, re.S).group(1)
  assert len(code.strip().splitlines()) <= 15
  env = dict(os.environ, PYTHONPATH=REPO)
  out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       timeout=120)
  assert out.returncode == 0, out.stderr
  assert out.stdout.startswith("1.157x [1.127x, 1.187x] partly reproduced")
  assert "prints `1.157x [1.127x, 1.187x] partly reproduced" in text


def test_the_docs_name_every_verdict_and_the_calibrated_thresholds():
  from jaxrl_suite.repro import intervals, verdicts
  text = open(os.path.join(REPO, "docs", "reproduction.md"), encoding="utf-8").read()
  for word in verdicts.WORDS + (verdicts.EXCEEDS,):
    assert f"**{word}**" in text or f"| {word} |" in text, word
  assert f"{intervals.TWO_WAY_MIN_SEEDS} seeds x {intervals.TWO_WAY_MIN_WINDOWS} windows" in text
  assert f"below {intervals.BCA_MIN_UNITS} units" in text
