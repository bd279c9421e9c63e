"""repro.summary: the verdict tables generated from a folder of results records."""

import json
import os

import pytest

from jaxrl_suite.core import results
from jaxrl_suite.repro import summary


def _record(d, name, verdicts, mode="full", **extra):
  claims = [results.claim(f"{name} claim {i}", "paper | fig", "1.0", v, (0.5, 1.5), "")
            for i, v in enumerate(verdicts)]
  results.write_results(name, mode=mode, config={}, seeds=[0], claims=claims, wall_time_s=1.0,
                        results_dir=d)
  if extra:
    path = os.path.join(d, f"{name}.json")
    with open(path) as f:
      rec = json.load(f)
    rec.update(extra)
    with open(path, "w") as f:
      json.dump(rec, f)


@pytest.fixture()
def folder(tmp_path):
  d = str(tmp_path)
  _record(d, "zeta", ["reproduced", "contradicted"])
  _record(d, "alpha", ["reproduced"], mode="quick")
  _record(d, "beta", ["inconclusive"])
  _record(d, "adhoc", ["reproduced"], adhoc_inputs=["--eval_trace=x.csv"])
  open(os.path.join(d, "zeta.png"), "wb").close()
  with open(os.path.join(d, "broken.json"), "w") as f:
    f.write("{not json")
  with open(os.path.join(d, "list.json"), "w") as f:
    json.dump([1, 2], f)
  return d


def test_records_in_the_given_order_then_by_name_without_adhoc_or_broken_files(folder):
  recs = summary.load_records(folder, ["zeta", "beta"])
  assert [r["name"] for r in recs] == ["zeta", "beta", "alpha"]
  assert all(r["_file"] == r["name"] for r in recs)


def test_summary_table_has_one_row_per_claim_with_links_and_provenance(folder):
  recs = summary.load_records(folder, ["zeta", "beta"])
  rows = summary.summary_table(recs, folder, link_prefix="results/").splitlines()[2:]
  assert len(rows) == 4
  assert rows[0].startswith("| zeta | zeta claim 0 | paper \\| fig | ")
  assert "**reproduced** | [report](results/zeta.md) [plot](results/zeta.png) | full |" in rows[0]
  assert "[plot]" not in rows[2]   # beta has no PNG: no link
  assert rows[3].split(" | ")[-2] == "quick"


def test_counts_and_the_readme_table(folder):
  recs = summary.load_records(folder)
  counts = summary.verdict_counts(recs)
  assert counts == {"reproduced": 2, "contradicted": 1, "inconclusive": 1}
  assert summary.counts_text(counts) == "contradicted 1, inconclusive 1, reproduced 2"
  assert summary.counts_text({}) == "none"
  table = summary.readme_table(recs, folder).splitlines()
  # columns in ROW_VERDICTS order, only verdicts some claim got
  assert table[0] == "| reproduction | claims | reproduced | contradicted | inconclusive | " \
                     "details |"
  zeta = next(r for r in table if r.startswith("| zeta"))
  assert zeta.startswith("| zeta | 2 | 1 | 1 | 0 | [report](results/zeta.md)")


def test_replace_block_and_missing_markers():
  text = "intro\n<!-- B -->\nold\n<!-- E -->\nafter\n"
  assert summary.replace_block(text, "<!-- B -->", "<!-- E -->", "<!-- B -->\nnew\n") == \
      "intro\n<!-- B -->\nnew\n<!-- E -->\nafter\n"
  with pytest.raises(ValueError, match="README.md lacks the markers <!-- B -->"):
    summary.replace_block("no markers", "<!-- B -->", "<!-- E -->", "", "README.md")


def test_cells_escape_pipes_and_newlines():
  assert summary.cell(" a|b\nc ") == "a\\|b c"


# ---- the two writers: SUMMARY.md and the README block ------------------------------------------

class _Run:   # a runner.StageResult's fields, as the writer reads them
  def __init__(self, name, status, wall_s, cpu_s, note):
    self.name, self.status, self.wall_s, self.cpu_s, self.note = name, status, wall_s, cpu_s, note


def test_write_summary_known_answer(folder, tmp_path):
  committed = os.path.join(str(tmp_path), "committed")
  path = summary.write_summary(folder, ["zeta", "beta", "gamma"],
                               run=[_Run("zeta", "ok", 12.4, 30.6, ""),
                                    _Run("gamma", "failed", 1.0, 0.0, "rc=1 | see log")],
                               committed_dir=committed)
  assert path == os.path.join(folder, "SUMMARY.md")
  text = open(path).read()
  lines = text.split("\n")
  assert lines[0] == "# Reproduction summary"
  assert "Modes present: full, quick" in lines[2]
  # a quick record: the smoke-check warning, pointing at the committed folder
  assert lines[4].startswith("**Quick mode: the verdicts below are smoke checks.**")
  assert lines[4].endswith(f"full-mode records in `{committed}/` (`{committed}/SUMMARY.md`).")
  top, every = text.split("## Every claim")
  assert "## When does RL beat a tuned hand-written heuristic?" in top
  assert "Verdicts: contradicted 1, inconclusive 1, reproduced 2" in every
  assert "No results yet for: gamma." in every       # in the order, no record
  assert every.endswith("## Last run\n\n| reproduction | status | wall time | CPU time | note |\n"
                        "|---|---|---|---|---|\n| zeta | ok | 12 s | 31 s |  |\n"
                        "| gamma | failed | 1 s | 0 s | rc=1 \\| see log |\n")
  # no row with an interval on the layer: no cross-domain figure, and a stale one is removed
  assert not os.path.exists(os.path.join(folder, summary.CROSSDOMAIN_PNG))
  open(os.path.join(folder, summary.CROSSDOMAIN_PNG), "wb").close()
  summary.write_summary(folder, ["zeta"])
  assert not os.path.exists(os.path.join(folder, summary.CROSSDOMAIN_PNG))
  assert "## Last run" not in open(path).read()


def test_update_readme_known_answer(folder, tmp_path):
  readme = tmp_path / "README.md"
  readme.write_text(f"top\n{summary.README_BEGIN}\nold\n{summary.README_END}\nend\n")
  assert summary.update_readme(str(readme), folder, ["zeta", "alpha", "beta", "gamma"])
  text = readme.read_text()
  block = text[text.index(summary.README_BEGIN):text.index(summary.README_END)]
  assert block.split("\n")[2] == "" and block.split("\n")[3].startswith(
      "Mode: full. 3 claims; verdicts: contradicted 1, inconclusive 1, reproduced 1. ")
  assert "| zeta | 2 | 1 | 1 | 0 | [report](results/zeta.md) [plot](results/zeta.png) |" in block
  assert "alpha" not in block.split("No full-mode")[0]           # quick: not counted
  assert block.endswith("No full-mode results yet for: alpha, gamma.\n\n")
  assert text.startswith("top\n") and text.endswith(f"{summary.README_END}\nend\n")
  assert not summary.update_readme(str(readme), folder, ["zeta", "alpha", "beta", "gamma"])
  assert summary.update_readme(str(readme), folder, ["zeta", "alpha", "beta"], ("quick", "full"))
  assert "Mode: quick/full. 4 claims" in readme.read_text()
