"""The documentation a user reads lives in the repository: README, ARCHITECTURE and docs/ cite no
file outside it (the design notes it was built from are not shipped), every relative link
resolves to a file of the checkout, the README stays a short front door whose Python runs, and
the generated API pages match the source."""

import ast
import glob
import importlib.util
import os
import re

import pytest

# A path that climbs out of the checkout ("../x", "../../x"): docs must not send readers there.
_CLIMBS_OUT = re.compile(r"(?<![\w.])\.\./[\w.-]")
# A Markdown file named in prose or code ("see notes.md"), checked against the repo's own files.
_MD_NAME = re.compile(r"(?<![\w.-])[\w./-]*?([\w-]+\.md)\b")
_BARE_SPEC = re.compile(r"(?<![\w/.-])(serving|fore)\.md")   # not preceded by docs/ or results/
_LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")


_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The README is the front door: the pitch, two commands, an example and the verdict counts. Its
# generated results block is counts and a link (about 1.5 KB), so the whole file fits in 10 KB.
_README_MAX_BYTES = 10_000


def _pages(repo_root):
  """README, ARCHITECTURE and every page under docs/ (guides, api/, history/)."""
  pages = [os.path.join(repo_root, "README.md"), os.path.join(repo_root, "ARCHITECTURE.md")]
  return pages + sorted(glob.glob(os.path.join(repo_root, "docs", "**", "*.md"), recursive=True))


def _relative_links(path):
  """The link targets of a page that point into the checkout (no URL, no mail, no bare anchor)."""
  return [t for t in _LINK.findall(open(path).read())
          if not re.match(r"[a-z]+://", t) and not t.startswith("mailto:")]


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
    # The climbing path ends at the first ")", "]", "`" or space ("[../x.md](../x.md)").
    bad += [f"{rel}: {m.group(0)}" for m in _CLIMBS_OUT.finditer(text)
            if not os.path.exists(os.path.normpath(os.path.join(
                os.path.dirname(page), re.split(r"[)\]`\s]", text[m.start():])[0])))]
    bad += [f"{rel}: {n}" for n in _MD_NAME.findall(text) if n not in known]
    in_docs = rel.startswith("docs" + os.sep)
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


@pytest.mark.parametrize("page", [os.path.relpath(p, _REPO_ROOT) for p in _pages(_REPO_ROOT)])
def test_relative_links_resolve(repo_root, page):
  """Every relative link of README.md, ARCHITECTURE.md and docs/**/*.md names an existing file."""
  path = os.path.join(repo_root, page)
  missing = [t for t in _relative_links(path)
             if not os.path.exists(os.path.normpath(os.path.join(os.path.dirname(path), t)))]
  assert not missing, f"{page} links to missing files: {missing}"


_ANCHOR_LINK = re.compile(r"\]\(([^)\s#]*)#([^)\s]+)\)")


def _slugs(path):
  """The anchors GitHub gives a page's headings: lower case, punctuation but "-" and "_"
  dropped, spaces as "-", a repeated heading suffixed -1, -2, ..."""
  slugs, seen, in_code = set(), {}, False
  for line in open(path, encoding="utf-8").read().split("\n"):
    if line.startswith("```"):
      in_code = not in_code
    m = None if in_code else re.match(r"#{1,6} (.*?)#*\s*$", line)
    if m:
      slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
      n = seen.get(slug, 0)
      seen[slug] = n + 1
      slugs.add(slug if n == 0 else f"{slug}-{n}")
  return slugs


@pytest.mark.parametrize("page", [os.path.relpath(p, _REPO_ROOT) for p in _pages(_REPO_ROOT)])
def test_section_links_resolve(repo_root, page):
  """A link to a section (`page.md#section`, `#section`) names a heading of that page."""
  path = os.path.join(repo_root, page)
  bad = []
  for target, anchor in _ANCHOR_LINK.findall(open(path, encoding="utf-8").read()):
    if re.match(r"[a-z]+://", target) or not (target == "" or target.endswith(".md")):
      continue
    dest = os.path.normpath(os.path.join(os.path.dirname(path), target)) if target else path
    if os.path.exists(dest) and anchor not in _slugs(dest):
      bad.append(f"{target}#{anchor}")
  assert not bad, f"{page} links to missing sections: {bad}"


def test_the_section_check_knows_github_anchors(tmp_path):
  page = tmp_path / "p.md"
  page.write_text("# T\n## Benchmark (`experiments/bench_serving.py`)\n## Results\n## Results\n"
                  "```\n# not a heading\n```\n")
  assert _slugs(str(page)) == {"t", "benchmark-experimentsbench_servingpy", "results",
                               "results-1"}


def test_the_link_check_sees_links(repo_root):
  """The page list and the link pattern are not vacuous: the README links its guides."""
  pages = [os.path.relpath(p, repo_root) for p in _pages(repo_root)]
  assert "README.md" in pages and os.path.join("docs", "index.md") in pages
  links = _relative_links(os.path.join(repo_root, "README.md"))
  assert "docs/index.md" in links and "results/SUMMARY.md" in links
  assert _LINK.findall("[a](x/y.md#sec) [b](https://e.org) [c](#top)") == ["x/y.md",
                                                                          "https://e.org"]


