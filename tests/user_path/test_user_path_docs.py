"""The documentation a user reads lives in the repository: README, ARCHITECTURE and docs/ cite no
file outside it (the design notes it was built from are not shipped), and every relative link
resolves to a file of the checkout."""

import glob
import os
import re

import pytest

# A path that climbs out of the checkout ("../x", "../../x"): docs must not send readers there.
_CLIMBS_OUT = re.compile(r"(?<![\w.])\.\./[\w.-]")
# A Markdown file named in prose or code ("see notes.md"), checked against the repo's own files.
_MD_NAME = re.compile(r"(?<![\w.-])[\w./-]*?([\w-]+\.md)\b")
_BARE_SPEC = re.compile(r"(?<![\w/.-])(serving|fore)\.md")   # not preceded by docs/ or results/
_LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")


def _pages(repo_root):
  pages = [os.path.join(repo_root, "README.md"), os.path.join(repo_root, "ARCHITECTURE.md")]
  return pages + sorted(glob.glob(os.path.join(repo_root, "docs", "*.md")))


def test_docs_pages_exist(repo_root):
  for name in ("index.md", "serving.md", "ballast.md"):
    text = open(os.path.join(repo_root, "docs", name)).read()
    assert len(text) > 1000, name
  index = open(os.path.join(repo_root, "docs", "index.md")).read()
  for section in ("## Install", "## Train and resume", "## Where results go", "## Verdicts"):
    assert section in index


def _repo_md_names(repo_root):
  names = set()
  for d, subdirs, files in os.walk(repo_root):
    subdirs[:] = [s for s in subdirs if not s.startswith(".") and s not in ("workdirs", "build")]
    names |= {f for f in files if f.endswith(".md")}
  return names


def test_no_page_cites_a_file_outside_the_repository(repo_root):
  """Every .md file a page names exists in the checkout, and no page points above the root."""
  known = _repo_md_names(repo_root)
  bad = []
  for page in _pages(repo_root):
    text = open(page).read()
    rel = os.path.relpath(page, repo_root)
    bad += [f"{rel}: {m.group(0)}" for m in _CLIMBS_OUT.finditer(text)
            if not os.path.exists(os.path.normpath(os.path.join(
                os.path.dirname(page), text[m.start():].split(")")[0].split()[0])))]
    bad += [f"{rel}: {n}" for n in _MD_NAME.findall(text) if n not in known]
    in_docs = os.path.dirname(page).endswith("docs")
    for m in _BARE_SPEC.finditer(text):
      # Inside docs/ a bare "serving.md" is a sibling page; elsewhere it is an outside note.
      if not in_docs:
        bad.append(f"{rel}: {m.group(0)}")
  assert not bad, bad


def test_the_outside_check_catches_what_it_should(tmp_path):
  """The rule above on a made-up page: a climbing path and an unknown note are flagged."""
  text = "see ../notes/plan.md and design_plan.md; docs/ok.md is fine"
  assert _CLIMBS_OUT.search(text)
  assert _MD_NAME.findall(text) == ["plan.md", "design_plan.md", "ok.md"]


@pytest.mark.parametrize("page", ["README.md", "ARCHITECTURE.md", "docs/index.md",
                                  "docs/serving.md", "docs/ballast.md"])
def test_relative_links_resolve(repo_root, page):
  path = os.path.join(repo_root, page)
  missing = []
  for target in _LINK.findall(open(path).read()):
    if re.match(r"[a-z]+://", target) or target.startswith("mailto:"):
      continue
    if not os.path.exists(os.path.normpath(os.path.join(os.path.dirname(path), target))):
      missing.append(target)
  assert not missing, f"{page} links to missing files: {missing}"


def test_index_links_every_page(repo_root):
  """Every committed docs/*.md is linked from docs/index.md (pages being written, not yet
  committed, are not required)."""
  import subprocess
  index = open(os.path.join(repo_root, "docs", "index.md")).read()
  out = subprocess.run(["git", "ls-files", "docs/*.md"], cwd=repo_root, capture_output=True,
                       text=True)
  pages = ([os.path.basename(p) for p in out.stdout.split()] if out.returncode == 0 else
           [os.path.basename(p) for p in glob.glob(os.path.join(repo_root, "docs", "*.md"))])
  missing = [p for p in pages if p != "index.md" and f"]({p})" not in index]
  assert not missing, f"docs/index.md does not link {missing}"
