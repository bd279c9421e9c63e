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