def test_index_reaches_every_page(repo_root):
  """Every committed page under docs/ is reachable from docs/index.md by following links (pages
  being written, not yet committed, are not required)."""
  import subprocess
  docs = os.path.join(repo_root, "docs")
  out = subprocess.run(["git", "ls-files", "docs"], cwd=repo_root, capture_output=True,
                       text=True)
  pages = ([os.path.normpath(os.path.join(repo_root, p)) for p in out.stdout.split()]
           if out.returncode == 0 else glob.glob(os.path.join(docs, "**", "*.md"),
                                                  recursive=True))
  pages = {p for p in pages if p.endswith(".md")}
  seen, todo = set(), [os.path.join(docs, "index.md")]
  while todo:
    page = todo.pop()
    if page in seen or not os.path.exists(page):
      continue
    seen.add(page)
    todo += [os.path.normpath(os.path.join(os.path.dirname(page), t))
             for t in _relative_links(page) if t.endswith(".md")]
  missing = sorted(os.path.relpath(p, repo_root) for p in pages - seen)
  assert not missing, f"not reachable from docs/index.md: {missing}"


def test_readme_is_a_front_door(repo_root):
  """The README fits in 10 KB with its generated block, keeps the block's markers, and shows the
  two commands and the links a new user needs."""
  text = open(os.path.join(repo_root, "README.md"), encoding="utf-8").read()
  size = len(text.encode("utf-8"))
  assert size < _README_MAX_BYTES, (
      f"README.md is {size} bytes (limit {_README_MAX_BYTES}); move detail to docs/")
  assert text.count("<!-- RESULTS:BEGIN -->") == 1 and text.count("<!-- RESULTS:END -->") == 1
  assert text.index("<!-- RESULTS:BEGIN -->") < text.index("<!-- RESULTS:END -->")
  for needle in ("make reproduce", "make test", "```python", "results/SUMMARY.md",
                 "docs/reproduction.md", "docs/environments.md"):
    assert needle in text, needle


def _python_blocks(text):
  return re.findall(r"^```python\n(.*?)^```", text, re.S | re.M)


def _tiny_budget(block):
  """The block with every `total_timesteps = N` cut to two PPO updates (2 x 4 envs x 128 steps),
  so running the README's example costs one compile, not a training run."""
  return re.sub(r"(total_timesteps\s*=\s*)[\d_eE.]+", r"\g<1>1024", block)


def test_readme_python_blocks_run(repo_root, capsys):
  """Each ```python block of the README runs as written, with its training budget made tiny."""
  text = open(os.path.join(repo_root, "README.md"), encoding="utf-8").read()
  blocks = _python_blocks(text)
  assert blocks, "the README has no Python example"
  for i, block in enumerate(blocks):
    if "make_train" in block or "make_learner" in block:
      assert "total_timesteps" in block, (
          f"README python block {i} trains without setting total_timesteps; set it so readers "
          "see the budget and this test can shrink it")
    code = compile(_tiny_budget(block), f"README.md:python-block-{i}", "exec")
    exec(code, {"__name__": f"readme_block_{i}"})   # pylint: disable=exec-used
    printed = capsys.readouterr().out
    assert "print(" not in block or printed.strip(), f"block {i} printed nothing"


def test_tiny_budget_rewrites_the_budget():
  block = "config.total_timesteps = 100_000\nx = 1\n"
  assert _tiny_budget(block) == "config.total_timesteps = 1024\nx = 1\n"
  assert _python_blocks("a\n```python\nprint(1)\n```\n```bash\nls\n```\n") == ["print(1)\n"]


def _api_builder(repo_root):
  path = os.path.join(repo_root, "docs", "api", "build_api_docs.py")
  spec = importlib.util.spec_from_file_location("_build_api_docs", path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def test_api_pages_are_up_to_date(repo_root, tmp_path):
  """docs/api/{core,algos,agents,repro}.md equal a fresh build from the source (the builder reads the
  source with ast and imports nothing, so this takes well under a second)."""
  builder = _api_builder(repo_root)
  written = builder.build(str(tmp_path))
  assert [os.path.basename(p) for p in written] == ["core.md", "algos.md", "agents.md", "repro.md"]
  stale = []
  for path in written:
    committed = os.path.join(repo_root, "docs", "api", os.path.basename(path))
    if not os.path.exists(committed) or open(committed).read() != open(path).read():
      stale.append(os.path.basename(path))
  assert not stale, (f"docs/api pages out of date: {stale}; "
                     "run python docs/api/build_api_docs.py")


def test_api_pages_name_the_main_entry_points(repo_root):
  """The API pages list what a user calls first, with signatures."""
  builder = _api_builder(repo_root)
  algos, core = builder.build_page("algos"), builder.build_page("core")
  assert "## `jaxrl_suite.algos.ppo`" in algos
  assert "make_learner, make_train, make_policy = on_policy.entry_points(ppo_loss)" in algos
  assert "- `gae(" in core and "## `jaxrl_suite.core.losses`" in core
  assert builder._summary("PPO (Schulman et al. 2017) as pure functions. More.") == (
      "PPO (Schulman et al. 2017) as pure functions.")
  method = ast.parse("def f(self, a, b: int = 1, *, c=2, **kw) -> None: ...").body[0]
  assert builder._signature(method, drop_self=True) == "f(a, b: int = 1, *, c=2, **kw) -> None"
  assert builder._signature(method) == "f(self, a, b: int = 1, *, c=2, **kw) -> None"
